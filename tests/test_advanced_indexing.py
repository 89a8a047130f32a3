"""Integer-array and boolean-mask indexing (gpublas/core/indexing.py, gather.py; cuda_src/gather.cu and
scan.cu) against NumPy: gathers and assignments along one axis or under a mask, on views with strides,
NumPy's placement rule, out-of-range indices found on the device before any write, repeated indices
(last wins under both thread orders), take / nonzero / count_nonzero, and the prefix sum under them."""
import numpy as np
import pytest

import gpublas
from gpublas.core import scan

DTYPES = [np.int32, np.float32, np.float64]


def _data(rng, shape, dtype):
    return (rng.standard_normal(shape) * 10).astype(dtype)


def _check(d, x):
    got = d.get()
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got, x)


# -- the prefix sum ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 31, 2048, 2049, 3 * 2048 + 5])
def test_exclusive_scan_matches_cumsum(n, sim_order, rng):
    for x in (rng.random(n) < 0.3, rng.integers(-5, 100, n)):  # a mask, and int64 values (the totals' level)
        sums, total = scan.exclusive_scan(gpublas.to_device(x))
        ref = np.concatenate([[0], np.cumsum(x, dtype=np.int64)])
        np.testing.assert_array_equal(sums.get(), ref)
        assert total == ref[-1]


def test_exclusive_scan_three_levels(rng):
    n = 2048 * 2048 + 7  # more tiles than one tile holds: the totals are scanned in tiles too
    x = rng.random(n) < 0.5
    sums, total = scan.exclusive_scan(gpublas.to_device(x))
    got = sums.get()
    assert total == x.sum() and got[-1] == total
    np.testing.assert_array_equal(got[::4099], np.concatenate([[0], np.cumsum(x)])[::4099])


# -- integer arrays --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 13])
def test_integer_index_along_one_axis(dtype, n, rng):
    x = _data(rng, (n, 7), dtype)
    d = gpublas.to_device(x)
    rows = [0, -1, n - 1, 0] if n else []
    for idx in (rows, np.array(rows, np.int64), gpublas.to_device(np.array(rows, np.int32))):
        _check(d[idx], x[rows])
    cols = np.array([[6, -7, 2], [2, 2, -1]])  # a 2-D index: its axes replace the indexed one
    for idx in (cols, gpublas.to_device(cols)):
        _check(d[:, idx], x[:, cols])
        _check(d[..., idx], x[..., cols])
    small = np.array([6, 0, 3], np.uint8)
    _check(d[:, gpublas.to_device(small)], x[:, small])
    if n:
        _check(d[gpublas.to_device(np.array(n - 1)), 1:], x[n - 1, 1:])  # a 0-d index drops the axis


@pytest.mark.parametrize("dtype", DTYPES)
def test_integer_index_on_strided_views(dtype, rng, sim_order):
    x = _data(rng, (11, 13), dtype)
    d = gpublas.to_device(x)
    for view, ref in ((d[::2, ::-3], x[::2, ::-3]), (d.T, x.T), (d[3:, 5], x[3:, 5]), (d[None, 1:, ::2], x[None, 1:, ::2])):
        idx = np.array([1, -1, 0, 2, 1]) % ref.shape[-1]
        _check(view[..., idx], ref[..., idx])
        _check(view[[0, -1]], ref[[0, -1]])


def test_ints_separated_from_the_array_put_its_axes_first(rng):
    x = _data(rng, (2, 3, 5, 4), np.float64)
    d = gpublas.to_device(x)
    i = np.array([1, 0, -2])  # valid along every axis
    for key in [(1, slice(None), i), (i, slice(None), 1), (slice(None), 1, i), (0, Ellipsis, i),
                (0, Ellipsis, i, slice(None)), (None, 1, i), (1, None, slice(1, 3), i), (i, 0), (0, i)]:
        assert d[key].shape == x[key].shape, key
        _check(d[key], x[key])
    y, e = x.copy(), d.copy()
    y[1, :, i] = np.arange(12).reshape(3, 1, 4)  # the value in NumPy's order (i's axis first)
    e[1, :, i] = gpublas.to_device(np.arange(12.0).reshape(3, 1, 4))
    _check(e, y)


