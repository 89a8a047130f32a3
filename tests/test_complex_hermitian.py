"""herk and her2k (cuBLAS's C and Z Hermitian rank-k updates) against scipy.linalg.blas (?herk, ?her2k; hemm
is tested beside symm in test_complex_symmetric.py, hemv and her in test_complex_level2.py): both triangles,
trans 'N' / 'C', complex alpha (real for herk), real beta, shapes 1, primes and 0, the recursion (LEAF 4 here;
one n > 64 at the real LEAF into a view, with hemm there too), the imaginary parts of c's diagonal set to 0,
beta == 0 over NaN c, alpha == 0 over NaN inputs, the triangle not named never read nor written, what cuBLAS
refuses refused."""
import itertools

import numpy as np
import pytest

import gpublas
from reference import assert_close, crandn, other_triangle, poison_other_triangle, scipy_blas

DTYPES = [np.complex64, np.complex128]
SHAPES = [(1, 1), (7, 5), (2, 11), (13, 3)]
ALPHA, BETA = 0.5 - 1.5j, -1 + 0.25j


def dev(x):
    return gpublas.to_device(np.ascontiguousarray(x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans,lower", list(itertools.product((False, "C"), (False, True))))
def test_herk_her2k(rng, leaf, sim_order, dtype, trans, lower):
    for m, n in SHAPES:
        a, b = crandn(rng, (m, n), dtype), crandn(rng, (m, n), dtype)
        order = n if trans else m
        c = crandn(rng, (order, order), dtype)   # its diagonal's imaginary parts: set to 0
        args = dict(trans=2 if trans else 0, lower=int(lower))
        for name, ops, alpha in (("herk", (a,), 0.75), ("her2k", (a, b), ALPHA)):
            want = scipy_blas(name, dtype)(alpha, *ops, beta=-0.5, c=c, **args)   # the other triangle: c's, untouched
            dc = dev(c)
            got = getattr(gpublas, name)(*map(dev, ops), dc, trans=trans, lower=lower, alpha=alpha, beta=-0.5)
            assert got is dc
            got = got.get()
            assert_close(got, want, k=2 * n)
            assert (np.diag(got).imag == 0).all()
            np.testing.assert_array_equal(got[other_triangle(order, lower)], c[other_triangle(order, lower)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_past_the_real_leaf_into_views(rng, dtype):
    # c is a 131 x 131 block of a wider matrix (diagonal blocks of the real LEAF, GEMMs between them); a is a
    # strided view
    a, b = crandn(rng, (9, 262), dtype), crandn(rng, (9, 131), dtype)
    big = crandn(rng, (133, 140), dtype)
    dbig = dev(big)
    gpublas.her2k(dev(a)[:, ::2], dev(b), dbig[1:132, 4:135], trans="C", alpha=ALPHA, beta=0.5)
    want = big.copy()
    want[1:132, 4:135] = scipy_blas("her2k", dtype)(ALPHA, a[:, ::2], b, beta=0.5, c=big[1:132, 4:135], trans=2)
    assert_close(dbig, want, k=18)
    dbig = dev(big)
    gpublas.herk(dev(a.T)[::2], dbig[1:132, 4:135], lower=True, alpha=-1.0, beta=0.5)
    want[1:132, 4:135] = scipy_blas("herk", dtype)(-1.0, a.T[::2], beta=0.5, c=big[1:132, 4:135], lower=1)
    assert_close(dbig, want, k=9)
    s = crandn(rng, (131, 131), dtype)
    got = gpublas.hemm(dev(s).T, dbig[1:132, 2:9], alpha=ALPHA)
    assert_close(got, scipy_blas("hemm", dtype)(ALPHA, s.T, want[1:132, 2:9]), k=131)


@pytest.mark.parametrize("dtype", DTYPES)
def test_beta_zero_and_alpha_zero_read_nothing(rng, leaf, dtype):
    n, k = 9, 5
    a, b = crandn(rng, (n, k), dtype), crandn(rng, (n, k), dtype)
    nan_c = np.full((n, n), np.nan, dtype)
    for name, ops, lower, alpha in (("herk", (a,), True, 2.0), ("her2k", (a, b), False, ALPHA)):   # beta == 0
        got = getattr(gpublas, name)(*map(dev, ops), dev(nan_c), lower=lower, alpha=alpha).get()
        tri = np.tril_indices(n) if lower else np.triu_indices(n)
        assert_close(got[tri], scipy_blas(name, dtype)(alpha, *ops, lower=int(lower))[tri], k=2 * k)
        assert np.isnan(got[other_triangle(n, lower)]).all()
    # alpha == 0: c = beta c on the triangle (its diagonal made real), NaN inputs never read
    nan_in, c = np.full((n, k), np.nan, dtype), crandn(rng, (n, n), dtype)
    got = gpublas.herk(dev(nan_in), dev(c), alpha=0.0, beta=3.0).get()
    assert_close(got, scipy_blas("herk", dtype)(0.0, nan_in, beta=3.0, c=c))
    got = gpublas.her2k(dev(nan_in), dev(nan_in), dev(c), alpha=0.0, beta=1.0, lower=True).get()
    np.testing.assert_array_equal(got, c)   # BLAS's quick return: nothing written, the diagonal either


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_shapes(rng, dtype):
    assert gpublas.herk(gpublas.zeros((0, 5), dtype)).shape == (0, 0)
    c = crandn(rng, (4, 4), dtype)          # k = 0: c = beta c on the triangle, its diagonal made real
    got = gpublas.her2k(gpublas.zeros((4, 0), dtype), gpublas.zeros((4, 0), dtype), dev(c), beta=0.5)
    want = np.triu(0.5 * c) + np.tril(c, -1)
    want[np.diag_indices(4)] = want.diagonal().real
    assert_close(got, want)
    assert gpublas.hemv(gpublas.zeros((0, 0), dtype), gpublas.zeros(0, dtype)).shape == (0,)


def test_refusals():
    z, r = gpublas.zeros((4, 3), np.complex64), gpublas.zeros((4, 3), np.float32)
    for trans in ("T", "t", 1):
        with pytest.raises(ValueError, match="transpose.*'N' or 'C'"):
            gpublas.herk(z, trans=trans)
        with pytest.raises(ValueError, match="transpose.*'N' or 'C'"):
            gpublas.her2k(z, z, trans=trans)
    with pytest.raises(ValueError, match="alpha = 1j must be real"):
        gpublas.herk(z, alpha=1j)
    with pytest.raises(ValueError, match=r"beta = \(1\+1j\) must be real"):
        gpublas.her2k(z, z, gpublas.zeros((4, 4), np.complex64), beta=1 + 1j)
    with pytest.raises(ValueError, match="alpha = 2j must be real"):
        gpublas.her(gpublas.zeros(3, np.complex64), gpublas.zeros((3, 3), np.complex64), alpha=2j)
    for f in (lambda: gpublas.herk(r), lambda: gpublas.hemm(gpublas.zeros((4, 4), np.float32), r),
              lambda: gpublas.hemv(gpublas.zeros((3, 3)), gpublas.zeros(3))):
        with pytest.raises(ValueError, match="complex64 or complex128"):
            f()
