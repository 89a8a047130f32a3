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


_BLAS_PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", np.dtype(np.complex64): "c",
                np.dtype(np.complex128): "z"}


def scipy_blas(name, dtype):
    """scipy.linalg.blas's routine `name` for dtype: scipy_blas("symm", np.complex64) is cblas.csymm."""
    from scipy.linalg import blas
    return getattr(blas, _BLAS_PREFIX[np.dtype(dtype)] + name)


def crandn(rng, shape, dtype):
    """Standard normal complex samples (independent real and imaginary parts) as `dtype`."""
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def other_triangle(n, lower):
    """The indices of the triangle of an n x n matrix a routine told `lower` must neither read nor write."""
    return np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)


def poison_other_triangle(a, lower):
    """a with NaN in the triangle a routine told `lower` must not read."""
    a = a.copy()
    a[other_triangle(a.shape[0], lower)] = np.nan
    return a


def PackedAttention(**kw):
    """nn.ScaledDotProductAttention(**kw) taking q, k, v packed as one x (3, B, H, T, D), for nn.gradcheck (which
    perturbs one input); backward returns the three gradients stacked alike."""
    import gpublas
    import nn

    class Packed(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.ScaledDotProductAttention(**kw)

        def forward(self, x):
            return self.attn(x[0], x[1], x[2])

        def backward(self, dy):
            return gpublas.stack(self.attn.backward(dy))

    return Packed()


def copy_weights(ours, theirs):
    """Loads ours' state_dict into the torch module theirs; the names must be the same, key for key and in order."""
    import torch
    state = ours.state_dict()
    assert list(state) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
