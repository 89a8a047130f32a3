"""gemv and ger against scipy.linalg.blas (sgemv/dgemv, sger/dger)."""
import numpy as np
import pytest
from scipy.linalg import blas as sblas

import gpublas
from reference import assert_close

DTYPES = [np.float32, np.float64]
# (M, N): ones, primes, non-multiples of 32 (warp) and 256 (gemv_t row chunk), a tall 3-chunk case
SHAPES = [(1, 1), (2, 7), (7, 31), (33, 64), (129, 127), (64, 1), (513, 33)]


def blas(name, dtype):
    return getattr(sblas, ("s" if np.dtype(dtype) == np.float32 else "d") + name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("m,n", SHAPES)
def test_gemv(rng, dtype, trans, m, n):
    a = rng.standard_normal((m, n)).astype(dtype)
    x = rng.standard_normal(m if trans else n).astype(dtype)
    got = gpublas.gemv(gpublas.to_device(a), gpublas.to_device(x), trans=trans)
    assert got.shape == ((n,) if trans else (m,))
    assert_close(got, blas("gemv", dtype)(1.0, a, x, trans=int(trans)), k=m if trans else n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("alpha,beta", [(2.5, 0.0), (0.5, -1.5), (1.0, 1.0)])
def test_gemv_alpha_beta(rng, dtype, trans, alpha, beta):
    m, n = 33, 31
    a = rng.standard_normal((m, n)).astype(dtype)
    x = rng.standard_normal(m if trans else n).astype(dtype)
    y = rng.standard_normal(n if trans else m).astype(dtype)
    dy = gpublas.to_device(y)
    got = gpublas.gemv(gpublas.to_device(a), gpublas.to_device(x), dy, alpha=alpha, beta=beta, trans=trans)
    assert got is dy
    assert_close(got, blas("gemv", dtype)(alpha, a, x, beta=beta, y=y, trans=int(trans)), k=33)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [False, True])
def test_gemv_nan_semantics(rng, dtype, trans):
    m, n = 31, 33
    a = rng.standard_normal((m, n)).astype(dtype)
    x = rng.standard_normal(m if trans else n).astype(dtype)
    ny = n if trans else m
    # beta == 0: NaN already in y does not leak
    y = gpublas.to_device(np.full(ny, np.nan, dtype))
    gpublas.gemv(gpublas.to_device(a), gpublas.to_device(x), y, alpha=-1.0, trans=trans)
    assert_close(y, -((a.T if trans else a).astype(np.float64) @ x), dtype, k=33)
    # alpha == 0: NaN in a and x are not read; y = beta * y
    y0 = rng.standard_normal(ny).astype(dtype)
    nan_a, nan_x = np.full_like(a, np.nan), np.full_like(x, np.nan)
    got = gpublas.gemv(gpublas.to_device(nan_a), gpublas.to_device(nan_x), gpublas.to_device(y0), alpha=0.0, beta=2.0,
                       trans=trans)
    assert_close(got, 2.0 * y0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemv_zero_sized(rng, dtype):
    assert gpublas.gemv(gpublas.zeros((0, 5), dtype), gpublas.zeros(5, dtype)).shape == (0,)
    assert gpublas.gemv(gpublas.zeros((5, 0), dtype), gpublas.zeros(5, dtype), trans=True).shape == (0,)
    # empty inner dimension: y = beta * y (a new y is zeros)
    assert_close(gpublas.gemv(gpublas.zeros((4, 0), dtype), gpublas.zeros(0, dtype)), np.zeros(4), dtype)
    y = rng.standard_normal(4).astype(dtype)
    got = gpublas.gemv(gpublas.zeros((0, 4), dtype), gpublas.zeros(0, dtype), gpublas.to_device(y), beta=3.0,
                       trans=True)
    assert_close(got, 3.0 * y)


def test_gemv_identical_under_thread_orders(rng, sim_order):
    a = gpublas.to_device(rng.standard_normal((300, 45)).astype(np.float32))
    xn = gpublas.to_device(rng.standard_normal(45).astype(np.float32))
    xt = gpublas.to_device(rng.standard_normal(300).astype(np.float32))
    first = gpublas.gemv(a, xn).get(), gpublas.gemv(a, xt, trans=True).get()
    if gpublas.backend() == "sim":
        gpublas.sim_thread_order("random")
    np.testing.assert_array_equal(gpublas.gemv(a, xn).get(), first[0])
    np.testing.assert_array_equal(gpublas.gemv(a, xt, trans=True).get(), first[1])


def test_gemv_errors_name_shapes():
    a = gpublas.zeros((3, 4))
    with pytest.raises(ValueError, match=r"a \(3, 4\) needs x of shape \(4,\), got x of shape \(3,\)"):
        gpublas.gemv(a, gpublas.zeros(3))
    with pytest.raises(ValueError, match=r"a\.T \(a \(3, 4\)\) needs x of shape \(3,\)"):
        gpublas.gemv(a, gpublas.zeros(4), trans=True)
    with pytest.raises(ValueError, match=r"y has shape \(4,\), expected \(3,\)"):
        gpublas.gemv(a, gpublas.zeros(4), gpublas.zeros(4))
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.gemv(a, gpublas.zeros(4, np.float64))
    with pytest.raises(ValueError, match=r"2-D, got shape \(4,\)"):
        gpublas.gemv(gpublas.zeros(4), gpublas.zeros(4))
    with pytest.raises(ValueError, match="beta"):
        gpublas.gemv(a, gpublas.zeros(4), beta=1.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", SHAPES[:-1] + [(2, 513)])
@pytest.mark.parametrize("alpha", [1.0, -0.75])
def test_ger(rng, dtype, m, n, alpha):
    a = rng.standard_normal((m, n)).astype(dtype)
    x = rng.standard_normal(m).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    da = gpublas.to_device(a)
    assert gpublas.ger(alpha, gpublas.to_device(x), gpublas.to_device(y), da) is da
    assert_close(da, blas("ger", dtype)(alpha, x, y, a=a))


def test_ger_alpha_zero_and_errors(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    da = gpublas.to_device(a)
    nan_x, inf_y = np.full(3, np.nan, np.float32), np.full(4, np.inf, np.float32)
    gpublas.ger(0.0, gpublas.to_device(nan_x), gpublas.to_device(inf_y), da)
    np.testing.assert_array_equal(da.get(), a)
    assert gpublas.ger(1.0, gpublas.zeros(0), gpublas.zeros(4), gpublas.zeros((0, 4))).shape == (0, 4)
    with pytest.raises(ValueError, match=r"a \(3, 4\), x \(4,\), y \(4,\)"):
        gpublas.ger(1.0, gpublas.zeros(4), gpublas.zeros(4), da)
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.ger(1.0, gpublas.zeros(3, np.float64), gpublas.zeros(4), da)
