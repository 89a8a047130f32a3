"""Elementwise functions, operators, broadcasting, in-place forms and transpose against NumPy."""
import numpy as np
import pytest
from reference import assert_close

import gpublas

DTYPES = [np.float32, np.float64]
SIZES = [1, 2, 7, 31, 33, 64, 127, 129, 255, 0]
SHAPES = [(n,) for n in SIZES] + [(7, 33), (3, 0), (2, 3, 5)]


def dev(x):
    return gpublas.to_device(x)


def randn(rng, shape, dtype, lo=-3.0, hi=3.0):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


# -- unary functions ------------------------------------------------------------------------------
def np_sigmoid(x):
    return np.exp(-np.logaddexp(0, -x.astype(np.float64)))


UNARY = {
    "exp": (np.exp, -3, 3),
    "log": (np.log, 0.01, 5),
    "sqrt": (np.sqrt, 0, 5),
    "abs": (np.abs, -3, 3),
    "tanh": (np.tanh, -3, 3),
    "sigmoid": (np_sigmoid, -30, 30),
    "relu": (lambda x: np.maximum(x, 0), -3, 3),
    "negative": (np.negative, -3, 3),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype, rng):
    ref, lo, hi = UNARY[name]
    for shape in SHAPES:
        x = randn(rng, shape, dtype, lo, hi)
        got = getattr(gpublas, name)(dev(x))
        assert got.shape == x.shape and got.dtype == dtype
        assert_close(got, ref(x).astype(dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_out_and_in_place(dtype, rng):
    x = randn(rng, (33, 7), dtype)
    out = gpublas.empty((33, 7), dtype)
    assert gpublas.tanh(dev(x), out=out) is out
    assert_close(out, np.tanh(x), dtype)
    d = dev(x)
    gpublas.exp(d, out=d)
    assert_close(d, np.exp(x), dtype)
    with pytest.raises(ValueError, match="shape"):
        gpublas.exp(dev(x), out=gpublas.empty((7, 33), dtype))
    with pytest.raises(ValueError, match="dtype"):
        gpublas.exp(dev(x), out=gpublas.empty((33, 7), np.float64 if dtype == np.float32 else np.float32))


def test_sigmoid_extremes():
    x = np.array([-1e4, -100, -20, 0, 20, 100, 1e4], np.float32)
    got = gpublas.sigmoid(dev(x)).get()
    assert np.all(np.isfinite(got))
    assert_close(got, np_sigmoid(x).astype(np.float32), np.float32)


# -- binary operators -----------------------------------------------------------------------------
OPS = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


def apply(op, a, b):
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
            "**": lambda: a ** b}[op]()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_operators_same_shape_and_scalars(op, dtype, rng):
    for shape in SHAPES:
        a, b = randn(rng, shape, dtype), randn(rng, shape, dtype, 0.5, 3)
        da, db = dev(a), dev(b)
        for got, want in [(apply(op, da, db), apply(op, a, b)),
                          (apply(op, da, 2.5), apply(op, a, dtype(2.5))),
                          (apply(op, 3, db), apply(op, dtype(3), b)),
                          (apply(op, dtype(1.5), db), apply(op, dtype(1.5), b))]:
            assert got.dtype == dtype and got.shape == shape
            assert_close(got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_minus_abs_and_pos(dtype, rng):
    a = randn(rng, (7, 33), dtype)
    assert_close(-dev(a), -a, dtype)
    assert_close(abs(dev(a)), np.abs(a), dtype)
    p = +dev(a)
    assert_close(p, a, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow(dtype, rng):
    a, b = randn(rng, (7, 33), dtype, 0.5, 2), randn(rng, (7, 33), dtype, -2, 2)
    assert_close(dev(a) ** 2, a ** 2, dtype)
    assert_close(dev(a) ** 0.5, np.sqrt(a), dtype)
    assert_close(2 ** dev(b), dtype(2) ** b, dtype)
    assert_close(dev(a) ** dev(b), a ** b, dtype)
    assert_close(gpublas.pow(dev(a), dev(b[0])), a ** b[0], dtype)
    d = dev(a)
    d **= 3
    assert_close(d, a ** 3, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ndarray_operand(dtype, rng):
    a, b = randn(rng, (5, 4), dtype), randn(rng, (5, 4), dtype)
    assert_close(dev(a) + b, a + b, dtype)
    assert_close(b - dev(a), b - a, dtype)


def test_mixed_dtypes_promote():
    """As NumPy 2 (every pair is in test_promotion.py): float32 with float64 computes in float64."""
    a = gpublas.to_device(np.arange(4, dtype=np.float32))
    b = gpublas.to_device(np.arange(4, dtype=np.float64) / 3)
    for got, want in ((a + b, np.arange(4) + np.arange(4) / 3), (gpublas.maximum(b, a), np.arange(4.0))):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got.get(), want, rtol=1e-15)


def test_unsupported_operand_types():
    a = gpublas.zeros((4,), np.float32)
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(TypeError, match="int32"):  # not a NumPy ufunc: no promotion to take from NumPy
        gpublas.sigmoid(gpublas.zeros((4,), np.int32))
    with pytest.raises(ValueError, match="negative integer powers"):
        gpublas.zeros((4,), np.int32) ** -2


# -- broadcasting ---------------------------------------------------------------------------------
BROADCASTS = [
    ((7, 33), (33,)), ((7, 33), (1, 33)), ((7, 33), (7, 1)), ((7, 1), (1, 33)), ((33,), (7, 33)),
    ((1, 33), (7, 33)), ((7, 1), (7, 33)), ((7, 33), ()), ((), (7, 33)), ((129, 1), (255,)),
    ((2, 3, 4, 5), (3, 1, 5)), ((2, 1, 4, 1), (3, 1, 6)), ((2, 3, 4, 5, 6), (6,)), ((2, 3, 4, 5, 6), (4, 1, 1)),
    ((0, 5), (5,)), ((1,), (0,)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", BROADCASTS)
def test_broadcasting(sa, sb, dtype, rng):
    a, b = randn(rng, sa, dtype), randn(rng, sb, dtype, 0.5, 3)
    for op in ["+", "-", "*", "/", "**"]:
        if op == "**":
            a = np.abs(a) + dtype(0.5)
        got = apply(op, dev(a), dev(b))
        want = apply(op, a, b)
        assert got.shape == want.shape
        assert_close(got, want, dtype)
    assert_close(gpublas.maximum(dev(a), dev(b)), np.maximum(a, b), dtype)
    assert_close(gpublas.minimum(dev(a), dev(b)), np.minimum(a, b), dtype)


def test_broadcast_errors():
    with pytest.raises(ValueError, match="broadcast"):
        gpublas.zeros((7, 33)) + gpublas.zeros((7,))
    with pytest.raises(ValueError, match="at most 8"):
        gpublas.zeros((2, 1) * 4 + (2,)) + gpublas.zeros((1, 2) * 4 + (1,))


# -- in-place operators -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/="])
def test_in_place(op, dtype, rng):
    for other_shape in [(7, 33), (33,), (1, 33), (7, 1), (), None]:
        a = randn(rng, (7, 33), dtype)
        b = dtype(1.75) if other_shape is None else randn(rng, other_shape, dtype, 0.5, 3)
        d = dev(a)
        ident = d
        db = b if other_shape is None else dev(b)
        if op == "+=":
            d += db
            a += b
        elif op == "-=":
            d -= db
            a -= b
        elif op == "*=":
            d *= db
            a *= b
        else:
            d /= db
            a /= b
        assert d is ident
        assert_close(d, a, dtype)


def test_in_place_shape_change_raises():
    a = gpublas.zeros((33,))
    with pytest.raises(ValueError, match="in-place"):
        a += gpublas.zeros((7, 33))
    b = gpublas.zeros((7, 1))
    with pytest.raises(ValueError, match="in-place"):
        b *= gpublas.zeros((1, 33))


@pytest.mark.parametrize("dtype", DTYPES)
def test_in_place_with_overlapping_view(dtype, rng):
    # a row of a added to every row of a: NumPy reads the row before any write
    a = randn(rng, (129, 65), dtype)
    d = dev(a)
    d -= d[3]
    a -= a[3].copy()
    assert_close(d, a, dtype)
    d2 = dev(a)
    d2 += d2  # the same array on both sides, element for element
    assert_close(d2, a + a, dtype)


# -- maximum, minimum, where, clip, axpby -----------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_maximum_minimum(dtype, rng):
    for shape in SHAPES:
        a, b = randn(rng, shape, dtype), randn(rng, shape, dtype)
        assert_close(gpublas.maximum(dev(a), dev(b)), np.maximum(a, b), dtype)
        assert_close(gpublas.minimum(dev(a), dev(b)), np.minimum(a, b), dtype)
        assert_close(gpublas.maximum(dev(a), 0.25), np.maximum(a, dtype(0.25)), dtype)
        assert_close(gpublas.minimum(-1, dev(a)), np.minimum(dtype(-1), a), dtype)
    a = np.array([1, np.nan, 3, -np.inf], dtype)
    b = np.array([np.nan, 2, 1, 0], dtype)
    assert_close(gpublas.maximum(dev(a), dev(b)), np.maximum(a, b), dtype)
    assert_close(gpublas.minimum(dev(a), dev(b)), np.minimum(a, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_where(dtype, rng):
    for shape in [(1,), (31,), (129,), (7, 33), (0,)]:
        x, y = randn(rng, shape, dtype), randn(rng, shape, dtype)
        cond = x > 0
        want = np.where(cond, x, y)
        assert_close(gpublas.where(dev(cond), dev(x), dev(y)), want, dtype)            # uint8 (bool)
        assert_close(gpublas.where(cond, dev(x), dev(y)), want, dtype)                 # host bool
        assert_close(gpublas.where(dev(cond.astype(dtype)), dev(x), dev(y)), want, dtype)
        assert_close(gpublas.where(dev(cond.astype(np.int32)), dev(x), dev(y)), want, dtype)
        assert_close(gpublas.where(dev(cond), dev(x), 0.0), np.where(cond, x, 0).astype(dtype), dtype)
        assert_close(gpublas.where(dev(cond), -1, dev(y)), np.where(cond, -1, y).astype(dtype), dtype)
    with pytest.raises(ValueError, match="shape"):
        gpublas.where(dev(np.ones(3, bool)), gpublas.zeros((4,), dtype), gpublas.zeros((4,), dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip(dtype, rng):
    for shape in SHAPES:
        a = randn(rng, shape, dtype)
        assert_close(gpublas.clip(dev(a), -1, 0.5), np.clip(a, -1, 0.5), dtype)
    a = randn(rng, (7, 33), dtype)
    assert_close(gpublas.clip(dev(a), None, 0.5), np.clip(a, None, 0.5), dtype)
    assert_close(gpublas.clip(dev(a), -0.5, None), np.clip(a, -0.5, None), dtype)
    lo, hi = randn(rng, (33,), dtype, -2, -1), randn(rng, (7, 1), dtype, 1, 2)
    assert_close(gpublas.clip(dev(a), dev(lo), dev(hi)), np.clip(a, lo, hi), dtype)
    out = gpublas.empty((7, 33), dtype)
    assert gpublas.clip(dev(a), -1, 1, out=out) is out


@pytest.mark.parametrize("dtype", DTYPES)
def test_axpby(dtype, rng):
    for shape in SHAPES:
        x, y = randn(rng, shape, dtype), randn(rng, shape, dtype)
        assert_close(gpublas.axpby(2.0, dev(x), -0.5, dev(y)), dtype(2) * x - dtype(0.5) * y, dtype)
    x, y = randn(rng, (129,), dtype), randn(rng, (129,), dtype)
    dy = dev(y)
    assert gpublas.axpby(3, dev(x), 1, dy, out=dy) is dy
    assert_close(dy, 3 * x + y, dtype)
    with pytest.raises(ValueError, match="shape"):
        gpublas.axpby(1, dev(x), 1, dev(x[:5]))


# -- transpose ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(dtype, rng):
    for shape in [(1, 1), (1, 255), (255, 1), (7, 33), (33, 7), (64, 31), (129, 65), (32, 32), (0, 5)]:
        a = randn(rng, shape, dtype)
        t = gpublas.transpose(dev(a))
        assert t.shape == shape[::-1]
        np.testing.assert_array_equal(t.get(), a.T)
        np.testing.assert_array_equal(dev(a).T.get(), a.T)
    v = randn(rng, (7,), dtype)
    np.testing.assert_array_equal(dev(v).T.get(), v)
    with pytest.raises(ValueError, match="2-D"):
        gpublas.transpose(gpublas.zeros((2, 3, 4), dtype))


# -- thread order -----------------------------------------------------------------------------------
def test_identical_under_thread_orders(sim_order, rng):
    a = randn(rng, (129, 65), np.float32)
    b = randn(rng, (65,), np.float32, 0.5, 2)
    got = ((dev(a) - dev(b)) / dev(b) * 2 + 1).get()
    np.testing.assert_array_equal(got, ((a - b) / b * np.float32(2) + np.float32(1)))
    np.testing.assert_array_equal(gpublas.transpose(dev(a)).get(), a.T)
    np.testing.assert_array_equal(gpublas.where(dev(a > 0), dev(a), 0.0).get(), np.where(a > 0, a, 0))
