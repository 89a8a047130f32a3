"""Complex gemm / gemm_batched (cgemm, zgemm) against scipy.linalg.blas in every (trans_a, trans_b)
of N, T, C, 1M (4M's work in one real GEMM) and 3M (gpublas.blas.gemm_complex), shapes 0, 1, primes and
non-tile multiples, views (slices, transposes, reversed rows) of a, b and c, complex and real alpha /
beta, both sim thread orders; beta == 0 never reads c, alpha == 0 reads neither a nor b; the passes
each path runs (complex_parts.cu) and the real GEMM work (the 4M bound)."""
import numpy as np
import pytest
from scipy.linalg import blas

import gpublas
from gpublas.blas import gemm_complex

COMPLEX = [np.dtype(np.complex64), np.dtype(np.complex128)]
TRANS = ["N", "T", "C"]
CODE = {"N": 0, "T": 1, "C": 2}  # scipy.linalg.blas's trans_a / trans_b


def crandn(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def tol(dtype, k):
    eps = np.finfo(np.dtype(dtype).char.lower()).eps
    return dict(rtol=8 * max(k, 1) * eps, atol=8 * max(k, 1) * eps)


def operand(rng, rows, cols, trans, dtype):
    return crandn(rng, (cols, rows) if trans != "N" else (rows, cols), dtype)


def force(monkeypatch, algorithm):
    """Makes every product take 1M ('1m') or 3M ('3m')."""
    monkeypatch.setattr(gemm_complex, "THREE_M_MIN", dict.fromkeys(("sim", "cuda"), 1 if algorithm == "3m" else 10**9))


@pytest.fixture(params=["1m", "3m"])
def algorithm(request, monkeypatch):
    force(monkeypatch, request.param)
    return request.param


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("ta", TRANS)
@pytest.mark.parametrize("tb", TRANS)
def test_gemm_every_transpose(dtype, ta, tb, algorithm, rng, sim_order):
    ref_gemm = blas.cgemm if dtype == np.complex64 else blas.zgemm
    for m, n, k in [(1, 1, 1), (7, 5, 3), (33, 17, 65)]:
        a, b, c = operand(rng, m, k, ta, dtype), operand(rng, k, n, tb, dtype), crandn(rng, (m, n), dtype)
        alpha, beta = 0.5 - 2j, 1.5 + 0.25j
        ref = ref_gemm(alpha, a, b, beta, c, trans_a=CODE[ta], trans_b=CODE[tb])
        got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), gpublas.to_device(c), alpha=alpha, beta=beta,
                           trans_a=ta, trans_b=tb)
        np.testing.assert_allclose(got.get(), ref, **tol(dtype, k))
        ref = ref_gemm(2.0, a, b, trans_a=CODE[ta], trans_b=CODE[tb])  # real alpha, beta 0: a new c
        got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), alpha=2.0, trans_a=ta, trans_b=tb)
        assert got.dtype == dtype
        np.testing.assert_allclose(got.get(), ref, **tol(dtype, k))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_views_bool_transposes_and_edges(dtype, algorithm, rng):
    big_a, big_b = crandn(rng, (12, 20), dtype), crandn(rng, (30, 9), dtype)
    a, b = gpublas.to_device(big_a)[1:8, ::2], gpublas.to_device(big_b)[::3, 2:7]  # (7, 10) @ (10, 5)
    c = gpublas.to_device(np.full((9, 12), np.nan, dtype))  # beta == 0 never reads c
    out = c[1:8, ::2][:, :5]
    gpublas.gemm(a, b, out)
    np.testing.assert_allclose(out.get(), big_a[1:8, ::2] @ big_b[::3, 2:7], **tol(dtype, 10))
    at = gpublas.to_device(big_a[1:8, ::2].T.copy())
    np.testing.assert_allclose(gpublas.gemm(at, b, trans_a=True).get(), big_a[1:8, ::2] @ big_b[::3, 2:7],
                               **tol(dtype, 10))
    nan_a = gpublas.to_device(np.full((4, 3), np.nan, dtype))  # alpha == 0 reads neither a nor b
    c0 = crandn(rng, (4, 2), dtype)
    got = gpublas.gemm(nan_a, gpublas.to_device(np.full((3, 2), np.nan, dtype)), gpublas.to_device(c0), alpha=0,
                       beta=2j)
    np.testing.assert_allclose(got.get(), 2j * c0, **tol(dtype, 1))
    for m, n, k in [(0, 3, 2), (3, 0, 2), (3, 2, 0)]:
        got = gpublas.gemm(gpublas.to_device(crandn(rng, (m, k), dtype)), gpublas.to_device(crandn(rng, (k, n), dtype)))
        np.testing.assert_array_equal(got.get(), np.zeros((m, n), dtype))
    with pytest.raises(ValueError, match="inner dimensions"):
        gpublas.gemm(nan_a, nan_a)
    with pytest.raises(ValueError, match="trans"):
        gpublas.gemm(nan_a, nan_a, trans_a="X")
    with pytest.raises(ValueError, match="dtype"):
        gpublas.gemm(nan_a, gpublas.zeros((3, 2), np.float32))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("ta, tb", [("N", "N"), ("C", "T"), ("T", "C")])
