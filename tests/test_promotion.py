"""NumPy 2's type promotion in gpublas' elementwise operators, functions and comparisons: every pair of
gpublas' dtypes and Python and NumPy scalars gives NumPy's result dtype and values; `@` promotes,
gemm refuses mixed dtypes; int64 arithmetic and reductions; asarray(list) as NumPy."""
import operator

import numpy as np
import pytest

import gpublas
from gpublas.core.array import DTYPES

OPS = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "divide": operator.truediv,
       "power": operator.pow, "floor_divide": operator.floordiv, "remainder": operator.mod,
       "maximum": gpublas.maximum, "minimum": gpublas.minimum, "fmod": gpublas.fmod,
       "equal": operator.eq, "less": operator.lt, "greater_equal": operator.ge}
NP_OPS = {**{k: getattr(np, k) for k in OPS}, "divide": np.true_divide}
SCALARS = [3, 2.5, np.float64(2.5), np.float32(1.5), np.int64(3), np.int32(2)]


def host(dtype, values):
    return np.array(values).astype(dtype)


def check(name, x, y):
    """gpublas' x (op) y against NumPy's on host copies: same dtype and values, or both refuse."""
    hx = x.get() if isinstance(x, gpublas.DeviceArray) else x
    hy = y.get() if isinstance(y, gpublas.DeviceArray) else y
    try:
        with np.errstate(all="ignore"):
            want = NP_OPS[name](hx, hy)
    except TypeError:
        with pytest.raises(TypeError):
            OPS[name](x, y)
        return "numpy refuses"
    try:
        got = OPS[name](x, y)
    except TypeError as e:  # only a loop dtype gpublas cannot hold (bool ** bool computes in int8), or an
        # operation gpublas defines on real numbers only (complex orderings, maximum, power)
        held = "does not hold" in str(e) and want.dtype not in DTYPES
        assert held or ("complex" in str(e) and np.result_type(hx, hy).kind == "c"), (name, hx.dtype, hy, e)
        return "refused"
    assert got.dtype == want.dtype, (name, hx, hy)
    np.testing.assert_allclose(got.get(), want, rtol=2e-6, err_msg=f"{name} {hx!r} {hy!r}")
    return "ok"


@pytest.mark.parametrize("name", OPS)
def test_every_dtype_pair_promotes_as_numpy(name):
    outcomes = set()
    for da in DTYPES:
        for db in DTYPES:
            a = gpublas.to_device(host(da, [1, 2, 3, 5, 0]))
            b = gpublas.to_device(host(db, [2, 1, 3, 4, 1]))
            outcomes.add(check(name, a, b))
    assert "ok" in outcomes


def test_add_gives_result_type_for_every_pair_and_python_scalar():
    """np.result_type's answer for NumPy's own dtypes (ml_dtypes' bfloat16 promotes by its ufunc
    loops, which result_type does not see: bfloat16 + 2.5 is float32, result_type says float64;
    check() compares those with the ufuncs)."""
    numpy_dtypes = [d for d in DTYPES if d.kind != "V"]
    for da in numpy_dtypes:
        a = gpublas.zeros(3, da)
        for other in [*numpy_dtypes, 3, 2.5]:
            want = np.result_type(da, other)
            b = gpublas.zeros(3, other) if not isinstance(other, (int, float)) else other
            assert (a + b).dtype == want, (da, other)


@pytest.mark.parametrize("name", OPS)
def test_scalars_weak_as_numpy_2(name):
    for da in DTYPES:
        a = gpublas.to_device(host(da, [1, 2, 3, 5]))
        for s in SCALARS:
            check(name, a, s)
            check(name, s, a)


def test_result_dtypes_follow_result_type():
    f32, f64 = gpublas.zeros(3, np.float32), gpublas.zeros(3, np.float64)
    i32 = gpublas.zeros(3, np.int32)
    assert (f32 + f64).dtype == np.result_type(np.float32, np.float64) == np.float64
    assert (i32 + f32).dtype == np.result_type(np.int32, np.float32) == np.float64
    assert (f32 * 2.0).dtype == np.float32 and (i32 * 2).dtype == np.int32 and (i32 + 0.5).dtype == np.float64
    assert (f32 + np.float64(1)).dtype == np.float64  # NumPy scalars are strong (NEP 50)


def test_in_place_same_kind_casting():
    a = gpublas.to_device(np.arange(4, dtype=np.float32))
    a += gpublas.to_device(np.full(4, 0.5))  # float64 into float32: same_kind, as NumPy
    np.testing.assert_array_equal(a.get(), np.arange(4) + np.float32(0.5))
    assert a.dtype == np.float32
    i = gpublas.to_device(np.arange(4, dtype=np.int32))
    with pytest.raises(TypeError, match="same_kind"):
        i += 0.5
    with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
        gpublas.to_device(np.arange(3, dtype=np.uint8)) + 300
    np.testing.assert_array_equal((gpublas.to_device(np.arange(3, dtype=np.uint8)) == 300).get(), [False] * 3)
    np.testing.assert_array_equal((gpublas.to_device(np.array([250, 3], np.uint8)) + 10).get(), [4, 13])


