"""Comparisons, where, any/all, int32 arithmetic and reductions, astype between every dtype and
broadcasting over up to 8 axes, against NumPy."""
import operator

import numpy as np
import pytest
from reference import assert_close

import gpublas

DTYPES = [np.float32, np.float64, np.int32]
CMPS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


def values(shape, dtype, rng):
    # few distinct values, so that == and != see both outcomes
    return rng.integers(-3, 4, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_comparisons_arrays_scalars_broadcast_views(dtype, rng):
    for sa, sb in [((1,), (1,)), ((7,), (7,)), ((5, 13), (13,)), ((5, 1), (1, 13)), ((0, 3), (3,)), ((), (4,))]:
        a, b = values(sa, dtype, rng), values(sb, dtype, rng)
        da, db = gpublas.to_device(a), gpublas.to_device(b)
        for op in CMPS:
            got = op(da, db)
            assert got.dtype == np.bool_ and got.get().dtype == np.bool_
            np.testing.assert_array_equal(got.get(), op(a, b))
            np.testing.assert_array_equal(op(da, 1).get(), op(a, 1))
            np.testing.assert_array_equal(op(2, da).get(), op(2, a))          # reflected: 2 < a is a > 2
            np.testing.assert_array_equal(op(da, 0.5).get(), op(a, 0.5))      # int32 vs float: in float64
    h = values((6, 9), dtype, rng)
    d = gpublas.to_device(h)
    np.testing.assert_array_equal((d[::-2, 1::3] <= d[:3, :3].T).get(), h[::-2, 1::3] <= h[:3, :3].T)
    np.testing.assert_array_equal(gpublas.greater_equal(d, d[2]).get(), h >= h[2])


def test_equality_is_elementwise_never_identity():
    a, b = gpublas.to_device(np.arange(4.0)), gpublas.to_device(np.arange(4.0))
    assert (a == b).all() and not (a != b).any()
    assert (a == a.copy()).get().tolist() == [True] * 4
    with pytest.raises(ValueError, match="ambiguous"):
        if a == b:
            pass
    assert bool(gpublas.to_device(np.ones(1)) == 1.0)
    assert (a == None) is False and (a != None) is True  # noqa: E711 (not an array operand)
    with pytest.raises(TypeError, match="unhashable"):
        {a}
    assert (a == gpublas.zeros(4, np.float32)).dtype == np.bool_  # mixed dtypes compare in the promoted one


@pytest.mark.parametrize("dtype", DTYPES)
def test_where_broadcasts(dtype, rng):
    c, x, y = rng.random((5, 1, 7)) > 0.5, values((4, 1), dtype, rng), values((7,), dtype, rng)
    dc, dx, dy = map(gpublas.to_device, (c, x, y))
    np.testing.assert_array_equal(gpublas.where(dc, dx, dy).get(), np.where(c, x, y))
    np.testing.assert_array_equal(gpublas.where(dc, dx, 2).get(), np.where(c, x, dtype(2)))
    np.testing.assert_array_equal(gpublas.where(dx > 0, -1, dy[::-1]).get(), np.where(x > 0, dtype(-1), y[::-1]))
    np.testing.assert_array_equal(gpublas.where(dy, dy, 0).get(), np.where(y, y, dtype(0)))  # nonzero = True
    with pytest.raises(ValueError, match="broadcast"):
        gpublas.where(dc, gpublas.zeros((3,), dtype), dy)


@pytest.mark.parametrize("dtype", DTYPES + [np.bool_])
def test_any_all(dtype, rng):
    for shape, axis in [((9,), None), ((4, 7), 0), ((4, 7), 1), ((3, 0), 1), ((3, 0), 0), ((0,), None)]:
        h = (rng.random(shape) > 0.7).astype(dtype)
        d = gpublas.to_device(h)
        for f in ("any", "all"):
            got = getattr(d, f)(axis=axis)
            assert got.dtype == np.bool_
            np.testing.assert_array_equal(got.get(), getattr(h, f)(axis=axis))
        np.testing.assert_array_equal(gpublas.any(d, axis, keepdims=True).get(), h.any(axis, keepdims=True))
    assert gpublas.to_device(np.ones((3, 3), dtype)).all() and not gpublas.zeros(5, dtype).any()


def test_int32_arithmetic_and_reductions(rng):
    a = rng.integers(-1000, 1000, (37, 11)).astype(np.int32)
    b = rng.integers(-1000, 1000, (11,)).astype(np.int32)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    for got, want in [(da + db, a + b), (da - db, a - b), (da * db, a * b), (-da, -a), (abs(da), abs(a)),
                      (da + 7, a + 7), (3 - da, 3 - a), (da * -2, a * -2), (gpublas.maximum(da, db), np.maximum(a, b)),
                      (gpublas.minimum(da, 5), np.minimum(a, 5))]:
        assert got.dtype == want.dtype == np.int32
        np.testing.assert_array_equal(got.get(), want)
    assert (da / db).dtype == np.float64 and (da * 0.5).dtype == np.float64   # NumPy's promotions
    assert_close(da / db, a / b, np.float64)
    assert_close(da * 0.5, a * 0.5, np.float64)
    big = gpublas.full((1000,), 2 ** 30, np.int32)
    assert int(big.sum()) == 1000 * 2 ** 30 and big.sum().dtype == np.int64   # NumPy sums int32 in int64
    for f in ("sum", "max", "min", "argmax", "argmin"):
        for axis in (None, 0, 1):
            got, want = getattr(da[::-1, 2:], f)(axis=axis), getattr(a[::-1, 2:], f)(axis=axis)
            np.testing.assert_array_equal(got.get(), want)
    assert_close(da.mean(axis=0), a.mean(axis=0), np.float64)
    extremes = np.array([-2 ** 31, 2 ** 31 - 1, 0], np.int32)
    de = gpublas.to_device(extremes)
    assert int(de.min()) == -2 ** 31 and int(de.max()) == 2 ** 31 - 1 and int(de.argmin()) == 0
    d = gpublas.to_device(a)
    d[1:] += d[:-1]
    a[1:] += a[:-1]
    np.testing.assert_array_equal(d.get(), a)
    with pytest.raises(OverflowError):
        da + 2 ** 40


ALL = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_]