def test_gemm_batched(dtype, ta, tb, algorithm, rng, sim_order):
    batch, m, n, k = 3, 6, 5, 11
    a = crandn(rng, (batch, k, m) if ta != "N" else (batch, m, k), dtype)
    b = crandn(rng, (batch, n, k) if tb != "N" else (batch, k, n), dtype)
    c = crandn(rng, (batch, m, n), dtype)

    def op(x, t):
        x = np.swapaxes(x, 1, 2) if t != "N" else x
        return x.conj() if t == "C" else x

    ref = (1 - 1j) * op(a, ta) @ op(b, tb) + 0.5 * c
    got = gpublas.gemm_batched(gpublas.to_device(a), gpublas.to_device(b), gpublas.to_device(c), alpha=1 - 1j,
                               beta=0.5, trans_a=ta, trans_b=tb)
    np.testing.assert_allclose(got.get(), ref, **tol(dtype, k))


def test_real_gemm_takes_trans_letters(rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 5))
    got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), trans_a="C", trans_b="N")
    np.testing.assert_allclose(got.get(), a.T @ b, rtol=1e-12)


@pytest.mark.parametrize("algo, products", [("1m", [(6, 6, 8, 1)]), ("3m", [(6, 3, 4, 3)])])
def test_4m_bound_real_gemm_work(algo, products, rng, monkeypatch):
    """The 4M bound: a complex product runs real GEMMs of 4 m n k multiply-adds in all (1M: one of
    m x 2n x 2k), 3 m n k with 3M (one batched GEMM of three); M, N, K, batch per real GEMM."""
    from gpublas.blas import blas3
    force(monkeypatch, algo)
    sizes, run = [], blas3._run
    monkeypatch.setattr(blas3, "_run", lambda *args: sizes.append(args[3:7]) or run(*args))
    a, b = crandn(rng, (6, 4), np.complex64), crandn(rng, (4, 3), np.complex64)
    got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b))
    np.testing.assert_allclose(got.get(), a @ b, **tol(np.complex64, 4))
    assert sizes == products


def _launches(fn):
    with gpublas.profile() as p:
        fn()
    return {e.name: e.count for e in p.key_averages(group_by_shape=False) if e.kind == "kernel"}


@pytest.mark.parametrize("algo, ta, c_view, beta, passes", [
    ("1m", "N", False, 0.5, {"complex_split": 1}),              # a read and c written in place by the GEMM
    ("1m", "C", False, 0.0, {"complex_split": 2}),              # op(a) copied into rows, conjugate in b's blocks
    ("1m", "N", True, 0.0, {"complex_split": 1, "complex_combine": 1}),  # c strided along its rows
    ("1m", "N", False, 1j, {"complex_split": 1, "complex_combine": 1}),  # complex beta
    ("3m", "T", True, 1j, {"complex_split": 2, "complex_combine": 1})])
