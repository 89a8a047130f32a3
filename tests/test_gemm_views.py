"""gemm and gemm_batched on views, taken as cuBLAS takes them (pointer, leading dimension, batch stride)
without copies: column slices, row steps, transposed views, offsets that break 16-byte alignment,
leading dimensions that are not multiples of 4, and c written in place through a view. NumPy is the
reference; the profiler and the pool's counters prove that nothing is copied."""
import numpy as np
import pytest

import gpublas
from gpublas.blas import blas3, gemm_plan
from reference import assert_close

DTYPES = [np.float32, np.float64]
# how an operand of shape (r, c) sits inside a larger array (see `placed`)
LAYOUTS = ["contiguous", "cols", "rowstep", "transposed", "unaligned", "odd_ld"]


def _ran(p):
    """What a profile saw run (kernels and copies): a module compiled inside it is not part of the call."""
    return [r for r in p.key_averages() if r.kind != "compile"]


def placed(rng, dtype, shape, layout, fill=None):
    """(host view, device view, host base, device base): an (r, c) operand inside a bigger base array.
    cols: base[:, 2:2+c] (lda = c + 5, 8 bytes in); rowstep: base[::2] (lda = 2c); transposed: the
    transpose of a column slice of a (c, r + 3) base; unaligned: base[:, 1:1+c] (4 or 8 bytes in, so
    16-byte alignment breaks); odd_ld: base[:, :c] with lda = c + 1 (not a multiple of 4 when c is)."""
    r, c = shape
    base_shape, key = {
        "contiguous": ((r, c), np.s_[:, :]),
        "cols": ((r, c + 5), np.s_[:, 2:2 + c]),
        "rowstep": ((2 * r, c), np.s_[::2]),
        "transposed": ((c, r + 3), np.s_[:, 1:1 + r]),
        "unaligned": ((r, c + 1), np.s_[:, 1:1 + c]),
        "odd_ld": ((r, c + 1), np.s_[:, :c]),
    }[layout]
    h = rng.standard_normal(base_shape).astype(dtype) if fill is None else np.full(base_shape, fill, dtype)
    d = gpublas.to_device(h)
    hv, dv = h[key], d[key]
    if layout == "transposed":
        hv, dv = hv.T, dv.T
    assert dv.shape == hv.shape == shape and (dv.strides == hv.strides or hv.size == 0)
    return hv, dv, h, d


def op(x, t):
    return x.T if t else x


