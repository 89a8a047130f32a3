"""The simulator's loop shape (common.cuh): GRID_STRIDE_LOOP gives a simulated thread one contiguous run,
GRID_STRIDE_FOLD and STRIDED_FOLD sum in 16 lanes, UNIT_STRIDES adds a unit-stride copy of a loop. A GPU
runs the grid-stride form; GRID_STRIDE_GPU_FORM builds that form on the simulator, so the GPU's loops stay
under test here: the same kernels, both builds, against NumPy, with strides, odd sizes and grids of every
shape (a thread with no element, a run cut at n)."""
import numpy as np
import pytest

import gpublas
from gpublas.runtime import launch
from gpublas.runtime.launch import get_kernel

FORMS = [{}, {"GRID_STRIDE_GPU_FORM": 1}]
SIZES = [1, 37, 1000, 4099]
GRIDS = [(1, 32), (3, 64), (7, 256)]  # (blocks, threads): threads without an element, runs cut at n


@pytest.mark.parametrize("form", FORMS, ids=["sim", "gpu"])
def test_axpy_copy_and_scal_visit_every_element_once(form, rng):
    axpy = get_kernel("blas1", "axpy_real", np.float64, **form)
    copy = get_kernel("blas1", "copy_real", np.float64, **form)
    scal = get_kernel("blas1", "scal_real", np.float64, **form)
    for n in SIZES:
        for inc in (1, 2, -1):
            x = rng.standard_normal(n * abs(inc))
            y = rng.standard_normal(n * abs(inc))
            for grid, block in GRIDS:
                dx, dy = gpublas.to_device(x), gpublas.to_device(y)
                xv, yv = dx[::inc], dy[::inc]  # inc < 0: the view starts at the last element, as BLAS's
                axpy(grid, block, n, 0.5, xv, inc, yv, inc, views=True)
                want = y.copy()
                want[::abs(inc)] += 0.5 * x[::abs(inc)]
                np.testing.assert_array_equal(dy.get(), want, err_msg=f"n {n}, inc {inc}, grid {grid}x{block}")
                copy(grid, block, n, xv, inc, yv, inc, views=True)
                want[::abs(inc)] = x[::abs(inc)]
                np.testing.assert_array_equal(dy.get(), want)
                scal(grid, block, n, 3.0, yv, inc, views=True)  # the simulator's unit stride: its unrolled run
                want[::abs(inc)] *= 3.0
                np.testing.assert_array_equal(dy.get(), want)


