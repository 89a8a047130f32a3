"""cumath (gpublas.sin ... gpublas.hypot) against NumPy: float32 and float64, shapes 0, 1 and primes,
strided, reversed and transposed views, broadcasting, scalars on either side, out= aliasing the
input, and NaN, infinities and signed zeros."""
import numpy as np
import pytest
from reference import assert_close

import gpublas

DTYPES = [np.float32, np.float64]
SHAPES = [(0,), (1,), (7,), (131,), (3, 0), (7, 33), (2, 3, 5)]
# name: (NumPy's function, the interval random arguments are drawn from)
UNARY = {
    "sin": (np.sin, -7, 7), "cos": (np.cos, -7, 7), "tan": (np.tan, -1.5, 1.5),
    "arcsin": (np.arcsin, -1, 1), "arccos": (np.arccos, -1, 1), "arctan": (np.arctan, -20, 20),
    "sinh": (np.sinh, -5, 5), "cosh": (np.cosh, -5, 5),
    "floor": (np.floor, -9, 9), "ceil": (np.ceil, -9, 9), "trunc": (np.trunc, -9, 9),
    "log10": (np.log10, 1e-3, 1e3), "log2": (np.log2, 1e-3, 1e3), "log1p": (np.log1p, -0.9, 5),
    "expm1": (np.expm1, -5, 5), "exp2": (np.exp2, -20, 20), "square": (np.square, -9, 9),
    "reciprocal": (np.reciprocal, 0.1, 9), "sign": (np.sign, -3, 3),
}
BINARY = {"fmod": np.fmod, "arctan2": np.arctan2, "hypot": np.hypot}
EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30, 2.0, 100.0, -1e4]
INT_KEEPING = ["floor", "ceil", "trunc", "square", "sign"]  # int32 in, int32 out (NumPy 2)


def dev(x):
    return gpublas.to_device(x)


def uniform(rng, shape, dtype, lo, hi):
    x = rng.uniform(lo, hi, size=shape).astype(dtype)
    if x.size and lo < 0 < hi:
        x.flat[0] = 0  # sign(0), floor(0) ...
    return x