def test_int64_arithmetic_and_reductions():
    h = np.array([2**40, -3, 7, 2**33], np.int64)
    d = gpublas.asarray(h)
    np.testing.assert_array_equal((d * 3 - d // 2 + d % 5).get(), h * 3 - h // 2 + h % 5)
    assert int(d.sum()) == int(h.sum()) and int(d.max()) == 2**40 and d.sum().dtype == np.int64
    np.testing.assert_array_equal((-d).get(), -h)
    x = gpublas.asarray([1, 2, 3])
    assert x.dtype == np.asarray([1, 2, 3]).dtype
    np.testing.assert_array_equal((x * 2).get(), [2, 4, 6])
    assert gpublas.asarray([1.0, 2]).dtype == np.float64 and gpublas.asarray([True]).dtype == np.bool_


def test_floor_divide_and_remainder_follow_numpy_signs():
    for dtype in (np.int32, np.int64):
        h = np.array([-7, -6, -1, 0, 1, 6, 7, np.iinfo(dtype).min], dtype)
        for b in (3, -3, 1, -1, 0):
            with np.errstate(all="ignore"):
                np.testing.assert_array_equal((gpublas.to_device(h) // b).get(), h // dtype(b), err_msg=f"{b}")
                np.testing.assert_array_equal((gpublas.to_device(h) % b).get(), h % dtype(b), err_msg=f"{b}")
    for dtype in (np.float32, np.float64):
        h = np.array([-7.5, -6, -0.0, 0.0, 1e-3, 6, 7.25, np.inf, -np.inf, np.nan], dtype)
        for b in (2.5, -2.5, 0.5, 0.0, np.inf, -np.inf):
            with np.errstate(all="ignore"):
                for op in (operator.floordiv, operator.mod):
                    got, want = op(gpublas.to_device(h), b).get(), op(h, dtype(b))
                    np.testing.assert_array_equal(got, want, err_msg=f"{op.__name__} {b}")
                    signed = ~np.isnan(want)  # a NaN's sign is the hardware's (x86: negative, a GPU: positive)
                    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]),
                                                  err_msg=f"{op.__name__} {b}")
    a, b = np.arange(-6.0, 6.0).reshape(3, 4), np.array([2.5, -1.5, 3.0, -4.0])
    np.testing.assert_array_equal((gpublas.to_device(a) // gpublas.to_device(b)).get(), a // b)  # broadcast
    np.testing.assert_array_equal((7.0 % gpublas.to_device(b)).get(), 7.0 % b)


def test_matmul_promotes_gemm_refuses():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 5))
    c = gpublas.to_device(a) @ gpublas.to_device(b)
    assert c.dtype == np.float64
    np.testing.assert_allclose(c.get(), a.astype(np.float64) @ b, rtol=1e-12)
    c = gpublas.to_device(np.arange(12, dtype=np.int32).reshape(4, 3)) @ gpublas.to_device(b)
    np.testing.assert_allclose(c.get(), np.arange(12).reshape(4, 3) @ b, rtol=1e-12)
    with pytest.raises(TypeError, match="float32, float64, float16, bfloat16, complex64, complex128 matrices"):
        gpublas.to_device(np.ones((2, 2), np.int32)) @ gpublas.to_device(np.ones((2, 2), np.int32))
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b))


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sin", "arctan", "log1p", "floor", "square"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_])
def test_math_functions_on_integer_arrays_compute_where_numpy_does(name, dtype):
    hx = host(dtype, [0, 1, 2, 3, 7, 1])
    with np.errstate(all="ignore"):
        want = getattr(np, name)(hx)  # sin(int32) is float64, sin(uint8) float16; floor(int32) stays int32
    got = getattr(gpublas, name)(gpublas.to_device(hx))  # floor/square keep uint8 (square(bool): int8), computed
    # in int32 and converted back
    assert got.dtype == want.dtype, (name, dtype)
    np.testing.assert_allclose(got.get().astype(np.float64), want.astype(np.float64), rtol=1e-3 if want.itemsize == 2 else 1e-6)


def test_functions_numpy_does_not_have_still_refuse_integers():
    with pytest.raises(TypeError, match="sigmoid: .*int32"):
        gpublas.sigmoid(gpublas.to_device(np.arange(3, dtype=np.int32)))


@pytest.mark.parametrize("tx, ty", [(np.float32, np.float64), (np.int32, np.float32), (np.int64, np.int32)])
def test_where_promotes_two_arrays_as_numpy(tx, ty):
    c = np.array([True, False, True, False])
    hx, hy = host(tx, [1, 2, 3, 4]), host(ty, [5, 6, 7, 8])
    got = gpublas.where(gpublas.to_device(c), gpublas.to_device(hx), gpublas.to_device(hy))
    want = np.where(c, hx, hy)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.get(), want)