@pytest.mark.parametrize("form", FORMS, ids=["sim", "gpu"])
def test_folds_sum_and_max_every_element(form, rng):
    """dot_partial and amax_partial (GRID_STRIDE_FOLD), then sum_final / amax_final; reduce_rows' parts
    (STRIDED_FOLD): within the sum's rounding of NumPy's float64 result, the max exactly; a NaN wins."""
    dtype = np.float32
    dot = get_kernel("blas1", "dot_partial", dtype, **form)
    amax = get_kernel("blas1", "amax_partial", dtype, **form)
    rows = get_kernel("reduce", "reduce_rows", dtype, **form)
    for n in SIZES:
        x = rng.standard_normal(n).astype(dtype)
        y = rng.standard_normal(n).astype(dtype)
        dx, dy = gpublas.to_device(x), gpublas.to_device(y)
        for grid, block in GRIDS:
            part = gpublas.empty(grid, dtype)
            dot(grid, block, n, dx, 1, dy, 1, 0, part)
            want = x.astype(np.float64) @ y.astype(np.float64)
            bound = 4 * n * np.finfo(dtype).eps * (np.abs(x.astype(np.float64)) @ np.abs(y))
            assert abs(part.get().astype(np.float64).sum() - want) <= bound, (n, grid, block)
            amax(grid, block, n, dx, 1, part)
            assert part.get().max() == np.abs(x).max()
            val = gpublas.empty(grid, dtype)
            rows(grid, block, dx, None, val, None, 0, n, grid, 1)  # RED_SUM, `grid` parts of one row
            assert abs(val.get().astype(np.float64).sum() - x.astype(np.float64).sum()) <= \
                4 * n * np.finfo(dtype).eps * np.abs(x).astype(np.float64).sum()
            rows(grid, block, dx, None, val, None, 1, n, grid, 1)  # RED_MAX, the value alone: a fold too
            got = val.get()[:min(grid, n)] if n >= grid else val.get()[:n]
            assert got.max() == x.max() and (got <= x.max()).all()
        x[n // 2] = np.nan
        amax(3, 64, n, gpublas.to_device(x), 1, part := gpublas.empty(3, dtype))
        assert np.isnan(part.get()).any()
        rows(1, 64, gpublas.to_device(x), None, part, None, 2, n, 1, 1)  # RED_MIN of one part: the NaN wins
        assert np.isnan(part.get()[0])


@pytest.mark.parametrize("form", FORMS, ids=["sim", "gpu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nrm2_partials_and_final_in_both_forms(form, dtype, rng):
    """nrm2_partial's plain fold and its second walk (Blue's sums, for doubles whose sum leaves the range), then
    nrm2_final, on grids of every shape: within a few ulps of NumPy's float64 norm (float32 squares summed in
    double); the tiny and huge vectors take the second walk."""
    part_k = get_kernel("blas1", "nrm2_partial", dtype, **form)
    final = get_kernel("blas1", "nrm2_final", dtype, **form)
    scales = [1.0] + ([1e-170, 1e170] if dtype == np.float64 else [1e-30, 1e30])
    for n in SIZES:
        for scale in scales:
            x = (rng.standard_normal(n) * scale).astype(dtype)
            want = float(np.linalg.norm(x.astype(np.float64) / scale)) * scale
            for grid, block in GRIDS:
                part, out = gpublas.empty(3 * grid, np.float64), gpublas.empty(1, dtype)
                part_k(grid, block, n, gpublas.to_device(x), 1, part)
                final(1, 32, grid, part, out)
                got = float(out.get()[0])
                assert got == pytest.approx(want, rel=4 * float(np.finfo(dtype).eps)), (n, scale, grid, block)


def test_sim_runs_are_contiguous_and_fold_in_lanes(rng):
    """On the simulator thread g of T gets [g * run, (g + 1) * run), run = ceil(n / T) rounded up to 16:
    a dot whose x holds one 1 at position p lands in partial p // (256 * run) of 256-thread blocks, where
    the GPU's form (thread p % (blocks * 256)) puts it in block (p % (blocks * 256)) // 256."""
    if not launch.simulated():
        pytest.skip("the simulator's loop shape")
    n, blocks = 40000, 4
    run = -(-(-(-n // (blocks * 256))) // 16) * 16
    for p in (0, 17, 5000, 39999):
        x = np.zeros(n, np.float32)
        x[p] = 1
        dx, ones = gpublas.to_device(x), gpublas.ones(n, np.float32)
        for form, block_of in ((FORMS[0], p // (256 * run)), (FORMS[1], (p % (blocks * 256)) // 256)):
            part = gpublas.empty(blocks, np.float32)
            get_kernel("blas1", "dot_partial", np.float32, **form)(blocks, 256, n, dx, 1, ones, 1, 0, part)
            assert part.get().tolist() == [float(b == block_of) for b in range(blocks)], (p, form)


@pytest.mark.parametrize("form", [{}, {"GEMV_GPU_FORM": 1}], ids=["sim", "gpu"])
def test_gemv_n_both_forms(form, rng):
    """gemv_n_warp: the simulator's thread per run of rows (any launch shape) and the GPU's warp per row
    with its shuffle tree (8 warps a block), against NumPy; beta == 0 never reads y (NaN there stays out)."""
    k = get_kernel("gemv", "gemv_n_warp", np.float64, **form)
    for m, n in [(1, 1), (37, 5), (9, 300)]:
        a, x, y = rng.standard_normal((m, n)), rng.standard_normal(n), rng.standard_normal(m)
        for beta in (0.0, 0.5):
            dy = gpublas.to_device(y if beta else np.full(m, np.nan))
            grid = ((m + 7) // 8, 256) if form else launch.geometry_1d(m)
            k(*grid, m, n, 2.0, gpublas.to_device(a), n, gpublas.to_device(x), beta, dy, 0)
            np.testing.assert_allclose(dy.get(), 2 * a @ x + beta * y, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("form", [{}, {"GEMV_GPU_FORM": 1}], ids=["sim", "gpu"])
def test_gemv_t_both_forms(form, rng):
    """gemv_t_partial then gemv_t_finish: the simulator's thread per GEMV_SIM_COL_BYTES of columns over a chunk of
    rows (a run cut at N, a chunk cut at M, launched as one block or a block a run) and the GPU's 32 x 8 blocks
    with their shared-memory sum, against NumPy; beta == 0 never reads y."""
    from gpublas.blas.blas2 import SIM_COL_BYTES
    part_k = get_kernel("gemv", "gemv_t_partial", np.float64, **form)
    finish = get_kernel("gemv", "gemv_t_finish", np.float64, **form)
    cols = SIM_COL_BYTES // 8
    for m, n in [(1, 1), (37, 5), (9, cols + 3), (300, 2)]:
        a, x, y = rng.standard_normal((m, n)), rng.standard_normal(m), rng.standard_normal(n)
        for nchunks in (1, 3):
            rows = -(-m // nchunks)
            part = gpublas.empty((nchunks, n), np.float64)
            if form:
                grids = [((-(-n // 32), nchunks), (32, 8))]
            else:
                runs = -(-n // cols)
                grids = [((1, nchunks), (runs, 1)), ((runs, nchunks), (1, 1))]
            for grid, block in grids:
                part_k(grid, block, m, n, gpublas.to_device(a), n, gpublas.to_device(x), rows, part, 0)
                for beta in (0.0, 0.5):
                    dy = gpublas.to_device(y if beta else np.full(n, np.nan))
                    finish(*launch.flat_geometry(n), n, nchunks, part, 2.0, beta, dy)
                    np.testing.assert_allclose(dy.get(), 2 * a.T @ x + beta * y, rtol=1e-12, atol=1e-12,
                                               err_msg=f"{m}x{n}, {nchunks} chunks, grid {grid} x {block}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_max_min_vector_lanes(dtype, rng):
    """reduce_rows' max and min (STRIDED_FOLD_LOAD: on the simulator 32-byte vector lanes, a run holding a NaN
    walked again in the array form) against NumPy: runs cut mid-vector, a NaN in one run of many (and at a cut
    end), signed zeros, infinities, integer extremes; every row of a (rows, n) array too."""
    floating = np.dtype(dtype).kind == "f"
    for n in (1, 17, 1000, 70001):
        x = rng.standard_normal(n) * 1e3
        x = x.astype(dtype) if floating else rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, n, dtype)
        d = gpublas.to_device(x)
        assert float(d.max()) == x.max() and float(d.min()) == x.min(), n
        rows = x[: n // 7 * 7].reshape(7, -1) if n >= 7 else x.reshape(1, -1)
        np.testing.assert_array_equal(gpublas.to_device(rows).max(axis=1).get(), rows.max(axis=1))
        np.testing.assert_array_equal(gpublas.to_device(rows).min(axis=1).get(), rows.min(axis=1))
        if floating:
            for at in {0, n // 2, n - 1}:
                y = x.copy()
                y[at] = np.nan
                dy = gpublas.to_device(y)
                assert np.isnan(float(dy.max())) and np.isnan(float(dy.min())), (n, at)
            z = np.zeros(n + 2, dtype)
            z[::2] = -0.0
            z[n // 3 + 1] = -np.inf
            assert float(gpublas.to_device(z).max()) == 0 and float(gpublas.to_device(z).min()) == -np.inf
