"""Complex (C and Z) trsm, trsm_batched, trmm, trsv, trmv, getrf_batched and getrs_batched against
scipy.linalg.blas (c/ztrsm, c/ztrmm, c/ztrsv, c/ztrmv) and scipy.linalg.lu_factor / lu_solve (cgetrf /
zgetrf): every (side, lower, trans N/T/C, unit) combination with a complex alpha, shapes 0, 1, primes
and one past the real LEAF through views, alpha == 0 reading no input, singular and ill-conditioned
matrices, LAPACK's |re| + |im| pivot choice. The `leaf` fixture shrinks LEAF so that small matrices
run several levels of the recursion (diagonal kernels and the complex GEMM updates)."""
import itertools
import os
import warnings

import numpy as np
import pytest
from scipy.linalg import blas as sblas
from scipy.linalg import lu_factor, lu_solve

import gpublas
from gpublas.blas import blas3_tri
from gpublas.runtime.launch import get_kernel
from reference import assert_close

DTYPES = [np.complex64, np.complex128]
TRANS = ("N", "T", "C")
COMBOS = list(itertools.product(("left", "right"), (False, True), TRANS, (False, True)))
IDS = [f"{s}-{'L' if lo else 'U'}-{t}-{'unit' if u else 'diag'}" for s, lo, t, u in COMBOS]
ALPHA = 1.5 - 0.75j
dev = gpublas.to_device


def blas(name, dtype):
    return getattr(sblas, ("c" if np.dtype(dtype) == np.complex64 else "z") + name)


