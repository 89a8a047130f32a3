"""cumsum, cumprod and prod (gpublas.numpy_api.cumulative, cuda_src/cumulative.cu) against NumPy: dtypes, axes, views, one
long row cut into chunks, empty arrays; called as numpy.<name>(device_array) too."""
import numpy as np
import pytest

import gpublas
from gpublas.numpy_api import cumulative


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_cumsum_cumprod_prod(dtype, rng):
    x = (rng.standard_normal((3, 4, 5)) * 3).astype(dtype)
    d = gpublas.to_device(x)
    for axis in (None, 0, 1, -1):
        for f in ("cumsum", "cumprod"):
            got, want = getattr(np, f)(d, axis=axis), getattr(np, f)(x, axis=axis)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got.get(), want, rtol=1e-5)
    for axis in (None, 0, (0, 2), -1):
        for keepdims in (False, True):
            got, want = np.prod(d, axis=axis, keepdims=keepdims), np.prod(x, axis=axis, keepdims=keepdims)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got.get(), want, rtol=1e-5)
    np.testing.assert_allclose(gpublas.cumsum(d[::-1, :, ::2], axis=1).get(), np.cumsum(x[::-1, :, ::2], axis=1),
                               rtol=1e-5)


def test_long_rows_in_chunks_and_edges(rng, monkeypatch):
    monkeypatch.setattr(cumulative, "CHUNK", {True: 1000, False: 1000})  # several levels of chunks
    x = rng.standard_normal((2, 100_003))
    d = gpublas.to_device(x)
    np.testing.assert_allclose(gpublas.cumsum(d, axis=1).get(), np.cumsum(x, axis=1), rtol=1e-9, atol=1e-9)
    y = 1 + rng.standard_normal(30_001) * 1e-3
    np.testing.assert_allclose(gpublas.prod(gpublas.to_device(y)).get(), np.prod(y), rtol=1e-9)
    np.testing.assert_allclose(gpublas.cumprod(gpublas.to_device(y)).get(), np.cumprod(y), rtol=1e-9)
    e = gpublas.to_device(np.zeros((2, 0)))
    assert float(gpublas.prod(e)) == 1.0 and gpublas.cumsum(e, axis=1).shape == (2, 0)
    np.testing.assert_array_equal(gpublas.prod(e, axis=1).get(), np.ones(2))
    assert gpublas.cumsum(gpublas.to_device(np.float32(3))).shape == (1,)
    assert gpublas.cumsum(d, dtype=np.float32).dtype == np.float32