def test_out_of_range_indices_raise_before_any_write(sim_order):
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    d = gpublas.to_device(x)
    bad = [1, 9, -9, 2]
    for idx in (bad, gpublas.to_device(np.array(bad, np.int32)), gpublas.to_device(np.array(bad, np.int64))):
        with pytest.raises(IndexError, match="index 9 is out of bounds for axis 1 with size 7"):
            d[:, idx]
        with pytest.raises(IndexError, match="index 9 is out of bounds for axis 1 with size 7"):
            d[:, idx] = 0.0
        with pytest.raises(IndexError, match="index -9 is out of bounds for axis 0 with size 5"):
            d[idx[2:]] = 1.0
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 2 with size 5"):
        gpublas.zeros((2, 3, 5))[1, :, [5]]
    _check(d, x)


def test_bad_indices_raise_index_error():
    d = gpublas.zeros((5, 4))
    with pytest.raises(IndexError, match="integer \\(or boolean\\) type"):
        d[np.array([0.0, 1.0])]
    with pytest.raises(IndexError, match="integer \\(or boolean\\) type"):
        d[:, gpublas.to_device(np.array([1.5], np.float32))]
    with pytest.raises(IndexError, match="could not be broadcast together with shapes \\(2,\\) \\(3,\\)"):
        d[[0, 1], [1, 2, 3]]  # several arrays broadcast (tests/test_newcomer.py)
    with pytest.raises(IndexError, match="along axis 0; size of axis is 5 but size of corresponding boolean axis is 4"):
        d[np.ones(4, bool)]
    with pytest.raises(IndexError, match="along axis 1; size of axis is 4 but size of corresponding boolean axis is 3"):
        d[np.ones((5, 3), bool)]
    with pytest.raises(IndexError, match="along axis 1; size of axis is 4 but size of corresponding boolean axis is 5"):
        d[:, gpublas.to_device(np.ones(5, bool))] = 1.0
    with pytest.raises(IndexError, match="too many indices"):
        d[np.ones((5, 4, 1), bool)]
    with pytest.raises(IndexError, match="0-d boolean"):
        d[np.array(True)]
    with pytest.raises(IndexError, match="unsupported index"):
        d[1.5]
    np.testing.assert_array_equal(d.get(), 0)


# -- boolean masks ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (13,), (5, 7), (3, 1, 4)])
def test_mask_selects_in_c_order(dtype, shape, rng, sim_order):
    x = _data(rng, shape, dtype)
    d = gpublas.to_device(x)
    full = x > 0
    _check(d[d > 0], x[full])
    _check(d[full], x[full])
    _check(d[np.zeros(shape, bool)], x[np.zeros(shape, bool)])
    _check(d[np.ones(shape, bool)], x[np.ones(shape, bool)])
    lead = full.reshape(shape[0], -1)[:, 0] if x.size else np.zeros(shape[0], bool)  # a mask of the first axis
    _check(d[gpublas.to_device(lead)], x[lead])
    if len(shape) > 1:
        inner = rng.random(shape[1:]) < 0.5  # a mask of the axes after the first
        _check(d[:, inner], x[:, inner])
        _check(d[::-1, gpublas.to_device(inner)], x[::-1, inner])


def test_mask_on_a_strided_view(rng):
    x = _data(rng, (9, 12), np.float32)
    d = gpublas.to_device(x)
    v, ref = d[1::2, ::-5], x[1::2, ::-5]
    m = ref > 0
    _check(v[m], ref[m])
    _check(v[gpublas.to_device(m)[::-1, :][::-1]], ref[m])  # the mask itself a view with strides


