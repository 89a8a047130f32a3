"""unique, median, quantile and percentile on the device sort (gpublas.order_stats) against NumPy, called as
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
    with pytest.raises(NotImplementedError, match="axis"):
        gpublas.unique(gpublas.to_device(x), axis=0)


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
    with pytest.raises(NotImplementedError, match="method"):
        gpublas.quantile(di, 0.5, method="nearest")