def same_bits_where_zero(got, want):
    """Signed zeros match too (sign(-0.0) is +0.0, trunc(-0.5) is -0.0)."""
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_numpy(name, dtype, rng):
    ref, lo, hi = UNARY[name]
    for shape in SHAPES:
        x = uniform(rng, shape, dtype, lo, hi)
        got = getattr(gpublas, name)(dev(x))
        assert got.shape == x.shape and got.dtype == dtype
        assert_close(got, ref(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_nan_inf_and_signed_zeros(name, dtype):
    x = np.array(EDGES, dtype)
    with np.errstate(all="ignore"):
        want = UNARY[name][0](x)
    got = getattr(gpublas, name)(dev(x)).get()
    assert_close(got, want, dtype)  # NaN where NumPy has NaN, the same infinities
    same_bits_where_zero(got, want)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_views_and_out(name, rng, sim_order):
    ref, lo, hi = UNARY[name]
    f = getattr(gpublas, name)
    x = uniform(rng, (9, 14), np.float64, lo, hi)
    d = dev(x)
    for view, host in [(d[::2, 1::3], x[::2, 1::3]), (d[::-1], x[::-1]), (d.T, x.T), (d[3], x[3])]:
        assert_close(f(view), ref(host), np.float64)
    out = gpublas.zeros((9, 14), np.float32)
    x32 = x.astype(np.float32)
    f(dev(x32)[:, ::-1], out=out[:, ::-1])
    assert_close(out, ref(x32), np.float32)
    f(d, out=d)  # in place
    assert_close(d, ref(x), np.float64)


def test_int32_arrays():
    x = np.array([-7, -1, 0, 1, 5, 46340], np.int32)
    for name in INT_KEEPING:
        got = getattr(gpublas, name)(dev(x))
        assert got.dtype == np.int32, name
        np.testing.assert_array_equal(got.get(), UNARY[name][0](x))
    for name in sorted(set(UNARY) - set(INT_KEEPING)):  # NumPy computes these in float64 (reciprocal: int32)
        with np.errstate(all="ignore"):
            want = UNARY[name][0](x)
        if want.dtype == np.int32:
            with pytest.raises(TypeError, match=f"{name}: NumPy computes a int32 array in int32"):
                getattr(gpublas, name)(dev(x))
            continue
        got = getattr(gpublas, name)(dev(x))
        assert got.dtype == want.dtype == np.float64, name
        np.testing.assert_allclose(got.get(), want, rtol=1e-12, equal_nan=True, err_msg=name)
    y = np.array([3, -2, 7, 1, -1, 0], np.int32)
    for name in sorted(BINARY):  # NumPy's promotion: arctan2 and hypot in float64, fmod in int32 (x % 0 is 0)
        with np.errstate(all="ignore"):
            want = BINARY[name](x, y)
        got = getattr(gpublas, name)(dev(x), dev(y))
        assert got.dtype == want.dtype, name
        np.testing.assert_allclose(got.get(), want, rtol=1e-15, err_msg=name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting_and_views(name, dtype, rng, sim_order):
    ref, f = BINARY[name], getattr(gpublas, name)
    a, b = rng.uniform(-9, 9, (7, 1, 5)).astype(dtype), rng.uniform(-4, 4, (3, 5)).astype(dtype)
    got = f(dev(a), dev(b))
    assert got.shape == (7, 3, 5) and got.dtype == dtype
    assert_close(got, ref(a, b), dtype)
    for sa, sb in [((1,), (1,)), ((131,), (131,)), ((0, 3), (1, 3)), ((2, 1), (1, 0))]:
        x, y = rng.uniform(-9, 9, sa).astype(dtype), rng.uniform(-4, 4, sb).astype(dtype)
        assert_close(f(dev(x), dev(y)), ref(x, y), dtype)
    m = rng.uniform(-9, 9, (11, 12)).astype(dtype)
    dm = dev(m)
    assert_close(f(dm[::-2, :11], dm.T[:6, ::-1]), ref(m[::-2, :11], m.T[:6, ::-1]), dtype)
    f(dm, dm[0], out=dm)  # out aliases a, and b is a row of it: copied first, as NumPy buffers
    assert_close(dm, ref(m, m[0]), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_scalars(name, dtype, rng):
    ref, f = BINARY[name], getattr(gpublas, name)
    a = rng.uniform(-9, 9, (5, 7)).astype(dtype)
    for s in (2.5, -3, dtype(0.75)):  # Python scalars are weak (a NumPy float64 would promote, NumPy 2)
        assert_close(f(dev(a), s), ref(a, dtype(s)), dtype)
        assert_close(f(s, dev(a)), ref(dtype(s), a), dtype)
        assert f(dev(a), s).dtype == dtype
    assert f(dev(a), np.float64(0.75)).dtype == np.float64
    with pytest.raises(TypeError, match="both are scalars"):
        f(1.0, 2.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_nan_inf_and_signed_zeros(name, dtype):
    a, b = (np.array(v, dtype) for v in np.meshgrid(EDGES, EDGES))  # every pair of edge values
    with np.errstate(all="ignore"):
        want = BINARY[name](a, b)
    got = getattr(gpublas, name)(dev(a), dev(b)).get()
    assert_close(got, want, dtype)
    same_bits_where_zero(got, want)


def test_binary_int32_array_with_float_scalar_is_float64():
    x = np.array([-7, 0, 5, 9], np.int32)
    got = gpublas.fmod(dev(x), 2.5)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.get(), np.fmod(x, 2.5))


def test_exp_and_sigmoid_give_one_set_of_bits_in_every_layout():
    # float32 exp and sigmoid take 16 elements at a time on the simulator (vector_math.h), a run's tail padded and
    # strided layouts gathered 16 at a time, so an element's bits do not depend on where it lies or the layout
    edges = np.array([0, -0.0, np.inf, -np.inf, np.nan, 88.7, 89, -103.9, -88, 1e-30, -1e-30], np.float32)
    x = np.concatenate([np.random.default_rng(3).standard_normal(4992).astype(np.float32) * 30, edges])  # 5003
    d = gpublas.to_device(x)
    with np.errstate(over="ignore"):
        want_exp, want_sig = np.exp(x.astype(np.float64)), 1 / (1 + np.exp(-x.astype(np.float64)))
    for f, want in ((gpublas.exp, want_exp), (gpublas.sigmoid, want_sig)):
        flat = f(d).get()
        np.testing.assert_allclose(flat, want.astype(np.float32), rtol=3e-7, atol=0)
        for view, host in ((d[::3], flat[::3]), (d[1:4999].reshape(2, 2499).T, flat[1:4999].reshape(2, 2499).T),
                           (d[7:40], flat[7:40])):
            np.testing.assert_array_equal(f(view).get().view(np.int32), np.ascontiguousarray(host).view(np.int32))
