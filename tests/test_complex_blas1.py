"""Complex level 1 beyond the elementwise routines: iamax / iamin with cuBLAS's |re| + |im| (scipy.linalg.blas
icamax / izamax, 0-based), rot with a real s (csrot / zdrot) and a complex one (scipy.linalg.lapack crot /
zrot, cuBLAS's Crot), rotg (crotg / zrotg); rotm and rotmg refused (cuBLAS has them real only)."""
import numpy as np
import pytest
from scipy.linalg import blas as sblas
from scipy.linalg import lapack as slapack

import gpublas
from reference import assert_close, crandn

DTYPES = [np.complex64, np.complex128]
SIZES = [1, 2, 7, 31, 257, 3001]


def prefix(dtype):
    return "c" if np.dtype(dtype) == np.complex64 else "z"


def abs1(x):
    return np.abs(x.real) + np.abs(x.imag)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_iamax_iamin(rng, sim_order, dtype, n):
    x = crandn(rng, 2 * n, dtype)
    dx = gpublas.to_device(x)
    assert gpublas.iamax(dx) == getattr(sblas, f"i{prefix(dtype)}amax")(x) == np.argmax(abs1(x))
    assert gpublas.iamax(dx[::-3]) == np.argmax(abs1(x[::-3]))
    assert gpublas.iamin(dx) == np.argmin(abs1(x))
    assert gpublas.iamin(dx[1::2]) == np.argmin(abs1(x[1::2]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_iamax_iamin_take_re_plus_im_and_the_first_tie(dtype):
    x = np.array([3, 2 + 2j, -1 - 2.5j, 0.3 + 0.3j, 0.5j], dtype)   # |x| would pick 0 and 3 instead
    assert gpublas.iamax(gpublas.to_device(x)) == 1 == getattr(sblas, f"i{prefix(dtype)}amax")(x)
    assert gpublas.iamin(gpublas.to_device(x)) == 4
    big = np.zeros(5000, dtype)
    big[[4000, 512, 4999]] = [-7j, 3 + 4j, 7]     # ties across blocks: the lowest index wins
    assert gpublas.iamax(gpublas.to_device(big)) == 512
    big[:] = 1 + 2j
    big[[4000, 700]] = [2j, -2]
    assert gpublas.iamin(gpublas.to_device(big)) == 700
    with pytest.raises(ValueError, match="no elements"):
        gpublas.iamax(gpublas.zeros(0, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 7, 31])
def test_rot(rng, dtype, n):
    x, y = crandn(rng, 2 * n, dtype), crandn(rng, n, dtype)
    for s, want in ((0.8, getattr(sblas, "csrot" if prefix(dtype) == "c" else "zdrot")),   # real s
                    (0.48 - 0.64j, getattr(slapack, f"{prefix(dtype)}rot"))):             # complex s
        dx, dy = gpublas.to_device(x), gpublas.to_device(y)
        assert gpublas.rot(dx[::-2], dy, 0.6, s)[1] is dy
        if n:
            wx, wy = want(x[::-2], y, 0.6, s)
            assert_close(dx.get()[::-2], wx, k=2)
            assert_close(dy, wy, k=2)
            assert_close(dx.get()[-2::-2], x[-2::-2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a,b", [(3, 4), (0, 4j), (1 + 1j, 0), (0, 0), (0, 3 + 4j), (-3, 4j), (1 - 2j, 3 + 0.5j),
                                 (1e-20 + 2e-20j, 3e-20j), (-2e15 + 1j, 1e15 - 1e15j)])
def test_rotg(dtype, a, b):
    c, s = gpublas.rotg(a, b, dtype=dtype)
    assert type(c) is float and type(s) is complex
    # scipy's wrapper returns c as a complex; its crotg loses float32 accuracy near over/underflow, zrotg not
    extreme = not 1e-15 < max(abs(a), abs(b)) < 1e15 and (a or b)
    wc, ws = getattr(sblas, f"{'z' if extreme else prefix(dtype)}rotg")(a, b)
    assert_close(np.array([c, s]), np.array([wc.real, ws], dtype))
    # the rotation zeros b: -conj(s) a + c b == 0, and takes a to r with |r| = hypot(|a|, |b|)
    scale = abs(a) + abs(b) or 1.0
    assert abs(-np.conj(s) * a + c * b) <= 1e-5 * scale
    assert abs(abs(c * a + s * b) - np.hypot(abs(a), abs(b))) <= 1e-5 * scale


def test_rotg_complex_vectors_round_trip(rng):
    x, y = crandn(rng, 5, np.complex128), crandn(rng, 5, np.complex128)
    c, s = gpublas.rotg(x[0], y[0], dtype=np.complex128)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)
    gpublas.rot(dx, dy, c, s)
    assert abs(dy.get()[0]) < 1e-14 and abs(abs(dx.get()[0]) - np.hypot(abs(x[0]), abs(y[0]))) < 1e-14


def test_refusals():
    x, y = gpublas.zeros(3, np.complex64), gpublas.zeros(3, np.complex64)
    with pytest.raises(ValueError, match="rotm is real only"):
        gpublas.rotm(x, y, [-1.0, 1, 0, 0, 1])
    with pytest.raises(ValueError, match="rotmg is real only"):
        gpublas.rotmg(1.0, 1.0, 1.0, 1.0, dtype=np.complex128)
    with pytest.raises(ValueError, match="c = .* must be real"):
        gpublas.rot(x, y, 0.6 + 0.1j, 0.8)
    with pytest.raises(ValueError, match="complex but x and y are float64"):
        gpublas.rot(gpublas.zeros(3, np.float64), gpublas.zeros(3, np.float64), 0.6, 0.8j)
    with pytest.raises(ValueError, match="dtype=np.complex64"):
        gpublas.rotg(1j, 1.0)
