"""symm, syrk and syr2k in complex64 and complex128 (cuBLAS's C and Z: symmetric, nothing conjugated) against
scipy.linalg.blas (?symm, ?syrk, ?syr2k), with hemm beside symm (symv and syr are in test_complex_level2.py):
complex alpha and beta, both triangles, sides and transposes, shapes 1, primes and 0, the recursion (LEAF 4
here; one n > 64 at the real LEAF into a view), beta == 0 over NaN c, alpha == 0 over NaN inputs, the triangle
not named never read nor written, trans 'C' refused."""
import itertools

import numpy as np
import pytest

import gpublas
from reference import assert_close, crandn, other_triangle, poison_other_triangle, scipy_blas

DTYPES = [np.complex64, np.complex128]
SHAPES = [(1, 1), (7, 5), (2, 11)]
ALPHA, BETA = 0.5 - 1.5j, -1 + 0.25j


def dev(x):
    return gpublas.to_device(np.ascontiguousarray(x))


def symmetric(a, lower):
    """The symmetric matrix stored in a's `lower` (else upper) triangle (no conjugate)."""
    t = np.tril(a) if lower else np.triu(a)
    return t + t.T - np.diag(np.diag(a))


@pytest.mark.parametrize("name", ["symm", "hemm"])   # hemm: a Hermitian, its diagonal's imaginary parts ignored
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side,lower", list(itertools.product(("left", "right"), (False, True))))
def test_symm_hemm(rng, name, dtype, side, lower):
    for m, n in SHAPES:
        k = m if side == "left" else n
        a, b, c = (crandn(rng, s, dtype) for s in ((k, k), (m, n), (m, n)))
        want = scipy_blas(name, dtype)(ALPHA, a, b, beta=BETA, c=c, side=int(side == "right"), lower=int(lower))
        dc = dev(c)
        got = getattr(gpublas, name)(dev(poison_other_triangle(a, lower)), dev(b), dc, side=side, lower=lower,
                                     alpha=ALPHA, beta=BETA)
        assert got is dc
        assert_close(got, want, k=k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans,lower", list(itertools.product((False, "T"), (False, True))))
def test_syrk_syr2k(rng, leaf, sim_order, dtype, trans, lower):
    for m, n in SHAPES + [(13, 3)]:
        a, b = crandn(rng, (m, n), dtype), crandn(rng, (m, n), dtype)
        order = n if trans else m
        c = crandn(rng, (order, order), dtype)
        args = dict(trans=int(bool(trans)), lower=int(lower))
        for name, ops in (("syrk", (a,)), ("syr2k", (a, b))):
            want = scipy_blas(name, dtype)(ALPHA, *ops, beta=BETA, c=c, **args)   # the other triangle: c's, untouched
            dc = dev(c)
            got = getattr(gpublas, name)(*map(dev, ops), dc, trans=trans, lower=lower, alpha=ALPHA, beta=BETA)
            assert got is dc
            assert_close(got, want, k=2 * n)
            np.testing.assert_array_equal(got.get()[other_triangle(order, lower)], c[other_triangle(order, lower)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_past_the_real_leaf_into_views(rng, dtype):
    # c is a 131 x 131 block of a wider matrix (diagonal blocks of the real LEAF, GEMMs between them); a and b
    # are transposed, strided views
    a, b = crandn(rng, (9, 262), dtype), crandn(rng, (9, 131), dtype)
    big = crandn(rng, (133, 140), dtype)
    dbig = dev(big)
    gpublas.syr2k(dev(a)[:, ::2], dev(b), dbig[1:132, 4:135], trans=True, lower=True, alpha=ALPHA, beta=BETA)
    want = big.copy()
    want[1:132, 4:135] = scipy_blas("syr2k", dtype)(ALPHA, a[:, ::2], b, beta=BETA, c=big[1:132, 4:135], trans=1,
                                                    lower=1)
    assert_close(dbig, want, k=18)
    s = crandn(rng, (131, 131), dtype)
    got = gpublas.symm(dev(s).T, dbig[1:132, 2:9], side="left", alpha=ALPHA)
    assert_close(got, ALPHA * symmetric(s.T, False) @ want[1:132, 2:9], k=131)


@pytest.mark.parametrize("dtype", DTYPES)
def test_beta_zero_and_alpha_zero_read_nothing(rng, leaf, dtype):
    n, k = 9, 5
    a, b = crandn(rng, (n, k), dtype), crandn(rng, (n, k), dtype)
    nan_c = np.full((n, n), np.nan, dtype)
    for name, ops, lower in (("syrk", (a,), True), ("syr2k", (a, b), False)):   # beta == 0: c never read
        got = getattr(gpublas, name)(*map(dev, ops), dev(nan_c), lower=lower, alpha=ALPHA).get()
        tri = np.tril_indices(n) if lower else np.triu_indices(n)
        assert_close(got[tri], scipy_blas(name, dtype)(ALPHA, *ops, lower=int(lower))[tri], k=2 * k)
        assert np.isnan(got[other_triangle(n, lower)]).all()
    sq = crandn(rng, (n, n), dtype)
    for name in ("symm", "hemm"):
        got = getattr(gpublas, name)(dev(sq), dev(sq), dev(nan_c), alpha=ALPHA, beta=0.0)
        assert_close(got, scipy_blas(name, dtype)(ALPHA, sq, sq), k=n)
    # alpha == 0: c = beta c on the triangle, NaN inputs never read
    nan_in, c = np.full((n, k), np.nan, dtype), crandn(rng, (n, n), dtype)
    got = gpublas.syrk(dev(nan_in), dev(c), alpha=0.0, beta=BETA).get()
    assert_close(got, np.triu(BETA * c) + np.tril(c, -1))
    got = gpublas.syr2k(dev(nan_in), dev(nan_in), dev(c), alpha=0.0, beta=0.0, lower=True).get()
    assert_close(got, np.triu(c, 1))
    for name in ("symm", "hemm"):
        got = getattr(gpublas, name)(dev(np.full((n, n), np.nan, dtype)), dev(nan_c[:, :3]), dev(c[:, :3]), alpha=0.0,
                                     beta=BETA)
        assert_close(got, BETA * c[:, :3])


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_shapes(rng, dtype):
    assert gpublas.symm(gpublas.zeros((0, 0), dtype), gpublas.zeros((0, 4), dtype)).shape == (0, 4)
    assert gpublas.hemm(gpublas.zeros((3, 3), dtype), gpublas.zeros((3, 0), dtype)).shape == (3, 0)
    assert gpublas.syrk(gpublas.zeros((0, 5), dtype)).shape == (0, 0)
    c = crandn(rng, (4, 4), dtype)          # k = 0: c = beta c on the triangle, a never read
    got = gpublas.syr2k(gpublas.zeros((4, 0), dtype), gpublas.zeros((4, 0), dtype), dev(c), beta=BETA)
    assert_close(got, np.triu(BETA * c) + np.tril(c, -1))
    assert gpublas.symv(gpublas.zeros((0, 0), dtype), gpublas.zeros(0, dtype)).shape == (0,)


def test_conjugate_transpose_refused_for_complex_only(rng):
    a = gpublas.zeros((4, 3), np.complex64)
    for trans in ("C", "c", 2):
        with pytest.raises(ValueError, match="conjugate transpose.*'N' or 'T'"):
            gpublas.syrk(a, trans=trans)
        with pytest.raises(ValueError, match="conjugate transpose.*'N' or 'T'"):
            gpublas.syr2k(a, a, trans=trans)
    x = rng.standard_normal((4, 3))          # real types: 'C' is 'T', as BLAS's dsyrk
    assert_close(gpublas.syrk(dev(x), trans="C"), np.triu(x.T @ x), k=4)
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.symm(gpublas.zeros((3, 3), np.complex128), gpublas.zeros((3, 2), np.float64))
