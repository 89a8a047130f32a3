"""geam and dgmm in complex64 and complex128 (cuBLAS's C and Z) against NumPy: every op pair of 'N', 'T' and
'C' (the conjugate transpose), complex alpha and beta, shapes 1, primes and 0, views in, alpha == 0 and
beta == 0 never reading their operand."""
import itertools

import numpy as np
import pytest

import gpublas
from reference import assert_close, crandn

DTYPES = [np.complex64, np.complex128]
ALPHA, BETA = 1.5 - 0.5j, -0.5 + 2j
OPS = {"N": lambda x: x, "T": lambda x: x.T, "C": lambda x: x.conj().T}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta,tb", list(itertools.product("NTC", repeat=2)))
def test_geam(rng, dtype, ta, tb):
    for m, n in [(1, 1), (7, 13), (0, 4)]:
        a = crandn(rng, (m, n) if ta == "N" else (n, m), dtype)
        b = crandn(rng, (m, n) if tb == "N" else (n, m), dtype)
        got = gpublas.geam(gpublas.to_device(a), gpublas.to_device(b), alpha=ALPHA, beta=BETA, trans_a=ta, trans_b=tb)
        assert got.shape == (m, n) and got.dtype == dtype
        assert_close(got, ALPHA * OPS[ta](a) + BETA * OPS[tb](b), k=2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_geam_views_and_zero_scalars(rng, sim_order, dtype):
    big = crandn(rng, (12, 15), dtype)
    d = gpublas.to_device(big)
    got = gpublas.geam(d[1:8, 2:11:2], d[::-1][:5, 3:10], trans_b="C", alpha=ALPHA, beta=BETA)
    assert_close(got, ALPHA * big[1:8, 2:11:2] + BETA * big[::-1][:5, 3:10].conj().T, k=2)
    got = gpublas.geam(d[:5, 13:1:-2], d[:6, :5], trans_a=2, beta=1j)        # scipy's trans = 2 is 'C' too
    assert_close(got, big[:5, 13:1:-2].conj().T + 1j * big[:6, :5], k=2)
    nan = gpublas.to_device(np.full((3, 4), np.nan, dtype))
    x = crandn(rng, (3, 4), dtype)
    assert_close(gpublas.geam(nan, gpublas.to_device(x), alpha=0.0, beta=BETA), BETA * x)
    assert_close(gpublas.geam(gpublas.to_device(x.T), nan, alpha=ALPHA, beta=0.0, trans_a="C"), ALPHA * x.conj())
    with pytest.raises(ValueError, match=r"a\.conj\(\)\.T is \(4, 3\).*must match"):
        gpublas.geam(nan, nan, trans_a="C")
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.geam(nan, gpublas.zeros((3, 4), np.float64))


def test_geam_real_takes_c_as_t(rng):
    a, b = rng.standard_normal((4, 6)), rng.standard_normal((6, 4))
    got = gpublas.geam(gpublas.to_device(a), gpublas.to_device(b), beta=2.0, trans_b="C")
    assert_close(got, a + 2.0 * b.T, k=2)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["left", "right"])
def test_dgmm(rng, dtype, side):
    for m, n in [(1, 1), (7, 13), (0, 4)]:
        a = crandn(rng, (m, n), dtype)
        x = crandn(rng, 2 * (m if side == "left" else n), dtype)
        da, dx = gpublas.to_device(a), gpublas.to_device(x)
        got = gpublas.dgmm(da if m < 2 else da[::-1], dx[::-2], side=side)   # views in: reversed rows, x
        aa, xx = (a if m < 2 else a[::-1]), x[::-2]                          # x not conjugated, as cdgmm
        assert_close(got, xx[:, None] * aa if side == "left" else aa * xx[None, :])
