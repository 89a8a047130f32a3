"""iamin and the plane rotations (rot, rotg, rotm, rotmg) against NumPy and scipy.linalg.blas (?rot, ?rotg,
?rotm, ?rotmg): shapes 0, 1, primes, past one block's partials, strided and reversed views, both thread
orders for the reduction."""
import numpy as np
import pytest
from scipy.linalg import blas as sblas

import gpublas
from reference import assert_close

DTYPES = [np.float32, np.float64]
SIZES = [1, 2, 7, 31, 257, 3001]


def blas(name, dtype):
    return getattr(sblas, ("s" if np.dtype(dtype) == np.float32 else "d") + name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_iamin(rng, sim_order, dtype, n):
    x = rng.standard_normal(2 * n).astype(dtype)
    dx = gpublas.to_device(x)
    assert gpublas.iamin(dx) == np.argmin(np.abs(x))
    assert gpublas.iamin(dx[::-2]) == np.argmin(np.abs(x[::-2]))
    x[n // 3] = x[-1] = 0.0  # ties go to the first
    assert gpublas.iamin(gpublas.to_device(x)) == n // 3


def test_iamin_edges():
    assert gpublas.iamin(gpublas.to_device(np.array([np.nan, 3.0, -1.0, np.nan]))) == 2  # NaN never wins
    assert gpublas.iamin(gpublas.to_device(np.array([np.nan, np.nan]))) == 0
    assert gpublas.iamin(gpublas.to_device(np.array([np.inf, -np.inf]))) == 0
    with pytest.raises(ValueError, match="no elements"):
        gpublas.iamin(gpublas.zeros(0, np.float64))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0] + SIZES[:4])
def test_rot(rng, dtype, n):
    x, y = rng.standard_normal(2 * n).astype(dtype), rng.standard_normal(n).astype(dtype)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)
    c, s = gpublas.rotg(3.0, 4.0)
    assert gpublas.rot(dx[::-2], dy, c, s)[1] is dy
    if n:
        wx, wy = blas("rot", dtype)(x[::-2], y, c, s)
        assert_close(dx.get()[::-2], wx)
        assert_close(dy, wy)
        assert_close(dx.get()[-2::-2], x[-2::-2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a,b", [(1.0, 2.0), (3.0, -4.0), (-5.0, 1.0), (0.0, 2.0), (2.0, 0.0), (0.0, 0.0),
                                 (1e30, 1e-30), (-1e-20, 3e-20)])
def test_rotg(dtype, a, b):
    c, s = gpublas.rotg(a, b, dtype=dtype)
    wc, ws = blas("rotg", dtype)(a, b)
    assert_close(np.array([c, s]), np.array([wc, ws], dtype))


CASES = [(1.0, 2.0, 3.0, 4.0), (2.0, 1.0, 4.0, 1.0), (-1.0, 1.0, 1.0, 1.0), (1.0, 0.0, 1.0, 1.0),
         (1.0, 1.0, 0.0, 2.0), (1e-9, 1.0, 1.0, 1.0), (1e9, 1.0, 1.0, 1e-3), (1.0, 1e9, 1e-3, 1.0),
         (0.5, -2.0, 1.0, 1.0)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d1,d2,x1,y1", CASES)
def test_rotmg_rotm(rng, dtype, d1, d2, x1, y1):
    param = gpublas.rotmg(d1, d2, x1, y1, dtype=dtype)
    want = blas("rotmg", dtype)(d1, d2, x1, y1)
    flag = want[0]
    assert param[0] == flag
    used = {-1: [1, 2, 3, 4], 0: [2, 3], 1: [1, 4], -2: []}[int(flag)]  # entries the flag says are meaningful
    assert_close(param[used], want[used])
    if flag != -2:  # H takes (x1, y1) to (x1', 0), rescaled or not
        h = {-1: [[param[1], param[3]], [param[2], param[4]]], 0: [[1, param[3]], [param[2], 1]],
             1: [[param[1], 1], [-1, param[4]]]}[int(flag)]
        assert abs((np.array(h, np.float64) @ [x1, y1])[1]) <= 1e-5 * (abs(x1) + abs(y1))
    n = 13
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(2 * n).astype(dtype)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)
    gpublas.rotm(dx, dy[::2], param)
    if flag == -2:
        assert_close(dx, x)
        assert_close(dy, y)
    else:
        wx, wy = blas("rotm", dtype)(x, y[::2], param)
        assert_close(dx, wx, k=2)
        assert_close(dy.get()[::2], wy, k=2)
        assert_close(dy.get()[1::2], y[1::2])


def test_rotm_bad_param():
    x = gpublas.zeros(3, np.float64)
    with pytest.raises(ValueError, match="5 numbers"):
        gpublas.rotm(x, gpublas.zeros(3, np.float64), [1.0, 2.0])
    with pytest.raises(ValueError, match="flag"):
        gpublas.rotm(x, gpublas.zeros(3, np.float64), [3.0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="shape"):
        gpublas.rot(x, gpublas.zeros(4, np.float64), 1.0, 0.0)