def check_product(rng, dtype, m, n, k, la, lb, lc, trans_a, trans_b, beta, kernel=None):
    """gemm with each operand placed by its layout; c's base starts as NaN, so beta == 0 must not read
    c's view and no kernel may touch the base outside it."""
    ha, da, _, _ = placed(rng, dtype, (k, m) if trans_a else (m, k), la)
    hb, db, _, _ = placed(rng, dtype, (n, k) if trans_b else (k, n), lb)
    hc, dc, hbase, dbase = placed(rng, dtype, (m, n), lc, fill=np.nan)
    if beta:
        hc[...] = rng.standard_normal((m, n))
        dc[...] = gpublas.to_device(np.ascontiguousarray(hc))
    want = 1.5 * op(ha, trans_a).astype(np.float64) @ op(hb, trans_b)
    if beta:
        want += beta * hc
    got = gpublas.gemm(da, db, dc, alpha=1.5, beta=beta, trans_a=trans_a, trans_b=trans_b, kernel=kernel)
    assert got is dc
    out = dbase.get()
    hbase[...] = np.nan
    hc[...] = want          # the expected base: NaN everywhere but c's view
    outside = np.isnan(hbase)
    np.testing.assert_array_equal(np.isnan(out), outside)   # nothing outside c's view was written
    assert_close(out[~outside], hbase[~outside], dtype, k=k + 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("which", ["a", "b", "c"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_each_operand_as_a_view(rng, dtype, layout, which, trans_a, trans_b):
    layouts = {w: (layout if w == which else "contiguous") for w in "abc"}
    for m, n, k in [(13, 7, 5), (40, 36, 12)]:
        check_product(rng, dtype, m, n, k, layouts["a"], layouts["b"], layouts["c"], trans_a, trans_b, beta=0.0)
        check_product(rng, dtype, m, n, k, layouts["a"], layouts["b"], layouts["c"], trans_a, trans_b, beta=-0.5)


@pytest.mark.parametrize("kernel", ["naive", "tiled", "regblock", "v2_small", "v2_large", "splitk"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
def test_every_kernel_takes_views(rng, kernel, trans_a, trans_b):
    for dtype in DTYPES:
        for (m, n, k), (la, lb, lc) in [((37, 70, 33), ("cols", "unaligned", "rowstep")),
                                        ((40, 36, 64), ("odd_ld", "transposed", "cols")),
                                        ((40, 36, 64), ("cols", "rowstep", "transposed"))]:
            check_product(rng, dtype, m, n, k, la, lb, lc, trans_a, trans_b, 0.0, kernel)


@pytest.mark.parametrize("m,n,k", [(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (1, 5, 7), (7, 1, 5), (5, 7, 1),
                                   (2, 3, 5), (31, 17, 13)])
def test_shapes_zero_one_and_primes(rng, m, n, k):
    for dtype in DTYPES:
        for la, lb, lc in [("cols", "rowstep", "unaligned"), ("transposed", "odd_ld", "transposed")]:
            for beta in (0.0, 2.0):
                check_product(rng, dtype, m, n, k, la, lb, lc, False, True, beta)


@pytest.mark.parametrize("layout", ["cols", "rowstep", "transposed", "unaligned", "odd_ld"])
def test_views_are_not_copied(rng, layout):
    # one launch (the GEMM), no copy kernel, no device-to-device copy, no allocation
    dtype = np.float32
    _, da, _, _ = placed(rng, dtype, (24, 20), layout)
    _, db, _, _ = placed(rng, dtype, (20, 28), layout)
    _, dc, _, _ = placed(rng, dtype, (24, 28), layout, fill=0.0)
    for kernel in ("naive", "regblock", "v2_small", None):
        before = gpublas.memory_stats()["allocations"]
        with gpublas.profile() as p:
            gpublas.gemm(da, db, dc, beta=1.0, kernel=kernel)
        names = [r.name for r in _ran(p)]
        assert len(names) == 1 and names[0].startswith("gemm_"), names
        assert p.totals()["transfers"] == 0
        assert gpublas.memory_stats()["allocations"] == before


def test_layouts_cublas_cannot_take_are_copied(rng):
    # a column step (no unit stride in either axis) and a reversed row order go through temporaries
    h = rng.standard_normal((12, 20)).astype(np.float64)
    d = gpublas.to_device(h)
    for key in (np.s_[:, ::2], np.s_[::-1, :10]):
        with gpublas.profile() as p:
            got = gpublas.gemm(d[key], d[key], trans_b=True)
        assert len(_ran(p)) > 1                       # the copy, then the GEMM
        assert_close(got, h[key] @ h[key].T, np.float64, k=10)
    c = gpublas.zeros((12, 24), np.float64)
    gpublas.gemm(d[:, :10], d[:, 10:], c[:, ::2], trans_b=True)   # a c that needs a temporary, written back
    want = np.zeros((12, 24))
    want[:, ::2] = h[:, :10] @ h[:, 10:].T
    assert_close(c, want, np.float64, k=10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_copies_follow_the_view(rng, dtype):
    # v2's 16-byte copies need pointers 16-byte aligned and leading dimensions that are multiples of 16
    # bytes; views that break either run the one-element variant (the launched kernel's name says so)
    w = 16 // np.dtype(dtype).itemsize
    m = n = k = 8 * w
    base = gpublas.to_device(rng.standard_normal((k, 3 * k)).astype(dtype))
    cases = {"aligned": (base[:, w:w + k], "vec"),           # 16 bytes in, lda = 3k
             "unaligned": (base[:, 1:1 + k], "elem"),        # one element in
             "odd_ld": (gpublas.to_device(np.zeros((k, k + 1), dtype))[:, :k], "elem")}
    b = gpublas.to_device(rng.standard_normal((k, n)).astype(dtype))
    for name, (a, variant) in cases.items():
        lda = a.strides[0] // a.itemsize
        assert gemm_plan.vector_copies(a, lda, b, n, m, n, k, False, False, (0, 0)) == (variant == "vec"), name
        with gpublas.profile() as p:
            got = gpublas.gemm(a, b, kernel="v2_small")
        assert [r.name for r in _ran(p)] == [f"gemm_v2_small_nn_{variant}"], name
        assert_close(got, a.get().astype(np.float64) @ b.get(), dtype, k=k)


def test_transposed_c_is_computed_as_its_transpose(rng):
    # c = out.T: the kernel computes out = op(b).T @ op(a).T in place (one launch)
    a = rng.standard_normal((6, 4))
    b = rng.standard_normal((4, 9))
    out = gpublas.zeros((9, 6), np.float64)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    with gpublas.profile() as p:
        gpublas.gemm(da, db, out.T)
    assert len(_ran(p)) == 1
    assert_close(out, (a @ b).T, np.float64, k=4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, True)])
def test_batched_views(rng, dtype, trans_a, trans_b):
    # stacks with regular batch strides: a slice of a bigger stack's columns, every other matrix of a
    # stack (batch stride 2 matrices), a stack made by a transposed view, c a column slice written in place
    B, m, n, k = 3, 7, 5, 6
    sa = (k, m) if trans_a else (m, k)
    sb = (n, k) if trans_b else (k, n)
    ha = rng.standard_normal((B, sa[0], sa[1] + 3)).astype(dtype)
    hb = rng.standard_normal((2 * B, sb[1], sb[0])).astype(dtype)
    hc = np.full((B, m, n + 4), np.nan, dtype)
    da, db, dc = gpublas.to_device(ha), gpublas.to_device(hb), gpublas.to_device(hc)
    va, vb, vc = da[:, :, 2:2 + sa[1]], db[::2].transpose(0, 2, 1), dc[:, :, 1:1 + n]
    with gpublas.profile() as p:
        gpublas.gemm_batched(va, vb, vc, trans_a=trans_a, trans_b=trans_b)
    assert len(_ran(p)) == 1 and p.totals()["transfers"] == 0
    want = np.stack([op(ha[i, :, 2:2 + sa[1]], trans_a).astype(np.float64) @ op(hb[2 * i].T, trans_b)
                     for i in range(B)])
    got = dc.get()
    assert_close(got[:, :, 1:1 + n], want, dtype, k=k)
    assert np.isnan(got[:, :, 0]).all() and np.isnan(got[:, :, 1 + n:]).all()


def test_batched_c_that_overlaps_itself_goes_through_a_temporary(rng, sim_order):
    # a (2, 3, 4) c whose matrices overlap (batch stride of one row) cannot be written in place by a
    # batched launch; gemm_batched computes into a temporary and writes it back as NumPy's assignment would
    # (in C order: the second matrix's rows win; one copy kernel's threads would race, whatever the thread order)
    h = np.zeros((4, 4))
    d = gpublas.to_device(h)
    c = d._view((2, 3, 4), (32, 32, 8))
    assert not blas3._writable_ld(c)
    a = rng.standard_normal((2, 3, 2))
    b = rng.standard_normal((2, 2, 4))
    gpublas.gemm_batched(gpublas.to_device(a), gpublas.to_device(b), c)
    want = np.zeros((4, 4))
    np.lib.stride_tricks.as_strided(want, (2, 3, 4), (32, 32, 8))[...] = a @ b
    assert_close(d, want, np.float64, k=2)
