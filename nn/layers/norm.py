"""BatchNorm1d, BatchNorm2d and LayerNorm with PyTorch's semantics, parameter and buffer names (weight, bias,
running_mean, running_var, num_batches_tracked), so state_dicts interchange.

Training normalizes with the batch's statistics (biased variance) and moves the running statistics
towards them (unbiased variance): running = (1 - momentum) running + momentum batch, momentum=None
meaning the cumulative average (factor 1 / num_batches_tracked). Eval normalizes with the running
statistics, or with the batch's when track_running_stats=False. num_batches_tracked is a host-side
int64 counter (the host needs it to compute that factor); the other buffers live on the device.
A training step with BatchNorm can be captured in a graph (gpublas.graph) when momentum is a number:
the running statistics move on the device at every replay, while num_batches_tracked counts the
eager forwards and the capture, not the replays; momentum=None refuses capture (GraphError).
"""
import numpy as np

import gpublas
from gpublas.runtime.stream import capturing

from .. import kernels as K
from ..kernels import layernorm as TK
from ..module import Module, Parameter


class _BatchNorm(Module):
    kernel_families = ("batchnorm",)  # nn.prefetch
    ndims, layout = (), ""      # the input ranks a subclass takes, in words for messages
    _storage_inputs = True      # float16/bfloat16 x with float32 statistics and parameters (mixed precision)
    _keep_fp32 = True           # and so after model.to(bfloat16) (statistics in FP32: nn.amp's rule)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, *,
                 dtype=np.float32):
        super().__init__()
        name = type(self).__name__
        if num_features < 1:
            raise ValueError(f"{name}: num_features must be positive, got {num_features}")
        if eps < 0 or (momentum is not None and not 0.0 <= momentum <= 1.0):
            raise ValueError(f"{name}: eps must be >= 0 and momentum in [0, 1] or None, got {eps}, {momentum}")
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"{name}: dtype must be float32 or float64, got {dtype}")
        object.__setattr__(self, "_dtype", dtype)
        C = self.num_features = int(num_features)
        self.eps, self.momentum = float(eps), None if momentum is None else float(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        self.weight = Parameter(np.ones(C, dtype)) if affine else None
        self.bias = Parameter(np.zeros(C, dtype)) if affine else None
        tracked = track_running_stats
        self.register_buffer("running_mean", gpublas.zeros((C,), dtype) if tracked else None)
        self.register_buffer("running_var", gpublas.full((C,), 1.0, dtype) if tracked else None)
        self.register_buffer("num_batches_tracked", np.zeros((), np.int64) if tracked else None)
        self.x = None

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")

    def forward(self, x):
        # x: (N, C), (N, C, L) or (N, C, H, W); y: the same shape; statistics per channel over the rest
        x = self._input(x)
        C = self.num_features
        if x.ndim not in self.ndims or x.shape[1] != C:
            raise ValueError(f"{self.describe()}: expected input {self.layout} with C = {C}, got {x.shape}")
        mean, invstd = gpublas.empty((C,), self._dtype), gpublas.empty((C,), self._dtype)
        batch_stats = self.training or self.running_mean is None
        if batch_stats:
            if x.size <= C:
                raise ValueError(f"{self.describe()}: expected more than 1 value per channel to normalize with "
                                 f"batch statistics, got input {x.shape}")
            update = self.training and self.running_mean is not None
            factor = 0.0
            if update:
                if self.momentum is None and capturing() is not None:
                    raise gpublas.GraphError(f"{self.describe()}: momentum=None (the cumulative average) needs the "
                                             "host's num_batches_tracked at every step and cannot be captured in "
                                             "a graph; give BatchNorm a momentum")
                self.num_batches_tracked += 1
                factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
            K.bn_stats(x, mean, invstd, self.running_mean if update else None, self.running_var if update else None,
                       self.eps, factor, use_running=False)
        else:
            K.bn_stats(x, mean, invstd, self.running_mean, self.running_var, self.eps, 0.0, use_running=True)
        y = K.bn_forward(x, mean, invstd, _data(self.weight), _data(self.bias), gpublas.empty_like(x))
        # cached: x and the per-channel mean and invstd the normalization used (xhat is recomputed from
        # them rather than kept: C numbers instead of a second x-sized array), and whether they are the
        # batch's (then they depend on x and the gradient has the two extra terms)
        self.x, self.mean, self.invstd, self.batch_stats = x, mean, invstd, batch_stats
        return y

    def backward(self, dy):
        # dy: x's shape -> dx: x's shape; adds dweight, dbias (C,)
        x = self._cached("x")
        dy = self._grad_input(dy, x.shape, x.dtype)
        return K.bn_backward(x, dy, self.mean, self.invstd, _data(self.weight), gpublas.empty_like(dy),
                             _grad(self.weight), _grad(self.bias), self.batch_stats)


def _data(p):
    return None if p is None else p.data


def _grad(p):
    return None if p is None else p.grad


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input over N (and L) per channel."""
    ndims, layout = (2, 3), "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) input over N, H and W per channel."""
    ndims, layout = (4,), "(N, C, H, W)"


class LayerNorm(Module):
    """torch.nn.LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias over the trailing
    `normalized_shape` axes of x (biased variance), weight ones and bias zeros of that shape. The statistics
    (mean, rstd per row) are kept in FP32 for 16-bit x, and so are weight and bias (as BatchNorm's)."""
    kernel_families = ("layernorm",)  # nn.prefetch
    _storage_inputs = True
    _keep_fp32 = True

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, *, dtype=np.float32):
        super().__init__()
        shape = (int(normalized_shape),) if np.ndim(normalized_shape) == 0 else tuple(int(s) for s in normalized_shape)
        if not shape or min(shape) < 1:
            raise ValueError(f"LayerNorm: normalized_shape must be positive sizes, got {normalized_shape}")
        if eps < 0:
            raise ValueError(f"LayerNorm: eps must be >= 0, got {eps}")
        dtype = np.dtype(dtype)
        if not gpublas.runtime.dtypes.is_float(dtype):
            raise TypeError(f"LayerNorm: dtype must be a float, got {dtype}")
        object.__setattr__(self, "_dtype", dtype)
        self.normalized_shape, self.eps = shape, float(eps)
        self.elementwise_affine = bool(elementwise_affine)
        self.weight = Parameter(np.ones(shape, dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(shape, dtype)) if elementwise_affine and bias else None
        self.x = None

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"

    def forward(self, x):
        # x: (..., *normalized_shape); y: x's shape; mean, rstd: (rows,) with rows = x.size / C
        x = self._input(x)
        k = len(self.normalized_shape)
        if x.shape[x.ndim - k:] != self.normalized_shape or x.ndim < k:
            raise ValueError(f"{self.describe()}: expected input (..., {', '.join(map(str, self.normalized_shape))}), "
                             f"got {x.shape}")
        x = x if x.c_contiguous else x.copy()
        rows = x.size // int(np.prod(self.normalized_shape))
        acc = gpublas.runtime.dtypes.TABLE[x.dtype].compute
        mean, rstd = gpublas.empty((rows,), acc), gpublas.empty((rows,), acc)
        w, b = _data(self.weight), _data(self.bias)
        w, b = (None if p is None else p.astype(acc) if p.dtype != acc else p for p in (w, b))
        y = TK.layernorm_forward(x, w, b, gpublas.empty_like(x), mean, rstd, self.eps)
        # cached: x and each row's mean and rstd (xhat is recomputed from them in backward rather than kept:
        # two numbers a row instead of a second x-sized array)
        self.x, self.mean, self.rstd, self.w = x, mean, rstd, w
        return y

    def backward(self, dy):
        # dy: x's shape -> dx: x's shape; adds dweight, dbias (normalized_shape)
        x = self._cached("x")
        dy = self._grad_input(dy, x.shape, x.dtype)
        dy = dy if dy.c_contiguous and dy.dtype == x.dtype else dy.astype(x.dtype)  # a 16-bit layer's after it
        return TK.layernorm_backward(x, dy, self.w, self.mean, self.rstd, gpublas.empty_like(dy),
                                    _grad(self.weight), _grad(self.bias))
