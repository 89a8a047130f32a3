"""geam and dgmm against NumPy: every transpose pair, shapes 1, primes and 0, views in, alpha == 0 and
beta == 0 never reading their operand."""
import itertools

import numpy as np
import pytest

import gpublas
from reference import assert_close

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta,tb", list(itertools.product((False, True), repeat=2)))
def test_geam(rng, sim_order, dtype, ta, tb):
    for m, n in [(1, 1), (7, 13), (33, 9), (0, 4)]:
        a = rng.standard_normal((n, m) if ta else (m, n)).astype(dtype)
        b = rng.standard_normal((n, m) if tb else (m, n)).astype(dtype)
        got = gpublas.geam(gpublas.to_device(a), gpublas.to_device(b), alpha=1.5, beta=-0.5, trans_a=ta,
                           trans_b="T" if tb else "N")
        assert got.shape == (m, n)
        assert_close(got, 1.5 * (a.T if ta else a) - 0.5 * (b.T if tb else b), k=2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_geam_views_and_zero_scalars(rng, dtype):
    big = rng.standard_normal((12, 15)).astype(dtype)
    d = gpublas.to_device(big)
    got = gpublas.geam(d[1:8, 2:11:2], d[::-1][:5, 3:10], trans_b=True, beta=2.0)
    assert_close(got, big[1:8, 2:11:2] + 2.0 * big[::-1][:5, 3:10].T, k=2)
    nan = gpublas.to_device(np.full((3, 4), np.nan, dtype))
    x = rng.standard_normal((3, 4)).astype(dtype)
    assert_close(gpublas.geam(nan, gpublas.to_device(x), alpha=0.0, beta=3.0), 3.0 * x)
    assert_close(gpublas.geam(gpublas.to_device(x), nan, alpha=-1.0, beta=0.0), -x)
    with pytest.raises(ValueError, match="must match"):
        gpublas.geam(nan, nan, trans_b=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["left", "right"])
def test_dgmm(rng, sim_order, dtype, side):
    for m, n in [(1, 1), (7, 13), (33, 9), (0, 4)]:
        a = rng.standard_normal((m, n)).astype(dtype)
        x = rng.standard_normal(2 * (m if side == "left" else n)).astype(dtype)
        da, dx = gpublas.to_device(a), gpublas.to_device(x)
        got = gpublas.dgmm(da.T.T if m < 2 else da[::-1], dx[::-2], side=side)   # views in: reversed rows, x
        aa, xx = (a if m < 2 else a[::-1]), x[::-2]
        assert_close(got, xx[:, None] * aa if side == "left" else aa * xx[None, :])
    with pytest.raises(ValueError, match="x of length"):
        gpublas.dgmm(gpublas.zeros((3, 4), np.float64), gpublas.zeros(4, np.float64), side="left")