# -- assignment --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_setitem_with_integer_arrays_and_masks(dtype, rng, sim_order):
    x = _data(rng, (7, 5), dtype)
    d = gpublas.to_device(x)

    def both(key, value, dvalue=None, dkey=None):
        x[key] = value
        d[key if dkey is None else dkey] = value if dvalue is None else dvalue
        _check(d, x)

    both([0, -1], 3)
    both(np.array([4, 2]), np.arange(5, dtype=dtype), gpublas.to_device(np.arange(5, dtype=dtype)))  # row broadcast
    both((slice(None), [3, 1]), np.full((7, 1), 2, dtype))
    both(x > 0, -1)
    m = x < 0
    both(m, np.arange(m.sum()).astype(dtype), gpublas.to_device(np.arange(m.sum()).astype(np.float64)))  # converted
    both(np.array([True, False, True, False, False, True, False]), np.arange(5, dtype=dtype))
    cols = np.array([1, 0, 0, 1, 1], bool)
    both((slice(1, None, 2), cols), 7, dkey=(slice(1, None, 2), gpublas.to_device(cols)))
    x[[5, 6]] = x[0]
    d[[5, 6]] = d[0]  # the value overlaps the target: read before anything is written
    _check(d, x)
    before = x.copy()
    with pytest.raises(ValueError, match="could not be broadcast to indexing result of shape \\(2, 5\\)"):
        d[[0, 1]] = gpublas.to_device(np.zeros(3, dtype))
    with pytest.raises(TypeError, match="item assignment"):
        d[[0, 1]] = "x"
    _check(d, before)


def test_repeated_indices_last_write_wins(sim_order, rng):
    x = np.zeros(6, np.float32)
    d = gpublas.to_device(x)
    d[[1, 1, 1, 0, 1]] = gpublas.to_device(np.arange(1, 6, dtype=np.float32))
    np.testing.assert_array_equal(d.get(), [4, 5, 0, 0, 0, 0])
    idx = rng.integers(-3, 3, 3000)  # many threads write each of 3 places; the last in idx's order wins
    x, d = np.zeros((3, 4)), gpublas.zeros((3, 4), np.float64)
    vals = np.arange(12000.0).reshape(3000, 4)
    x[idx] = vals
    d[gpublas.to_device(idx)] = gpublas.to_device(vals)
    _check(d, x)
    x[idx] += 1  # NumPy buffers: each place gets its value plus one, once
    d[gpublas.to_device(idx)] += 1
    _check(d, x)


# -- take, nonzero, count_nonzero ---------------------------------------------------------------------------
def test_take(rng):
    x = _data(rng, (4, 6), np.float32)
    d = gpublas.to_device(x)
    for axis, idx in ((None, [23, -1, 0]), (0, [3, 3, -4]), (1, np.array([[5, 0], [1, -6]])), (-1, [2])):
        _check(gpublas.take(d, idx, axis=axis), np.take(x, idx, axis=axis))
    _check(gpublas.take(d, np.array([True, False]), axis=0), np.take(x, np.array([True, False]), axis=0))
    with pytest.raises(np.exceptions.AxisError):
        gpublas.take(d, [0], axis=2)
    with pytest.raises(IndexError, match="index 24 is out of bounds for axis 0 with size 24"):
        gpublas.take(d, [24])


@pytest.mark.parametrize("shape", [(0,), (1,), (17,), (4, 6), (2, 3, 5)])
def test_nonzero_and_count_nonzero(shape, rng):
    x = np.where(rng.random(shape) < 0.4, _data(rng, shape, np.float32), 0).astype(np.float32)
    d = gpublas.to_device(x)
    for got, ref in ((gpublas.nonzero(d), np.nonzero(x)), (gpublas.nonzero(d != 0), np.nonzero(x != 0))):
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            _check(g, r.astype(np.int64))
    assert gpublas.count_nonzero(d) == np.count_nonzero(x)
    if len(shape) > 1:
        _check(gpublas.count_nonzero(d, axis=1), np.count_nonzero(x, axis=1).astype(np.int64))
    with pytest.raises(ValueError, match="0-d"):
        gpublas.nonzero(gpublas.zeros(()))