def crandn(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def triangular(rng, n, dtype, scale=4.0):
    """A well-conditioned matrix for a triangular solve: a random complex one with a heavy diagonal."""
    return (crandn(rng, (n, n), np.complex128) + scale * np.eye(n)).astype(dtype)


def poisoned(a, lower, unit):
    """a with NaN in the triangle the routine must not read (and on the diagonal with unit)."""
    p = a.copy()
    p[np.triu_indices(len(a), 1) if lower else np.tril_indices(len(a), -1)] = np.nan
    if unit:
        np.fill_diagonal(p, np.nan)
    return p


def scipy_args(side, lower, trans, unit):
    return dict(side=int(side == "right"), lower=int(lower), trans_a=TRANS.index(trans), diag=int(unit))


def op(a, trans):
    return {"N": a, "T": a.T, "C": a.conj().T}[trans]


@pytest.fixture
def leaf(monkeypatch):
    monkeypatch.setattr(blas3_tri, "LEAF", 4)


# -- trsm, trmm, trsm_batched --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side,lower,trans,unit", COMBOS, ids=IDS)
def test_trsm_and_trmm_every_combination(rng, leaf, sim_order, dtype, side, lower, trans, unit):
    m, n = 11, 7                      # k = 11 or 7 rows of a: LEAF 4 splits it twice
    k = m if side == "left" else n
    a, b = triangular(rng, k, dtype), crandn(rng, (m, n), dtype)
    kw = dict(side=side, lower=lower, trans=trans, unit_diagonal=unit, alpha=ALPHA)
    da, db = dev(poisoned(a, lower, unit)), dev(b)
    assert gpublas.trsm(da, db, **kw) is db
    assert_close(db, blas("trsm", dtype)(ALPHA, a, b, **scipy_args(side, lower, trans, unit)), k=4 * k)
    got = gpublas.trmm(da, dev(b), **kw)
    assert got.dtype == dtype
    assert_close(got, blas("trmm", dtype)(ALPHA, a, b, **scipy_args(side, lower, trans, unit)), k=4 * k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_past_the_real_leaf_through_views(rng, dtype):
    # 67 rows: blocks of 64 and 3 with the real LEAF; a is the transpose of a slice (strides swapped), b a
    # block of a wider matrix written in place (its neighbours untouched)
    k = 67
    big_a = crandn(rng, (70, 71), dtype) + 8 * np.eye(70, 71, k=1, dtype=dtype)
    da, av, a = dev(big_a), dev(big_a)[1:68, 2:69].T, big_a[1:68, 2:69].T
    # 5 right-hand sides: the blocks by substitution; 64 and 70: by GEMMs with their inverses (>= LEAF)
    for side, lower, trans, nrhs in (("left", True, "C", 64), ("right", False, "C", 70), ("left", False, "T", 5),
                                     ("right", True, "N", 5)):
        shape = (k, nrhs) if side == "left" else (nrhs, k)
        big_b = crandn(rng, (shape[0] + 2, shape[1] + 3), dtype)
        db, region = dev(big_b), np.s_[1:shape[0] + 1, 2:shape[1] + 2]
        args = scipy_args(side, lower, trans, False)
        gpublas.trsm(av, db[region], side=side, lower=lower, trans=trans, alpha=ALPHA)
        want = big_b.copy()
        want[region] = blas("trsm", dtype)(ALPHA, a, big_b[region], **args)
        assert_close(db, want, k=4 * k)
        got = gpublas.trmm(av, dev(big_b)[region], side=side, lower=lower, trans=trans, alpha=ALPHA)
        assert_close(got, blas("trmm", dtype)(ALPHA, a, big_b[region], **args), k=4 * k)
    np.testing.assert_array_equal(da.get(), big_a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rank_one_and_one_column_updates(rng, monkeypatch, dtype):
    # LEAF 1: off-diagonal blocks of one column, so trmm's updates (beta 1) are ger / gerc, trsm's with
    # alpha 1 too, and one right-hand side makes every update a gemv (trans 'C' for a conjugated block)
    monkeypatch.setattr(blas3_tri, "LEAF", 1)
    a = triangular(rng, 5, dtype)
    for side, lower, trans in itertools.product(("left", "right"), (False, True), TRANS):
        args = scipy_args(side, lower, trans, False)
        for shape in ((5, 4), (5, 1)) if side == "left" else ((4, 5), (1, 5)):
            b = crandn(rng, shape, dtype)
            got = gpublas.trmm(dev(a), dev(b), side=side, lower=lower, trans=trans)
            assert_close(got, blas("trmm", dtype)(1.0, a, b, **args), k=20)
            got = gpublas.trsm(dev(a), dev(b), side=side, lower=lower, trans=trans)
            assert_close(got, blas("trsm", dtype)(1.0, a, b, **args), k=20)


@pytest.mark.parametrize("dtype", DTYPES)
def test_shapes_zero_one_and_prime(rng, leaf, dtype):
    for m, n in [(0, 3), (3, 0), (1, 1), (1, 13), (13, 1), (5, 3)]:
        b = crandn(rng, (m, n), dtype)
        for side, trans in (("left", "C"), ("right", "C"), ("left", "T")):
            k = m if side == "left" else n
            a = triangular(rng, k, dtype)
            args = scipy_args(side, True, trans, False)
            got = gpublas.trsm(dev(a), dev(b), side=side, lower=True, trans=trans, alpha=ALPHA)
            assert got.shape == (m, n)
            got_mm = gpublas.trmm(dev(a), dev(b), side=side, lower=True, trans=trans, alpha=ALPHA)
            assert got_mm.shape == (m, n)
            if m and n:
                assert_close(got, blas("trsm", dtype)(ALPHA, a, b, **args), k=4 * k)
                assert_close(got_mm, blas("trmm", dtype)(ALPHA, a, b, **args), k=4 * k)
    assert gpublas.trsm_batched(dev(np.zeros((0, 3, 3), dtype)), dev(np.zeros((0, 3, 2), dtype))).shape == (0, 3, 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_alpha_zero_reads_neither_a_nor_b(dtype):
    nan_a, nan_b = dev(np.full((5, 5), np.nan + 1j * np.nan, dtype)), dev(np.full((5, 3), np.nan, dtype))
    for alpha in (0.0, 0j):
        assert (gpublas.trsm(nan_a, dev(nan_b.get()), alpha=alpha, trans="C").get() == 0).all()
        assert (gpublas.trmm(nan_a, nan_b, alpha=alpha, trans="C", side="left").get() == 0).all()
    got = gpublas.trsm_batched(nan_a[None], nan_b[None].copy(), alpha=0j, trans="C")
    assert (got.get() == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nrhs", [3, 8])   # substitution (< LEAF 4 columns); GEMMs with the blocks' inverses
def test_trsm_ill_conditioned_and_singular(rng, leaf, dtype, nrhs):
    # a = L0 D: L0 unit lower, D with complex phases from modulus 1 down to 1e-6 (C) / 1e-12 (Z): the
    # solution of a^H x = b is checked by its backward error ||a^H x - b|| / (||a|| ||x||), as LAPACK's tests
    # (the same bound for both paths: test_triangular's ill-conditioned test says why)
    n = 23
    tiny = 1e-6 if dtype == np.complex64 else 1e-12
    d = np.geomspace(1.0, tiny, n) * np.exp(1j * rng.uniform(0, 2 * np.pi, n))
    a = ((np.tril(crandn(rng, (n, n), np.complex128), -1) * 0.3 + np.eye(n)) * d).astype(dtype)
    b = crandn(rng, (n, nrhs), dtype)
    x = gpublas.trsm(dev(a), dev(b), lower=True, trans="C").get().astype(np.complex128)
    assert np.isfinite(x).all() and np.abs(x).max() > 1e3
    backward = np.linalg.norm(a.conj().T.astype(np.complex128) @ x - b) / (np.linalg.norm(a) * np.linalg.norm(x))
    assert backward < 8 * n * np.finfo(dtype).eps, backward
    # an exact zero on the diagonal: no exception, inf or NaN from that row on, as BLAS
    a[5, 5] = 0
    x = gpublas.trsm(dev(a), dev(b), lower=True).get()
    assert np.isfinite(x[:5]).all() and not np.isfinite(x[5:]).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side,lower,trans,unit", COMBOS[::5], ids=IDS[::5])   # every trans, side, lower
def test_trsm_batched(rng, leaf, sim_order, dtype, side, lower, trans, unit):
    batch, m, n = 3, 10, 6
    k = m if side == "left" else n
    a = np.stack([triangular(rng, k, dtype) for _ in range(batch)])
    b = crandn(rng, (batch, m, n), dtype)
    db = dev(b)
    gpublas.trsm_batched(dev(a), db, side=side, lower=lower, trans=trans, unit_diagonal=unit, alpha=ALPHA)
    want = [blas("trsm", dtype)(ALPHA, a[i], b[i], **scipy_args(side, lower, trans, unit)) for i in range(batch)]
    assert_close(db, np.stack(want), k=4 * k)


# -- trsv, trmv ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower,trans,unit", list(itertools.product((False, True), TRANS, (False, True))))
def test_trsv_trmv(rng, leaf, dtype, lower, trans, unit):
    for n in (1, 13):
        a, x = triangular(rng, n, dtype), crandn(rng, 2 * n, dtype)
        kw = dict(lower=lower, trans=trans, unit_diagonal=unit)
        args = dict(lower=int(lower), trans=TRANS.index(trans), diag=int(unit))
        dx = dev(x)
        assert gpublas.trsv(dev(poisoned(a, lower, unit)), dx[::2], **kw).shape == (n,)   # a strided x, in place
        assert_close(dx.get()[::2], blas("trsv", dtype)(a, x[::2], **args), k=4 * n)
        assert_close(dx.get()[1::2], x[1::2])
        dx = dev(x)
        gpublas.trmv(dev(poisoned(a, lower, unit)), dx[::-2], **kw)
        assert_close(dx.get()[::-2], blas("trmv", dtype)(a, x[::-2], **args), k=4 * n)


# -- getrf_batched, getrs_batched ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 7, 33])   # 33: the global-memory kernel
def test_getrf_getrs_match_scipy(rng, sim_order, dtype, n):
    batch = 2
    a = crandn(rng, (batch, n, n), dtype)
    lu, piv = gpublas.getrf_batched(dev(a))
    assert lu.dtype == dtype and lu.shape == (batch, n, n) and piv.shape == (batch, n)
    b = crandn(rng, (batch, n, 3), dtype)
    for i in range(batch):
        want_lu, want_piv = lu_factor(a[i])
        np.testing.assert_array_equal(piv.get()[i], want_piv)
        assert_close(lu.get()[i], want_lu, k=8 * n)
    eps = np.finfo(dtype).eps
    for t, trans in enumerate(TRANS):
        db = dev(b)
        assert gpublas.getrs_batched(lu, piv, db, trans=trans) is db
        x = db.get().astype(np.complex128)
        for i in range(batch):  # the residual, and scipy's solution to the matrix's condition
            oa = op(a[i].astype(np.complex128), trans)
            res = np.linalg.norm(oa @ x[i] - b[i]) / (np.linalg.norm(oa) * np.linalg.norm(x[i]))
            assert res < 16 * n * eps, res
            cond = np.linalg.cond(oa)
            assert_close(x[i], lu_solve(lu_factor(a[i]), b[i], trans=t), rtol=cond * 64 * eps, atol=cond * 64 * eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pivots_on_abs_re_plus_abs_im(dtype):
    # column 0 holds 5 (|z| = 5, |re| + |im| = 5) and 3 + 3j (|z| 4.24, |re| + |im| 6): LAPACK's icamax
    # takes row 2, a modulus pivot would take row 1; then column 1 the same way between 4j and 2 - 2.5j
    a = np.array([[1, 2, 0.5], [5, 4j, 1], [3 + 3j, 2 - 2.5j, 1j]], dtype)
    lu, piv = gpublas.getrf_batched(dev(a))
    want_lu, want_piv = lu_factor(a)
    np.testing.assert_array_equal(piv.get(), want_piv)
    assert piv.get()[0] == 2
    assert_close(lu, want_lu, k=8)


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_d_view_and_one_right_hand_side(rng, dtype):
    n = 6
    big = crandn(rng, (9, 8), dtype) + 3 * np.eye(9, 8, dtype=dtype)
    lu, piv = gpublas.getrf_batched(dev(big)[1:7, 1:7].T)     # a transposed block
    want = lu_factor(big[1:7, 1:7].T)
    np.testing.assert_array_equal(piv.get(), want[1])
    b = crandn(rng, 2 * n, dtype)
    db = dev(b)
    gpublas.getrs_batched(lu, piv, db[::2], trans=2)          # scipy's 2: the conjugate transpose
    assert_close(db.get()[::2], lu_solve(want, b[::2], trans=2), k=16 * n)
    assert_close(db.get()[1::2], b[1::2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [5, 40])
def test_singular_matrices_are_reported(rng, dtype, n):
    a = crandn(rng, (3, n, n), dtype)
    a[1, :, 3] = 0                      # a zero column: U[3, 3] = 0 exactly
    a[2] = 1 + 1j                       # rank one: U[1, 1] = 0
    with pytest.warns(gpublas.SingularMatrixWarning, match=r"2 of 3 matrices are singular \(matrix 1: U\[3, 3\]"):
        lu, piv = gpublas.getrf_batched(dev(a))
    lu2, piv2, info = gpublas.getrf_batched(dev(a), info=True)
    np.testing.assert_array_equal(info.get(), [0, 4, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # scipy's LinAlgWarning for the singular matrix
        want_lu, want_piv = lu_factor(a[1])
    np.testing.assert_array_equal(piv.get()[1], want_piv)
    assert_close(lu.get()[1], want_lu, k=8 * n)
    np.testing.assert_array_equal(lu2.get(), lu.get())


@pytest.mark.parametrize("dtype", DTYPES)
def test_ill_conditioned_solve(rng, dtype):
    # a Hilbert matrix of condition ~1e6 (C) / 1e12 (Z) times a complex phase per column
    n = 8 if dtype == np.complex128 else 5
    i = np.arange(n)
    a = ((1.0 / (i[:, None] + i[None, :] + 1)) * np.exp(0.7j * i)[None, :]).astype(dtype)[None]
    b = crandn(rng, (1, n, 2), dtype)
    lu, piv = gpublas.getrf_batched(dev(a))
    for trans in TRANS:
        x = gpublas.getrs_batched(lu, piv, dev(b), trans=trans).get().astype(np.complex128)[0]
        oa = op(a[0].astype(np.complex128), trans)
        res = np.linalg.norm(oa @ x - b[0]) / (np.linalg.norm(oa) * np.linalg.norm(x))
        assert res < 16 * n * np.finfo(dtype).eps and np.abs(x).max() > 10, (trans, res)


@pytest.mark.parametrize("dtype,scale", [(np.complex64, 1e-39), (np.complex128, 1e-310)])
def test_tiny_pivots_stay_finite(rng, dtype, scale):
    # subnormal entries: 1 / pivot would overflow; the lift is chosen on |re| + |im| of the pivot
    n = 6
    a = (crandn(rng, (1, n, n), np.complex128) * scale).astype(dtype)
    lu, piv = gpublas.getrf_batched(dev(a))
    got, p = lu.get()[0].astype(np.complex128), piv.get()[0]
    assert np.isfinite(got).all()
    rows = np.arange(n)
    for k in range(n):
        rows[[k, p[k]]] = rows[[p[k], k]]
    def unscaled(z):   # z / scale part by part (a complex division by 1e-310 overflows in 1 / scale)
        return z.real / scale + 1j * (z.imag / scale)
    recon = (np.tril(got, -1) + np.eye(n)) @ unscaled(np.triu(got))
    np.testing.assert_allclose(recon, unscaled(a[0][rows].astype(np.complex128)),
                               atol=1e-3 if dtype == np.complex64 else 1e-9)


def test_empty_batches(rng):
    lu, piv = gpublas.getrf_batched(gpublas.zeros((2, 0, 0), np.complex64))
    assert lu.shape == (2, 0, 0) and piv.shape == (2, 0)
    lu, piv = gpublas.getrf_batched(gpublas.zeros((0, 3, 3), np.complex128))
    assert gpublas.getrs_batched(lu, piv, gpublas.zeros((0, 3, 2), np.complex128), trans="C").shape == (0, 3, 2)


@pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="a sim feature")
@pytest.mark.parametrize("dtype", DTYPES)
def test_getrf_is_fissioned_on_the_simulator(dtype):
    # getrf's Multiplier crosses a barrier: loop fission keeps it per thread, which needs a default constructor
    for name in ("getrf_shared", "getrf_global"):
        assert get_kernel("getrf", name, dtype)._module.handle.fission[name] is None


# -- arguments -----------------------------------------------------------------------------------------
def test_trans_c_and_alpha_for_real_and_complex_types(rng):
    a, b = triangular(rng, 5, np.complex128), crandn(rng, (5, 2), np.complex128)
    by_letter = gpublas.trsm(dev(a), dev(b), trans="C").get()
    np.testing.assert_array_equal(gpublas.trsm(dev(a), dev(b), trans=2).get(), by_letter)
    np.testing.assert_array_equal(gpublas.trsm(dev(a), dev(b), trans="c").get(), by_letter)
    ar, br = a.real.copy(), b.real.copy()   # 'C' is 'T' for real types
    np.testing.assert_array_equal(gpublas.trsm(dev(ar), dev(br), trans="C").get(),
                                  gpublas.trsm(dev(ar), dev(br), trans="T").get())
    np.testing.assert_array_equal(gpublas.trmm(dev(ar), dev(br), alpha=2 + 0j).get(),
                                  gpublas.trmm(dev(ar), dev(br), alpha=2.0).get())
    with pytest.raises(TypeError, match="alpha = .* is complex but the operands are float64"):
        gpublas.trsm(dev(ar), dev(br), alpha=1j)
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.trsm(dev(a), dev(br))
    with pytest.raises(ValueError, match="trans must be"):
        gpublas.getrs_batched(*gpublas.getrf_batched(dev(a)), dev(b), trans="H")
    with pytest.raises(ValueError, match="takes float32, float64, complex64 or complex128"):
        gpublas.trsv(gpublas.zeros((3, 3), np.int32), gpublas.zeros(3, np.int32))
