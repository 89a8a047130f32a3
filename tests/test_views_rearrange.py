"""Issue 32 item 4 against NumPy, through numpy.<name>(DeviceArray) and gpublas.<name>: the view functions
(moveaxis, swapaxes, broadcast_to, flip, split, diagonal: views sharing memory), the rearrangements (roll,
repeat, tile, h/v/dstack, diag, tril, triu, argwhere) and the value tests (isnan ... round). Inputs are
0-size, 1-element and strided views with negative steps; axes negative."""
import numpy as np
import pytest

import gpublas

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_]


def _pair(shape, dtype, rng, view=True):
    """(ndarray, DeviceArray) of `shape`; with `view`, both are a reversed, step-2 view of a larger array."""
    big = tuple(2 * s for s in shape) if view else shape
    h = (rng.standard_normal(big) * 4).astype(dtype)
    d = gpublas.to_device(h)
    if view:
        key = tuple(slice(None, None, -2) for _ in shape)
        return h[key], d[key]
    return h, d


def _same(d, h):
    assert isinstance(d, gpublas.DeviceArray), type(d)
    assert d.shape == h.shape and d.dtype == h.dtype, (d.shape, d.dtype, h.shape, h.dtype)
    np.testing.assert_array_equal(d.get(), h)


def _shares(v, d):
    assert v.size == 0 or gpublas.may_share_memory(v, d)


@pytest.mark.parametrize("shape", [(3, 1, 4), (0, 2, 3), (1, 1, 1)])
def test_view_functions_are_numpy_views(shape, rng):
    h, d = _pair(shape, np.float32, rng)
    cases = [(np.moveaxis, (0, -1)), (np.moveaxis, ((0, 1), (-1, 0))), (np.swapaxes, (0, -1)),
             (np.flip, ()), (np.flip, (-1,)), (np.flip, ((0, 2),)), (np.diagonal, ()), (np.diagonal, (1, -1, 0)),
             (np.broadcast_to, ((2,) + shape,))]
    for f, args in cases:
        v = f(d, *args)
        _same(v, f(h, *args))
        _shares(v, d)
    for f, arg, axis in [(np.split, 1, -1), (np.array_split, 2, 2), (np.array_split, [1, 2], 0),
                         (np.split, [0, 5], 1)]:
        parts, want = f(d, arg, axis=axis), f(h, arg, axis=axis)
        assert len(parts) == len(want)
        for p, w in zip(parts, want):
            _same(p, w)
    assert gpublas.flip(d).base is d.base  # the gpublas names are the same functions


def test_writing_through_a_view_writes_the_input():
    d = gpublas.to_device(np.zeros((3, 4), np.float64))
    gpublas.flip(d, 1)[0] = gpublas.to_device(np.arange(4.0))
    gpublas.swapaxes(d, 0, 1)[:, 2] = 7.0
    np.testing.assert_array_equal(d.get(), [[3, 2, 1, 0], [0, 0, 0, 0], [7, 7, 7, 7]])


