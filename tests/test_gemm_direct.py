"""gemm_direct, the product the simulator runs by default: its sums in gemm_naive's order (the same bits) and the
edges of its tiles, in the simulator's own form (gemm_sim.cuh's micro-kernel) and in the GPU's (GPU_DIRECT_FORM),
against NumPy in float64."""
import numpy as np
import pytest

import gpublas
from gpublas.blas import gemm_plan
from reference import assert_close
from test_blas3 import TRANS, op_ref


@pytest.fixture(params=["own", "gpu"])
def direct_form(request, monkeypatch):
    """'own': gemm_direct as the backend builds it; 'gpu' (the simulator only): built with GPU_DIRECT_FORM, the
    GPU's 4x8 tile and loops instead of the simulator's vectors, launched with a GPU's geometry, so the code a
    GPU runs is checked here too."""
    if request.param == "gpu":
        if gpublas.backend() != "sim":
            pytest.skip("the GPU's form is what the cuda backend runs anyway")
        ladder_defines, tile = gemm_plan._out_real, gemm_plan.direct_tile
        monkeypatch.setattr(gemm_plan, "direct_tile", lambda dtype, sim=None: tile(dtype, sim=False))
        monkeypatch.setattr(gemm_plan, "_out_real", lambda p: ladder_defines(p) + (("GPU_DIRECT_FORM", "1"),))
        monkeypatch.setattr(gemm_plan, "_PLANS", {})
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64, gpublas.bfloat16, gpublas.float16], ids=str)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_direct_sums_in_naive_order(rng, dtype, trans_a, trans_b, direct_form):
    # gemm_direct adds each C element's products in the order k = 0..K-1, as gemm_naive does, whatever its
    # staging on the simulator (op(B)'s columns transposed 8 values at a time, DIRECT_KC = 32 values of k a chunk,
    # 16-bit runs converted) and its tile (16 x 16, double 16 x 8): the same bits. Operands are column slices
    # (leading dimensions K + 3, N + 3); C smaller than a tile, tiles moved back across C's last rows or columns
    # (the vector stores' partial rows), K below, at and across the chunks and their 8-value steps; beta 0 and not
    half = np.dtype(dtype).itemsize == 2
    for i, (m, n, k) in enumerate([(1, 1, 1), (3, 7, 9), (5, 13, 40), (37, 8, 97), (64, 33, 31), (3, 20, 17),
                                   (45, 45, 16), (20, 64, 8)]):
        beta = 0.0 if i % 2 else -0.5
        sa, sb = ((k, m) if trans_a else (m, k)), ((n, k) if trans_b else (k, n))
        da, db = (gpublas.to_device(rng.standard_normal((r, c + 3)).astype(np.float32)).astype(dtype)[:, :c]
                  for r, c in (sa, sb))
        c0 = gpublas.to_device(rng.standard_normal((m, n)).astype(np.float32)).astype(dtype)
        got = {kern: gpublas.gemm(da, db, c0.copy(), alpha=0.75, beta=beta, trans_a=trans_a, trans_b=trans_b,
                                  kernel=kern).get() for kern in ("direct", "naive")}
        want = 0.75 * op_ref(da, trans_a) @ op_ref(db, trans_b) + beta * c0.get().astype(np.float64)
        if half:  # float sums, one rounding into the 16-bit C
            np.testing.assert_allclose(got["direct"].astype(np.float64), want, rtol=1e-2, atol=1e-2)
        else:
            assert_close(got["direct"], want, dtype, k=k)
        if gpublas.backend() == "sim":  # a GPU's compiler may fuse the multiply-adds of one kernel and not the other's
            np.testing.assert_array_equal(got["direct"].view(f"u{got['direct'].itemsize}"),
                                          got["naive"].view(f"u{got['naive'].itemsize}"), err_msg=f"{m}x{n}x{k}")


def test_direct_tile_edges(rng, direct_form, sim_order):
    # gemm_direct on the simulator computes 48 x 32 doubles a thread in 6 x 8 micro-tiles, K in steps of 256,
    # packing what does not fit a micro-tile (tiles at C's edges) or is transposed; on a GPU 4 x 8 a thread.
    # Shapes one below, at and one past each of those edges (and ones), every orientation, operands and C as
    # column slices (leading dimensions past their widths: what lies beyond C's columns must stay), 2-D and
    # batched (batch strides past the matrices), against NumPy in float64; both thread orders.
    shapes = [(1, 1, 1), (5, 7, 2), (6, 8, 3), (7, 9, 255), (47, 31, 256), (49, 33, 257), (48, 32, 1), (13, 65, 9),
              (97, 1, 4), (1, 40, 6)]
    for i, (m, n, k) in enumerate(shapes):
        for ta, tb in TRANS:
            for batch in (None, 2):
                pre = (batch,) if batch else ()
                sa, sb = ((k, m) if ta else (m, k)), ((n, k) if tb else (k, n))
                a = rng.standard_normal(pre + (sa[0], sa[1] + 3))
                b = rng.standard_normal(pre + (sb[0], sb[1] + 5))
                c = rng.standard_normal(pre + (m, n + 2))
                da, db, dc = (gpublas.to_device(x) for x in (a, b, c))
                da, db, dcv = da[..., :sa[1]], db[..., :sb[1]], dc[..., :n]
                alpha, beta = (1.0, 0.0) if (i + (batch or 0)) % 2 else (-0.75, 0.5)
                f = gpublas.gemm_batched if batch else gpublas.gemm
                f(da, db, dcv, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb, kernel="direct")
                opa, opb = a[..., :sa[1]], b[..., :sb[1]]
                want = c.copy()
                want[..., :n] = (alpha * (np.swapaxes(opa, -1, -2) if ta else opa) @
                                 (np.swapaxes(opb, -1, -2) if tb else opb) + beta * c[..., :n])
                got = dc.get()
                np.testing.assert_array_equal(got[..., n:], c[..., n:], err_msg=f"{m}x{n}x{k} {ta}{tb} {batch}")
                assert_close(got, want, np.float64, k=k)