def test_passes_each_path_runs(algo, ta, c_view, beta, passes, rng, monkeypatch):
    """Speed by construction: one real GEMM launch and only these elementwise passes (complex_parts.cu)."""
    force(monkeypatch, algo)
    dtype = np.complex64
    a, b = operand(rng, 9, 7, ta, dtype), crandn(rng, (7, 5), dtype)
    c0 = crandn(rng, (9, 10), dtype)
    c = gpublas.to_device(c0)
    out = c[:, ::2] if c_view else c[:, :5]
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    gpublas.gemm(da, db, out, beta=beta, trans_a=ta)  # compiled and warm
    out.set(c0[:, ::2] if c_view else c0[:, :5])
    counts = _launches(lambda: gpublas.gemm(da, db, out, alpha=2 - 1j, beta=beta, trans_a=ta))
    gemms = {k: v for k, v in counts.items() if k.startswith("gemm")}
    assert list(gemms.values()) == [1] and {k: v for k, v in counts.items() if k not in gemms} == passes
    op_a = a if ta == "N" else (a.T if ta == "T" else a.conj().T)
    ref = (2 - 1j) * op_a @ b + beta * (c0[:, ::2] if c_view else c0[:, :5])
    np.testing.assert_allclose(out.get(), ref, **tol(dtype, 7))
    if c_view:  # the columns between were not written
        np.testing.assert_array_equal(c.get()[:, 1::2], c0[:, 1::2])


LAYOUTS = ["contiguous", "column slice", "transposed", "reversed rows"]


def _view(host, layout):
    """A device view of `host` (2-D) in `layout`: its values are host's."""
    if layout == "contiguous":
        return gpublas.to_device(host)
    if layout == "column slice":  # unit stride lost along rows
        big = np.zeros((host.shape[0], 2 * host.shape[1] + 1), host.dtype)
        big[:, 1::2] = host
        return gpublas.to_device(big)[:, 1::2]
    if layout == "transposed":
        return gpublas.to_device(np.ascontiguousarray(host.T)).T
    return gpublas.to_device(np.ascontiguousarray(host[::-1]))[::-1]


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("beta", [0.0, -0.5, 0.25 - 1j])
def test_operand_and_output_views(dtype, layout, beta, algorithm, rng):
    """a, b and c each as a slice, a transposed view or reversed rows (read and written in place), every
    trans; beta == 0 over a c of NaN."""
    m, n, k = 11, 7, 13
    for ta, tb in [("N", "N"), ("T", "C"), ("C", "N")]:
        a, b = operand(rng, m, k, ta, dtype), operand(rng, k, n, tb, dtype)
        c0 = np.full((m, n), np.nan, dtype) if beta == 0 else crandn(rng, (m, n), dtype)
        c = _view(c0, layout)
        got = gpublas.gemm(_view(a, layout), _view(b, layout), c, alpha=1.5 + 0.5j, beta=beta, trans_a=ta, trans_b=tb)
        assert got is c
        ref_gemm = blas.cgemm if dtype == np.complex64 else blas.zgemm
        ref = ref_gemm(1.5 + 0.5j, a, b, trans_a=CODE[ta], trans_b=CODE[tb])
        if beta != 0:
            ref = ref + beta * c0
        np.testing.assert_allclose(c.get(), ref, **tol(dtype, k))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_split_and_combine_kernels(dtype, rng):
    """complex_split's planes (coefficients, offsets, column stride) of a transposed view, and
    complex_combine's 3M recombination with alpha and beta, against NumPy."""
    x = crandn(rng, (2, 5, 3), dtype)  # op 'T': (2, 3, 5)
    real = np.dtype(dtype).char.lower()
    w = gemm_complex.workspace(2, 3, 10, np.dtype(real))
    ld = w.strides[1] // w.itemsize
    assert ld > 10 and ld & (ld - 1) and (ld * w.itemsize) % 16 == 0  # padded, no power of two, aligned
    gemm_complex.split(gpublas.to_device(x), "T", w, ld, 2, [(0, 1.0, -2.0), (1, 0.5, 0.0)])
    xt = np.swapaxes(x, 1, 2)
    np.testing.assert_allclose(w.get()[:, :, 0::2], xt.real - 2 * xt.imag, **tol(dtype, 2))
    np.testing.assert_array_equal(w.get()[:, :, 1::2], 0.5 * xt.real)
    t = rng.standard_normal((3 * 2, 4, 6)).astype(real)  # T0, T1, T2 of a batch of 2
    dt = gemm_complex.workspace(6, 4, 6, np.dtype(real))
    dt[...] = gpublas.to_device(t)
    gap = dt.strides[0] // dt.itemsize
    c0 = crandn(rng, (2, 4, 6), dtype)
    c = gpublas.to_device(c0)
    gemm_complex.combine(dt, 1, 2 * gap, 4 * gap, True, 2 - 1j, 0.5j, c)
    p, q = t[:2] - t[2:4], t[4:] - t[:2] - t[2:4]
    np.testing.assert_allclose(c.get(), (2 - 1j) * (p + 1j * q) + 0.5j * c0, **tol(dtype, 4))


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_level1(dtype, n, rng, sim_order):
    """dot (dotu), dotc, asum and nrm2 (cuBLAS's |re| + |im| and 2-norm), axpy, scal, copy, swap against
    scipy.linalg.blas on contiguous and strided complex vectors."""
    p = "c" if dtype == np.complex64 else "z"
    ref = {name: getattr(blas, p + name) for name in ("dotu", "dotc", "axpy", "scal")}
    asum_ref, nrm2_ref = getattr(blas, "scasum" if p == "c" else "dzasum"), getattr(blas, "scnrm2" if p == "c" else "dznrm2")
    hx, hy = crandn(rng, 2 * n, dtype), crandn(rng, n, dtype)
    x, y = gpublas.to_device(hx)[::2], gpublas.to_device(hy)
    x_h = hx[::2].copy()
    k = tol(dtype, n)
    np.testing.assert_allclose(gpublas.dot(x, y), ref["dotu"](x_h, hy) if n else 0, **k)
    np.testing.assert_allclose(gpublas.dotc(x, y), ref["dotc"](x_h, hy) if n else 0, **k)
    np.testing.assert_allclose(gpublas.asum(x), asum_ref(x_h) if n else 0, **k)
    np.testing.assert_allclose(gpublas.nrm2(x), nrm2_ref(x_h) if n else 0, **k)
    if n:
        np.testing.assert_allclose(gpublas.axpy(2 - 1j, x, y.copy()).get(), ref["axpy"](x_h, hy.copy(), a=2 - 1j), **k)
        np.testing.assert_allclose(gpublas.scal(0.5j, y.copy()).get(), ref["scal"](0.5j, hy.copy()), **k)
    z = gpublas.zeros(n, dtype)
    np.testing.assert_array_equal(gpublas.copy(x, z).get(), x_h)
    y2 = gpublas.to_device(hy)
    gpublas.swap(x, y2)
    np.testing.assert_array_equal(y2.get(), x_h)
    np.testing.assert_array_equal(x.get(), hy)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("trans", TRANS)
