"""symm, syrk, syr2k, symv and syr against scipy.linalg.blas (?symm, ?syrk, ?syr2k, ?symv, ?syr): both
triangles, both sides / transposes, shapes 1, primes and 0, views, beta == 0 over NaN (c never read),
alpha == 0 over NaN inputs (never read), the triangle not named never read nor written."""
import itertools

import numpy as np
import pytest
from scipy.linalg import blas as sblas

import gpublas
from gpublas.blas import blas3_tri
from reference import assert_close

DTYPES = [np.float32, np.float64]
SHAPES = [(1, 1), (7, 5), (13, 17), (2, 11)]


def blas(name, dtype):
    return getattr(sblas, ("s" if np.dtype(dtype) == np.float32 else "d") + name)


@pytest.fixture
def leaf(monkeypatch):
    monkeypatch.setattr(blas3_tri, "LEAF", 4)


def poison_other_triangle(a, lower):
    """a with NaN in the triangle a routine told `lower` must not read."""
    a = a.copy()
    a[np.triu_indices(a.shape[0], 1) if lower else np.tril_indices(a.shape[0], -1)] = np.nan
    return a


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side,lower", list(itertools.product(("left", "right"), (False, True))))
def test_symm(rng, sim_order, dtype, side, lower):
    for m, n in SHAPES:
        k = m if side == "left" else n
        a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((k, k), (m, n), (m, n)))
        want = blas("symm", dtype)(0.5, a, b, beta=-2.0, c=c, side=int(side == "right"), lower=int(lower))
        dc = gpublas.to_device(c)
        got = gpublas.symm(gpublas.to_device(poison_other_triangle(a, lower)), gpublas.to_device(b), dc, side=side,
                           lower=lower, alpha=0.5, beta=-2.0)
        assert got is dc
        assert_close(got, want, k=k)
        got = gpublas.symm(gpublas.to_device(a), gpublas.to_device(b), side=side, lower=lower)
        assert_close(got, blas("symm", dtype)(1.0, a, b, side=int(side == "right"), lower=int(lower)), k=k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans,lower", list(itertools.product((False, True), repeat=2)))
def test_syrk_syr2k(rng, leaf, sim_order, dtype, trans, lower):
    for m, n in SHAPES:
        a, b = rng.standard_normal((m, n)).astype(dtype), rng.standard_normal((m, n)).astype(dtype)
        order = n if trans else m
        c = rng.standard_normal((order, order)).astype(dtype)
        args = dict(trans=int(trans), lower=int(lower))
        for name, ops in (("syrk", (a,)), ("syr2k", (a, b))):
            want = blas(name, dtype)(0.5, *ops, beta=2.0, c=c, **args)   # the other triangle: c's, untouched
            dc = gpublas.to_device(c)
            got = getattr(gpublas, name)(*map(gpublas.to_device, ops), dc, trans=trans, lower=lower, alpha=0.5,
                                         beta=2.0)
            assert got is dc
            assert_close(got, want, k=2 * n)
            new = getattr(gpublas, name)(*map(gpublas.to_device, ops), trans=trans, lower=lower).get()
            want = blas(name, dtype)(1.0, *ops, **args)
            assert_close(np.tril(new) if lower else np.triu(new), want, k=2 * n)
            assert (new[np.triu_indices(order, 1) if lower else np.tril_indices(order, -1)] == 0).all()


@pytest.mark.parametrize("n,updates", [(8, 1), (11, 2)])
def test_diagonal_blocks_in_one_batched_product(rng, leaf, n, updates):
    # the LEAF-row diagonal blocks of syrk and syr2k: one tri_update over the stack of full blocks (grid z: how
    # many), one more for a short last block, whatever the number of blocks
    a, b = rng.standard_normal((n, 6)), rng.standard_normal((n, 6))
    for name, ops in (("syrk", (a,)), ("syr2k", (a, b))):
        with gpublas.profile() as p:
            got = getattr(gpublas, name)(*map(gpublas.to_device, ops), lower=True)
        rows = [e for e in p.key_averages() if e.name == "tri_update"]
        assert sum(e.count for e in rows) == updates, rows
        assert max((tuple(e.grid) + (1, 1))[2] for e in rows) == n // 4, rows
        assert_close(np.tril(got.get()), blas(name, np.float64)(1.0, *ops, lower=1), k=12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_syrk_past_the_real_leaf_into_a_view(rng, dtype):
    # c is a 131 x 131 block of a wider matrix (three diagonal blocks of the real LEAF, GEMMs between)
    a = rng.standard_normal((131, 9)).astype(dtype)
    big = rng.standard_normal((133, 140)).astype(dtype)
    dbig = gpublas.to_device(big)
    gpublas.syrk(gpublas.to_device(a), dbig[1:132, 4:135], lower=True, alpha=-1.0, beta=0.5)
    want = big.copy()
    want[1:132, 4:135] = blas("syrk", dtype)(-1.0, a, beta=0.5, c=big[1:132, 4:135], lower=1)
    assert_close(dbig, want, k=9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_beta_zero_and_alpha_zero_read_nothing(rng, leaf, dtype):
    n, k = 9, 5
    a, b = rng.standard_normal((n, k)).astype(dtype), rng.standard_normal((n, k)).astype(dtype)
    nan_c = np.full((n, n), np.nan, dtype)
    # beta == 0: NaN in c does not leak into the triangle written; the other triangle stays as it was
    for name, ops, lower in (("syrk", (a,), True), ("syr2k", (a, b), False)):
        got = getattr(gpublas, name)(*map(gpublas.to_device, ops), gpublas.to_device(nan_c), lower=lower).get()
        tri = np.tril_indices(n) if lower else np.triu_indices(n)
        assert_close(got[tri], blas(name, dtype)(1.0, *ops, lower=int(lower))[tri], k=2 * k)
        assert np.isnan(got[np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)]).all()
    sq = rng.standard_normal((n, n)).astype(dtype)
    got = gpublas.symm(gpublas.to_device(sq), gpublas.to_device(sq), gpublas.to_device(nan_c), beta=0.0)
    assert_close(got, blas("symm", dtype)(1.0, sq, sq), k=n)
    # alpha == 0: c = beta c on the triangle, NaN inputs never read
    nan_in, c = np.full((n, k), np.nan, dtype), rng.standard_normal((n, n)).astype(dtype)
    got = gpublas.syrk(gpublas.to_device(nan_in), gpublas.to_device(c), alpha=0.0, beta=3.0).get()
    assert_close(got, np.triu(3 * c) + np.tril(c, -1))
    got = gpublas.syr2k(gpublas.to_device(nan_in), gpublas.to_device(nan_in), gpublas.to_device(c), alpha=0.0,
                        beta=0.0, lower=True).get()
    assert_close(got, np.triu(c, 1))
    got = gpublas.symm(gpublas.to_device(np.full((n, n), np.nan, dtype)), gpublas.to_device(nan_c[:, :3]),
                       gpublas.to_device(c[:, :3]), alpha=0.0, beta=-1.0)
    assert_close(got, -c[:, :3])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
def test_symv_syr(rng, leaf, sim_order, dtype, lower):
    for n in (1, 2, 13):
        a = rng.standard_normal((n, n)).astype(dtype)
        x, y = rng.standard_normal(2 * n).astype(dtype), rng.standard_normal(n).astype(dtype)
        dx = gpublas.to_device(x)
        got = gpublas.symv(gpublas.to_device(poison_other_triangle(a, lower)), dx[::2], lower=lower, alpha=2.0)
        assert_close(got, blas("symv", dtype)(2.0, a, x[::2], lower=int(lower)), k=n)
        dy = gpublas.to_device(y)
        assert gpublas.symv(gpublas.to_device(a), dx[1::2], dy, lower=lower, alpha=-1.0, beta=0.5) is dy
        assert_close(dy, blas("symv", dtype)(-1.0, a, x[1::2], beta=0.5, y=y, lower=int(lower)), k=n)
        da = gpublas.to_device(a)
        assert gpublas.syr(dx[::-2], da, alpha=0.25, lower=lower) is da
        assert_close(da, blas("syr", dtype)(0.25, x[::-2], a=a, lower=int(lower)), k=2)


def test_bad_arguments():
    a, b = gpublas.zeros((4, 4), np.float64), gpublas.zeros((4, 3), np.float64)
    with pytest.raises(ValueError, match=r"needs a of shape \(3, 3\)"):
        gpublas.symm(a, b, side="right")
    with pytest.raises(ValueError, match="beta = 1.0 needs an output c"):
        gpublas.syrk(b, beta=1.0)
    with pytest.raises(ValueError, match=r"c has shape \(4, 4\), expected \(3, 3\)"):
        gpublas.syrk(b, a, trans=True)
    with pytest.raises(ValueError, match="same shape"):
        gpublas.syr2k(b, a)
    with pytest.raises(ValueError, match="shares memory"):
        gpublas.syrk(a[:, :2], a)
    with pytest.raises(ValueError, match="x of length n"):
        gpublas.symv(a, gpublas.zeros(3, np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_symv_syr_read_nothing_they_need_not(rng, dtype):
    n = 7
    a, x = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal(n).astype(dtype)
    nan_a, nan_x = gpublas.to_device(np.full((n, n), np.nan, dtype)), gpublas.to_device(np.full(n, np.nan, dtype))
    y = gpublas.to_device(np.full(n, np.nan, dtype))     # beta == 0: y never read
    assert_close(gpublas.symv(gpublas.to_device(a), gpublas.to_device(x), y), blas("symv", dtype)(1.0, a, x), k=n)
    y0 = rng.standard_normal(n).astype(dtype)            # alpha == 0: neither a nor x read
    assert_close(gpublas.symv(nan_a, nan_x, gpublas.to_device(y0), alpha=0.0, beta=2.0), 2 * y0)
    da = gpublas.to_device(a)
    gpublas.syr(nan_x, da, alpha=0.0)
    np.testing.assert_array_equal(da.get(), a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_shapes(rng, dtype):
    assert gpublas.symm(gpublas.zeros((3, 3), dtype), gpublas.zeros((3, 0), dtype)).shape == (3, 0)
    assert gpublas.symm(gpublas.zeros((0, 0), dtype), gpublas.zeros((0, 4), dtype)).shape == (0, 4)
    c = rng.standard_normal((4, 0)).astype(dtype)
    got = gpublas.symm(gpublas.zeros((0, 0), dtype), gpublas.zeros((4, 0), dtype), gpublas.to_device(c), side="right")
    assert got.shape == (4, 0)
    assert gpublas.syrk(gpublas.zeros((0, 5), dtype)).shape == (0, 0)
    c = rng.standard_normal((4, 4)).astype(dtype)        # k = 0: c = beta c on the triangle, a never read
    got = gpublas.syr2k(gpublas.zeros((4, 0), dtype), gpublas.zeros((4, 0), dtype), gpublas.to_device(c), beta=0.5)
    assert_close(got, np.triu(0.5 * c) + np.tril(c, -1))
    y = rng.standard_normal(0).astype(dtype)
    assert gpublas.symv(gpublas.zeros((0, 0), dtype), gpublas.to_device(y)).shape == (0,)