def test_astype_between_every_dtype(rng):
    src = np.array([0, 1, 2, 7, 100, 3, 0, 1, 255, 64, 5], np.float64)
    for frm in ALL:
        h = src.astype(frm)
        d = gpublas.to_device(h)
        for to in ALL:
            got = d.astype(to)
            assert got.dtype == np.dtype(to) and not gpublas.may_share_memory(got, d)
            np.testing.assert_array_equal(got.get(), h.astype(to))
            np.testing.assert_array_equal(d[::-3].astype(to).get(), h[::-3].astype(to))
    f = np.array([-2.7, -0.5, 0.5, 2.7, np.nan], np.float32)
    np.testing.assert_array_equal(gpublas.to_device(f[:4]).astype(np.int32).get(), f[:4].astype(np.int32))
    np.testing.assert_array_equal(gpublas.to_device(f).astype(np.bool_).get(), f.astype(np.bool_))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_broadcasting_up_to_eight_axes(dtype, rng):
    sa = (2, 1, 3, 1, 2, 1, 3, 1)
    sb = (1, 2, 1, 3, 1, 2, 1, 2)
    a, b = values(sa, dtype, rng), values(sb, dtype, rng)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    np.testing.assert_array_equal((da + db).get(), a + b)
    np.testing.assert_array_equal((da[::-1] * db[..., ::-1]).get(), a[::-1] * b[..., ::-1])
    np.testing.assert_array_equal((da < db).get(), a < b)
    # 10 axes that merge back to few: fine
    c = values((1, 2, 2, 2, 2, 2, 2, 2, 2, 3), dtype, rng)
    np.testing.assert_array_equal((gpublas.to_device(c) - 1).get(), c - 1)
    with pytest.raises(ValueError, match="at most 8"):
        gpublas.zeros((2, 1) * 4 + (2,), dtype) + gpublas.zeros((1, 2) * 4 + (1,), dtype)