@pytest.mark.parametrize("m, n", [(1, 1), (7, 5), (40, 300)])
def test_gemv_ger_gerc(dtype, trans, m, n, rng, sim_order):
    p = "c" if dtype == np.complex64 else "z"
    a = crandn(rng, (m, n), dtype)
    x = crandn(rng, n if trans == "N" else m, dtype)
    y = crandn(rng, m if trans == "N" else n, dtype)
    k = tol(dtype, max(m, n))
    ref = getattr(blas, p + "gemv")(1 - 2j, a, x, 0.5j, y, trans=CODE[trans])
    got = gpublas.gemv(gpublas.to_device(a), gpublas.to_device(x), gpublas.to_device(y), alpha=1 - 2j, beta=0.5j,
                       trans=trans)
    np.testing.assert_allclose(got.get(), ref, **k)
    at = gpublas.to_device(a.T.copy()).T  # a transposed view: the flag flips, the conjugation stays
    got = gpublas.gemv(at, gpublas.to_device(x), trans=trans)
    np.testing.assert_allclose(got.get(), getattr(blas, p + "gemv")(1, a, x, trans=CODE[trans]), **k)
    u, v = crandn(rng, m, dtype), crandn(rng, n, dtype)
    for name in ("geru", "gerc"):
        f = gpublas.ger if name == "geru" else gpublas.gerc
        got = f(0.5 + 1j, gpublas.to_device(u), gpublas.to_device(v), gpublas.to_device(a))
        np.testing.assert_allclose(got.get(), getattr(blas, p + name)(0.5 + 1j, u, v, a=a), **k)
