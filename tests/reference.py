"""Shared test helpers: tolerances per dtype and a comparison that prints the first mismatches
(as llm.c's validate_result does)."""
import numpy as np


def tol(dtype, k=1):
    """(rtol, atol) for a result that sums k products: rounding error grows about like sqrt(k)."""
    eps = float(np.finfo(np.dtype(dtype)).eps)
    scale = max(1.0, float(np.sqrt(k)))
    return 16 * eps * scale, 16 * eps * scale


def assert_close(got, want, dtype=None, k=1, rtol=None, atol=None):
    """assert_allclose with per-dtype tolerances; `got` may be a DeviceArray."""
    if hasattr(got, "get"):
        got = got.get()
    dtype = np.dtype(dtype or np.asarray(want).dtype)
    r, a = tol(dtype, k)
    np.testing.assert_allclose(got, want, rtol=rtol if rtol is not None else r,
                               atol=atol if atol is not None else a)
