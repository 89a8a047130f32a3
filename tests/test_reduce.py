"""Reductions (sum, max, min, mean, argmax, argmin), softmax and logsumexp against NumPy."""
import numpy as np
import pytest
from reference import assert_close

import gpublas

DTYPES = [np.float32, np.float64]
SIZES = [1, 2, 7, 31, 33, 64, 127, 129, 255, 10007, 100003]  # the last two take the two-pass path
REDUCTIONS = ["sum", "mean", "max", "min", "argmax", "argmin"]
AXIS_SHAPES = [(7, 33), (33, 7), (1, 129), (129, 1), (64, 64), (3, 5, 33), (2, 3, 4, 5), (5, 9000)]


def dev(x):
    return gpublas.to_device(x)


def reference(name, x, axis=None, keepdims=False):
    """NumPy's result; sums in float64 so that the tolerance measures the device's rounding only."""
    if name in ("sum", "mean"):
        return getattr(np, name)(x.astype(np.float64), axis=axis, keepdims=keepdims).astype(x.dtype)
    return getattr(np, name)(x, axis=axis, keepdims=keepdims)


def check(name, got, want, dtype, k):
    if name.startswith("arg"):
        assert got.dtype == np.int64  # NumPy's intp
        np.testing.assert_array_equal(got.get(), want)
    else:
        assert got.dtype == dtype
        assert_close(got, want, dtype, k=k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_full_reduction(name, dtype, rng):
    for n in SIZES:
        x = rng.standard_normal(n).astype(dtype)
        got = getattr(gpublas, name)(dev(x))
        assert got.shape == ()
        check(name, got, reference(name, x), dtype, n)
    x = rng.standard_normal((7, 33)).astype(dtype)
    got = getattr(gpublas, name)(dev(x), keepdims=True)
    assert got.shape == (1, 1)
    check(name, got, reference(name, x, keepdims=True), dtype, x.size)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_axis_reduction(name, dtype, rng):
    for shape in AXIS_SHAPES:
        x = rng.standard_normal(shape).astype(dtype)
        for axis in list(range(len(shape))) + [-1]:
            for keepdims in (False, True):
                got = getattr(dev(x), name)(axis=axis, keepdims=keepdims)  # the method form
                want = reference(name, x, axis, keepdims)
                assert got.shape == want.shape, (shape, axis, keepdims)
                check(name, got, want, dtype, shape[axis])


def test_float_conversion_and_methods(rng):
    x = rng.standard_normal((31, 5)).astype(np.float64)
    d = dev(x)
    assert abs(float(d.sum()) - x.sum()) < 1e-12
    assert float(d.max()) == x.max() and float(d.min()) == x.min()
    assert int(d.argmax()) == x.argmax() and int(d.argmin()) == x.argmin()
    assert abs(float(gpublas.mean(d)) - x.mean()) < 1e-14


@pytest.mark.parametrize("dtype", DTYPES)
def test_argmax_ties_give_first_index(dtype):
    x = np.array([1, 5, 2, 5, 5, -3, -3, 0], dtype)
    assert int(gpublas.argmax(dev(x))) == 1
    assert int(gpublas.argmin(dev(x))) == 5
    big = np.zeros(100003, dtype)
    big[[777, 5000, 99999]] = 2
    big[[12, 60000]] = -2
    assert int(gpublas.argmax(dev(big))) == 777
    assert int(gpublas.argmin(dev(big))) == 12
    assert int(gpublas.argmax(dev(np.ones(300, dtype)))) == 0
    m = np.zeros((9, 40), dtype)
    m[[2, 5, 7], 3] = 1
    m[4, [6, 9, 30]] = 1
    np.testing.assert_array_equal(gpublas.argmax(dev(m), axis=0).get(), m.argmax(axis=0))
    np.testing.assert_array_equal(gpublas.argmax(dev(m), axis=1).get(), m.argmax(axis=1))
    np.testing.assert_array_equal(gpublas.argmin(dev(-m), axis=1).get(), (-m).argmin(axis=1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_and_inf(dtype):
    x = np.array([1, np.nan, 3, np.nan, -np.inf], dtype)
    assert np.isnan(float(gpublas.max(dev(x)))) and np.isnan(float(gpublas.min(dev(x))))
    assert int(gpublas.argmax(dev(x))) == np.argmax(x) == 1
    assert int(gpublas.argmin(dev(x))) == np.argmin(x) == 1
    y = np.full(40, -np.inf, dtype)
    assert float(gpublas.max(dev(y))) == -np.inf and int(gpublas.argmax(dev(y))) == 0


@pytest.mark.parametrize("dtype", DTYPES + [np.int32])
def test_long_rows_max_and_min_of_the_values_alone(dtype, rng):
    # rows past a serial kernel's length take reduce_rows, whose value-only max / min is a fold (in lanes on
    # the simulator), in two passes past a part's length: exact, a NaN anywhere wins, infinities kept
    x = (rng.standard_normal((3, 300_001)) * 1000).astype(dtype)
    for f in ("max", "min"):
        np.testing.assert_array_equal(getattr(gpublas, f)(dev(x), axis=1).get(), getattr(x, f)(axis=1))
        assert float(getattr(gpublas, f)(dev(x[0]))) == getattr(x[0], f)()
    if dtype == np.int32:
        return
    x[1, 299_999], x[2, 7], x[0, 5000] = np.nan, np.nan, np.inf
    for f in ("max", "min"):
        np.testing.assert_array_equal(getattr(gpublas, f)(dev(x), axis=1).get(), getattr(x, f)(axis=1))
        assert np.isnan(float(getattr(gpublas, f)(dev(x))))
    y = np.full(10_000, -np.inf, dtype)
    assert float(gpublas.max(dev(y))) == -np.inf and float(gpublas.min(dev(y))) == -np.inf


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_size(dtype):
    e = gpublas.zeros((0,), dtype)
    assert float(gpublas.sum(e)) == 0
    for name in ["max", "min", "argmax", "argmin"]:
        with pytest.raises(ValueError, match="zero-size"):
            getattr(gpublas, name)(e)
    z = gpublas.zeros((0, 5), dtype)
    assert_close(gpublas.sum(z, axis=0), np.zeros(5, dtype), dtype)
    assert gpublas.sum(z, axis=1).shape == (0,)
    assert gpublas.max(z, axis=1).shape == (0,)
    with pytest.raises(ValueError, match="zero-size"):
        gpublas.max(z, axis=0)
    with pytest.warns(RuntimeWarning):
        want = np.mean(np.zeros(0, dtype))
    assert np.isnan(float(gpublas.mean(e))) and np.isnan(want)


def test_bad_axis():
    with pytest.raises(ValueError, match="out of bounds"):
        gpublas.sum(gpublas.zeros((3, 4)), axis=2)
    with pytest.raises(TypeError, match="axis"):
        gpublas.argmax(gpublas.zeros((3, 4)), axis=(0, 1))  # sum takes a tuple (test_array_basics), argmax not
    with pytest.raises(TypeError, match="axis"):
        gpublas.sum(gpublas.zeros((3, 4)), axis=1.0)


# -- softmax and logsumexp ------------------------------------------------------------------------
def np_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_logsumexp(x, keepdims=False):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    r = m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    return r if keepdims else r[..., 0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_logsumexp(dtype, rng):
    for shape in [(1,), (7,), (4, 129), (3, 5, 33), (2, 1000), (64, 2)]:
        for scale in (1.0, 1e4):  # logits ~1e4: exp would overflow without subtracting the max
            x = (rng.standard_normal(shape) * scale).astype(dtype)
            s = gpublas.softmax(dev(x)).get()
            assert np.all(np.isfinite(s))
            assert_close(s, np_softmax(x).astype(dtype), dtype, k=shape[-1])
            lse = gpublas.logsumexp(dev(x))
            assert np.all(np.isfinite(lse.get()))
            assert lse.shape == shape[:-1]
            assert_close(lse, np_logsumexp(x).astype(dtype), dtype, k=shape[-1])
            assert gpublas.logsumexp(dev(x), keepdims=True).shape == shape[:-1] + (1,)
    x = np.full((2, 50), 1e4, dtype)
    assert_close(gpublas.softmax(dev(x)), np.full((2, 50), 0.02, dtype), dtype)
    with pytest.raises(ValueError, match="out of bounds"):  # any axis is taken (tests/test_newcomer.py)
        gpublas.softmax(gpublas.zeros((3, 4), dtype), axis=2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_logsumexp_of_infinite_rows_matches_scipy(dtype):
    from scipy.special import logsumexp as scipy_lse
    inf = np.inf
    x = np.array([[-inf, -inf, -inf], [-inf, 1.0, -inf], [inf, 0.0, 2.0], [np.nan, 0.0, 1.0], [-inf, inf, 0.0]],
                 dtype)
    want = scipy_lse(x.astype(np.float64), axis=-1)  # -inf, 1, inf, nan, inf
    got = gpublas.logsumexp(dev(x)).get()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok].astype(dtype), rtol=1e-6)
    assert got[0] == -inf and got[2] == inf


# -- determinism ----------------------------------------------------------------------------------
def _all_results(x, m):
    d, dm = dev(x), dev(m)
    return [r.get() for r in (gpublas.sum(d), gpublas.mean(d), gpublas.max(d), gpublas.argmin(d),
                              gpublas.sum(dm, axis=0), gpublas.sum(dm, axis=1), gpublas.argmax(dm, axis=0),
                              gpublas.softmax(dm), gpublas.logsumexp(dm))]


def test_identical_under_sim_order_fixture(sim_order, rng):
    x = rng.standard_normal(100003).astype(np.float32)
    m = rng.standard_normal((129, 257)).astype(np.float32)
    wants = [reference("sum", x), reference("mean", x), x.max(), x.argmin(), reference("sum", m, 0),
             reference("sum", m, 1), m.argmax(0), np_softmax(m), np_logsumexp(m)]
    for got, want in zip(_all_results(x, m), wants):
        if got.dtype == np.int64:
            np.testing.assert_array_equal(got, want)
        else:
            assert_close(got, np.asarray(want).astype(got.dtype), got.dtype, k=x.size)


@pytest.mark.skipif(gpublas.backend() != "sim", reason="thread orders are a sim-backend property")
def test_bitwise_identical_across_thread_orders(rng):
    x = rng.standard_normal(100003).astype(np.float32)
    m = rng.standard_normal((129, 257)).astype(np.float32)
    runs = []
    try:
        for order in ["forward", "reverse", "random"]:
            gpublas.sim_thread_order(order)
            runs.append(_all_results(x, m))
    finally:
        gpublas.sim_thread_order("forward")
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)


# -- each kernel, whichever the dispatcher picks on this backend ----------------------------------
from gpublas.core import reduction as R  # noqa: E402
from gpublas.runtime import launch  # noqa: E402


def _launch(kernel, op, x, outer, n, inner, val, idx, scale=1, beta=0):
    if kernel == "rows":
        R.launch_reduce_rows(op, x, outer, n, val, idx, scale)
    elif kernel == "cols":
        R.launch_reduce_cols(op, x, outer, n, inner, val, idx, scale, beta)
    elif kernel == "serial":
        R.launch_reduce_serial(op, x, outer, n, inner, val, idx, scale, beta)
    else:  # serial_gpu: reduce_serial built in the GPU's form (REDUCE_GPU_FORM) and launched as a GPU's launcher does
        k = gpublas.get_kernel("reduce", "reduce_serial", x.dtype, REDUCE_GPU_FORM=1)
        k(-(-outer * inner // 64), 64, x, val, idx, op, outer, n, inner, 1, scale, beta)  # a GPU passes cols 1


@pytest.mark.parametrize("kernel", ["rows", "cols", "serial"] + (["serial_gpu"] if gpublas.backend() == "sim" else []))
@pytest.mark.parametrize("dtype", DTYPES)
def test_each_reduction_kernel(kernel, dtype, rng, sim_order):
    for outer, n, inner in [(1, 1, 1), (3, 7, 1), (5, 33, 1), (2, 300, 1), (1, 5, 37), (3, 33, 2), (2, 1, 64)]:
        if kernel == "rows" and inner > 1:
            continue
        x = rng.standard_normal((outer, n, inner)).astype(dtype)
        x[0, n // 2, 0] = x.max() + 1  # a known argmax
        d = dev(x)
        val, idx = gpublas.empty((outer, inner), dtype), gpublas.empty((outer, inner), np.int32)
        _launch(kernel, R.SUM, d, outer, n, inner, val, None, scale=0.5)
        assert_close(val, 0.5 * x.astype(np.float64).sum(axis=1), dtype, k=n)
        _launch(kernel, R.MAX, d, outer, n, inner, val, idx)
        np.testing.assert_array_equal(val.get(), x.max(axis=1))
        np.testing.assert_array_equal(idx.get(), x.argmax(axis=1))
        _launch(kernel, R.MIN, d, outer, n, inner, None, idx)
        np.testing.assert_array_equal(idx.get(), x.argmin(axis=1))
        if kernel != "rows":  # val = sum + beta * val
            acc = gpublas.to_device(np.ones((outer, inner), dtype))
            _launch(kernel, R.SUM, d, outer, n, inner, acc, None, beta=2.0)
            assert_close(acc, 2 + x.astype(np.float64).sum(axis=1), dtype, k=n)


def test_short_axes_take_the_serial_kernel():
    x = gpublas.to_device(np.ones((4, 16, 8), np.float32))
    with gpublas.profile() as p:
        rows = gpublas.sum(x, axis=2)     # 64 rows of 8: a warp reduce would idle 24 of 32 lanes
        cols = gpublas.sum(x, axis=1)     # 16 values per column
    assert {e.name for e in p.key_averages() if e.kind == "kernel"} == {"reduce_serial"}
    np.testing.assert_array_equal(rows.get(), np.full((4, 16), 8, np.float32))
    np.testing.assert_array_equal(cols.get(), np.full((4, 8), 16, np.float32))
    long_rows = gpublas.zeros((2, 5000), np.float32)
    with gpublas.profile() as p:
        gpublas.sum(long_rows, axis=1)
    assert {e.name for e in p.key_averages() if e.kind == "kernel"} == {"reduce_rows"}


def lane_fold(row, lanes=16):
    """common.cuh's STRIDED_FOLD of a sum on the simulator, in row's dtype: element k into partial k % 16,
    then the partials added pairwise (0 with 8, 1 with 9, ..., 0 with 4, ...)."""
    part = [row.dtype.type(0)] * lanes
    for k, v in enumerate(row):
        part[k % lanes] = v + part[k % lanes]
    w = lanes // 2
    while w:
        part[:w] = [part[i + w] + part[i] for i in range(w)]
        w //= 2
    return part[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_serial_runs_keep_each_outputs_order(dtype, rng, sim_order):
    """reduce_serial with runs of SIM_SERIAL_COLS outputs a thread (the sim's choice; runs of 8 and single
    outputs end a row) gives the bits of one output a thread: each sum in the order k = 0..n-1 (cumsum's)."""
    k = R.get_kernel("reduce", "reduce_serial", dtype)
    for outer, n, inner in [(1, 37, 45), (3, 5, 13), (2, 33, 64), (1, 2, 71), (2, 3, 1), (2, 255, 1), (2, 301, 1)]:
        x = rng.standard_normal((outer, n, inner)).astype(dtype)
        x[0, n // 2, 0] = x[0, 0, 0]  # a tie: the first index wins
        d = dev(x)
        serial = x.cumsum(axis=1, dtype=dtype)[:, -1, :]  # sequential, in dtype
        if inner == 1 and n >= R.SIM_SERIAL_LANES_MIN and launch.simulated():  # long rows: STRIDED_FOLD's lanes
            serial = np.array([[lane_fold(row)] for row in x[:, :, 0]], dtype)
        for cols in (1, 8, R.SIM_SERIAL_COLS):
            runs = outer * -(-inner // cols)
            val, idx = gpublas.empty((outer, inner), dtype), gpublas.empty((outer, inner), np.int32)
            k(1, 64, d, val, None, R.SUM, outer, n, inner, cols, 1, 0)
            np.testing.assert_array_equal(val.get(), serial, err_msg=f"cols {cols}, runs {runs}")
            k(2, 32, d, val, idx, R.MAX, outer, n, inner, cols, 1, 0)
            np.testing.assert_array_equal(val.get(), x.max(axis=1))
            np.testing.assert_array_equal(idx.get(), x.argmax(axis=1))
            acc = gpublas.to_device(np.ones((outer, inner), dtype))
            k(1, 32, d, acc, None, R.SUM, outer, n, inner, cols, 0.5, 2.0)
            np.testing.assert_array_equal(acc.get(), dtype(2) * dtype(1) + serial * dtype(0.5))