def test_view_errors():
    d = gpublas.to_device(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="could not be broadcast"):
        np.broadcast_to(d, (4, 2))
    with pytest.raises(ValueError, match="equal division"):
        np.split(d, 2, axis=1)
    with pytest.raises(np.exceptions.AxisError):
        np.moveaxis(d, 2, 0)
    with pytest.raises(ValueError, match="same"):
        np.diagonal(d, 0, 1, -1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rearrangements_match_numpy(dtype, rng):
    for shape in [(3, 5), (1, 1), (0, 4), (2, 3, 2)]:
        h, d = _pair(shape, dtype, rng)
        cases = [(np.roll, (2,), {}), (np.roll, (-1,), {"axis": -1}), (np.roll, ((1, 2), (0, -1)), {}),
                 (np.repeat, (3,), {}), (np.repeat, (2,), {"axis": -1}), (np.repeat, (0,), {"axis": 0}),
                 (np.tile, ((2, 1, 3),), {}), (np.tile, (2,), {}), (np.tril, (), {}), (np.triu, (-1,), {}),
                 (np.tril, (2,), {}), (np.argwhere, (), {}), (np.hstack, None, {}), (np.vstack, None, {}),
                 (np.dstack, None, {})]
        for f, args, kw in cases:
            got, want = (f([d, d]), f([h, h])) if args is None else (f(d, *args, **kw), f(h, *args, **kw))
            _same(got, want)
        counts = rng.integers(0, 3, size=shape[0])
        _same(np.repeat(d, counts, axis=0), np.repeat(h, counts, axis=0))
        _same(np.repeat(d, gpublas.to_device(counts), axis=0), np.repeat(h, counts, axis=0))
        if len(shape) == 2:
            _same(np.diag(d, 1), np.diag(h, 1))
            _same(np.diag(d[:, 0], -2), np.diag(h[:, 0], -2))


def test_rearrangements_edges(rng):
    h = np.arange(7, dtype=np.float32)
    d = gpublas.to_device(h)
    _same(gpublas.roll(d, 100), np.roll(h, 100))
    _same(gpublas.tril(d), np.tril(h))  # a 1-D input as rows of an n x n (NumPy's)
    _same(gpublas.repeat(d[::-3], [0, 4, 1]), np.repeat(h[::-3], [0, 4, 1]))
    _same(gpublas.repeat(d, [0] * 7), np.repeat(h, [0] * 7))
    _same(gpublas.argwhere(gpublas.to_device(np.float32(3))), np.argwhere(np.float32(3)))
    _same(gpublas.hstack([d[:2], h[3:]]), np.hstack([h[:2], h[3:]]))
    with pytest.raises(ValueError, match="negative"):
        gpublas.repeat(d, [1, -1, 0, 0, 0, 0, 0])
    with pytest.raises(ValueError, match="repeats"):
        gpublas.repeat(d, [1, 2])
    with pytest.raises(ValueError, match="1- or 2-d"):
        gpublas.diag(gpublas.to_device(np.zeros((2, 2, 2))))


VALUES = np.array([1.5, -2.5, 0.5, np.nan, np.inf, -np.inf, -0.0, 3.14159, 1e-9, 2.675, -0.125, 1.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.complex64])
def test_value_tests_match_numpy(dtype):
    h = VALUES.astype(dtype)
    if h.dtype.kind == "c":
        h = h.copy()
        h.imag = np.roll(VALUES, 3)
    d = gpublas.to_device(h)[::-1]
    h = h[::-1]
    for f in (np.isnan, np.isinf, np.isfinite, np.nan_to_num):
        _same(f(d), f(h))
    _same(np.nan_to_num(d, nan=-1.0, posinf=9.0, neginf=-9.0), np.nan_to_num(h, nan=-1.0, posinf=9.0, neginf=-9.0))
    for decimals in (0, 1, 3, -1):
        _same(np.round(d, decimals), np.round(h, decimals))
        _same(np.around(d, decimals), np.around(h, decimals))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_])
def test_value_tests_on_integers(dtype):
    h = np.array([0, 1, 15, 25, 100, 3], dtype)
    d = gpublas.to_device(h)
    for f in (np.isnan, np.isinf, np.isfinite, np.nan_to_num, np.round):
        _same(f(d), f(h))
    if dtype is not np.bool_:
        _same(np.round(d, -1), np.round(h, -1))


def test_isclose_allclose_array_equal():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 1e-9, 100.0, 0.0], np.float32)
    b = np.array([1.0 + 1e-6, np.nan, np.inf, np.inf, 0.0, 100.1, -0.0], np.float32)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    for kw in ({}, {"equal_nan": True}, {"rtol": 1e-2}, {"atol": 0.0}):
        _same(np.isclose(da, db, **kw), np.isclose(a, b, **kw))
        _same(np.isclose(da, 1.0, **kw), np.isclose(a, 1.0, **kw))
        _same(np.isclose(da, db[None, :], **kw), np.isclose(a, b[None, :], **kw))
        got = np.allclose(da[[0, 1, 2]], db[[0, 1, 2]], **kw)
        assert type(got) is bool and got == np.allclose(a[[0, 1, 2]], b[[0, 1, 2]], **kw)
    ints = np.array([1, 2, 3], np.int32)
    _same(np.isclose(gpublas.to_device(ints), gpublas.to_device(ints + 1), atol=1), np.isclose(ints, ints + 1, atol=1))
    for x, y, kw in [(a, a, {}), (a, a, {"equal_nan": True}), (a, a[:3], {}), (a[:0], a[:0], {}), (ints, ints, {}),
                     (ints, ints[::-1], {}), (a[[0, 2]], a[[0, 2]], {})]:
        got = np.array_equal(gpublas.to_device(x), gpublas.to_device(y), **kw)
        assert type(got) is bool and got == np.array_equal(x, y, **kw), (x, y, kw)
