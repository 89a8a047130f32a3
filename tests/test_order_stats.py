"""unique, median, quantile and percentile on the device sort (gpublas.numpy_api.order_stats) against NumPy, called as
numpy.<name>(device_array) too."""
import numpy as np
import pytest

import gpublas


def values(rng, shape, dtype=np.float32):
    """Rounded normals (many duplicates) with NaN, -0.0 and +0.0 for floats."""
    x = np.round(rng.standard_normal(shape) * 2, 1)
    if np.dtype(dtype).kind != "f":
        return (x * 10).astype(dtype)
    flat = x.reshape(-1)
    if flat.size > 12:
        flat[[3, 11]] = np.nan
        flat[[5, 7]] = -0.0, 0.0
    return x.astype(dtype)


def check(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_array_equal(g.get(), w)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_unique_four_forms(dtype, rng):
    for shape in [(0,), (1,), (5, 7), (3001,)]:
        x = values(rng, shape, dtype)
        d = gpublas.to_device(x)
        check(np.unique(d), np.unique(x))
        check(gpublas.unique(d, return_index=True), np.unique(x, return_index=True))
        check(np.unique(d, return_inverse=True), np.unique(x, return_inverse=True))
        check(np.unique(d, return_counts=True), np.unique(x, return_counts=True))
        check(np.unique(d[::-2], True, True, True), np.unique(x[::-2], True, True, True))  # a strided view
    x = values(rng, (40,))
    np.testing.assert_array_equal(np.isnan(gpublas.unique(gpublas.to_device(x), equal_nan=False).get()).sum(), 2)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_unique_slices_along_an_axis(dtype, rng):
    """unique(axis=): distinct rows / columns / slices in lexicographic order, the four forms, against NumPy."""
    x = (rng.integers(0, 3, (9, 4, 3)) * (1.5 if dtype == np.float32 else 1)).astype(dtype)
    x[5] = x[1]  # repeated slices along each axis
    x[:, 3] = x[:, 0]
    x[..., 2] = x[..., 0]
    d = gpublas.to_device(x)
    for axis in (0, 1, -1):
        want = np.unique(x, True, True, True, axis=axis)
        check(np.unique(d, True, True, True, axis=axis), want)
        check(gpublas.unique(d, axis=axis), want[0])
    check(np.unique(d[::-2, 1:], return_counts=True, axis=0), np.unique(x[::-2, 1:], return_counts=True, axis=0))
    check(np.unique(d[:0], axis=0), np.unique(x[:0], axis=0))
    with pytest.raises(np.exceptions.AxisError):
        gpublas.unique(d, axis=3)


def test_median_quantile_percentile(rng):
    y = values(rng, (4, 5, 6))
    y[2, 3] = np.nan  # NaN rows come out NaN
    d = gpublas.to_device(y)
    for axis in (None, 0, -1, (0, 2)):
        for keepdims in (False, True):
            kw = dict(axis=axis, keepdims=keepdims)
            np.testing.assert_allclose(np.median(d, **kw).get(), np.median(y, **kw), rtol=1e-6)
            np.testing.assert_allclose(np.quantile(d, [0.0, 0.13, 0.5, 1.0], **kw).get(),
                                       np.quantile(y, [0.0, 0.13, 0.5, 1.0], **kw), rtol=1e-6)
    assert np.quantile(d, 0.3, axis=1).dtype == np.float32
    i = rng.integers(-50, 50, (3, 8))
    di = gpublas.to_device(i)
    np.testing.assert_array_equal(np.percentile(di, [25, 75], axis=1).get(), np.percentile(i, [25, 75], axis=1))
    np.testing.assert_array_equal(np.median(di[:, ::-3], axis=1).get(), np.median(i[:, ::-3], axis=1))
    with pytest.raises(ValueError, match="range"):
        gpublas.quantile(di, 1.5)
    with pytest.raises(ValueError, match="not a valid method"):
        gpublas.quantile(di, 0.5, method="closest")


METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf", "hazen",
           "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher", "nearest", "midpoint"]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_quantile_methods(dtype, rng):
    """Every method of numpy.quantile (H&F's nine and lower / higher / nearest / midpoint), q at the ends, between
    and on order statistics, rows of 1, 2 and 7 values; a NaN row stays NaN; discrete methods keep the dtype."""
    qs = [0.0, 0.1, 0.25, 0.5, 2 / 3, 0.75, 1.0]
    for shape in [(3, 7), (4, 2), (2, 1)]:
        y = values(rng, shape, dtype)
        if dtype == np.float32 and shape == (3, 7):
            y[1, 4] = np.nan
        d = gpublas.to_device(y)
        for method in METHODS:
            got, want = np.quantile(d, qs, axis=1, method=method), np.quantile(y, qs, axis=1, method=method)
            assert got.dtype == want.dtype and got.shape == want.shape, (method, got.dtype, want.dtype)
            np.testing.assert_allclose(got.get(), want, rtol=1e-6, err_msg=f"{shape} {method}")
    y = values(rng, (5, 6), dtype)
    np.testing.assert_allclose(np.percentile(gpublas.to_device(y), 40, axis=0, method="nearest", keepdims=True).get(),
                               np.percentile(y, 40, axis=0, method="nearest", keepdims=True))
