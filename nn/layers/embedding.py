"""Embedding: a lookup table of rows, y = weight[x] (PyTorch's nn.Embedding: weight (V, D) from N(0, 1),
padding_idx's row starts at zero and receives no gradient)."""
import numpy as np

import gpublas
from gpublas.runtime import device_checks

from .. import init
from .. import kernels as K
from ..module import Module, Parameter


class Embedding(Module):
    """x: integer indices of any shape (...), each in [0, num_embeddings); y: (..., embedding_dim).
    backward(dy) adds into weight.grad (deterministically: no atomics) and returns None (indices have
    no gradient)."""
    kernel_families = ("embedding",)  # nn.prefetch

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, *, dtype=np.float32):
        super().__init__()
        if num_embeddings < 1 or embedding_dim < 1:
            raise ValueError(f"Embedding: sizes must be positive, got {num_embeddings}, {embedding_dim}")
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be within num_embeddings ({num_embeddings}), "
                                 f"got {padding_idx}")
            padding_idx = int(padding_idx) % self.num_embeddings
        self.padding_idx = padding_idx
        w = init.normal((self.num_embeddings, self.embedding_dim))
        if padding_idx is not None:
            w[padding_idx] = 0
        self.weight = Parameter(w.astype(dtype))
        self.idx = None

    def extra_repr(self):
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"

    def forward(self, x):
        # x: (...) integers; weight: (V, D); y: (..., D)
        idx, shape = self._indices(x)
        D = self.embedding_dim
        y = K.embedding_forward(self.weight.data, idx, gpublas.empty((idx.size, D), self.dtype), self._site())
        self.idx, self.shape = idx, shape  # cached: the indices (where each dy row goes), nothing else
        return y.reshape(shape + (D,))

    def backward(self, dy):
        # dy: (..., D) -> None; adds dweight (V, D)
        idx = self._cached("idx")
        dy = self._grad_input(dy, self.shape + (self.embedding_dim,), self.weight.dtype)
        # y[i] = weight[idx[i]]  =>  dL/dweight[r] = sum of dy[i] over the i with idx[i] == r
        K.embedding_backward(dy.reshape(idx.size, self.embedding_dim), idx, self.weight.grad, self.padding_idx)
        return None

    def _site(self):
        """The device check's id for an index outside the table (gpublas.runtime.device_checks)."""
        if self._check_site is None:   # per process: never copied or pickled (Module.__getstate__)
            self._check_site = self._new_site()
        return self._check_site

    def _new_site(self):
        return device_checks.site(f"{self.describe()}: index {{value}} at position {{position}} (of the flattened "
                                  f"indices) is outside [0, {{limit}})")

    def _indices(self, x):
        """x as an int32 DeviceArray (flat) and its shape. Host indices are checked to be in range (an
        IndexError naming the first bad one); int32 indices already on the device are used as they are,
        with no read-back (a captured step): the kernel makes the row of an index outside the table NaN
        and records it, and the host's next synchronization (a .get(), the loss as a float) raises
        IndexError naming the first bad one, as PyTorch's device-side assert stops a CUDA run."""
        if isinstance(x, gpublas.DeviceArray) and x.dtype == np.int32:
            return x.reshape(x.size), x.shape
        host = x.get() if isinstance(x, gpublas.DeviceArray) else np.asarray(x)
        if host.dtype.kind not in "iu":
            raise TypeError(f"{self.describe()}: indices must be integers, got {host.dtype}")
        if host.size and (host.min() < 0 or host.max() >= self.num_embeddings):
            bad = np.flatnonzero((host.ravel() < 0) | (host.ravel() >= self.num_embeddings))[0]
            raise IndexError(f"{self.describe()}: index {int(host.ravel()[bad])} at position "
                             f"{tuple(int(i) for i in np.unravel_index(bad, host.shape))} is outside [0, {self.num_embeddings})")
        return gpublas.to_device(np.ascontiguousarray(host.ravel(), dtype=np.int32)), host.shape
