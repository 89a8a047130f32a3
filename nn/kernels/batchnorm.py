"""Launchers of nn/cuda/batchnorm.cu: per-channel statistics, normalisation and its backward."""
from gpublas.runtime.launch import geometry_1d

from .common import _storage, get_kernel

BN_THREADS = 256       # threads per block of nn/cuda/batchnorm.cu's per-channel kernels


def _ncl(x, C):
    """x's (N, C, L) view: L = the product of the axes after the channel axis (1 for (N, C))."""
    if x.ndim < 2 or x.shape[1] != C:
        raise ValueError(f"batchnorm: expected x (N, {C}, ...), got {x.shape}")
    return x.shape[0], x.size // max(1, x.shape[0] * C)


def bn_stats(x, mean, invstd, running_mean, running_var, eps, momentum, use_running):
    """mean, invstd (C,) of x's channels from the batch (updating the running buffers when given, with
    factor `momentum`) or, with use_running, from the running buffers."""
    C = mean.size
    N, L = _ncl(x, C)
    if invstd.size != C or any(b is not None and b.size != C for b in (running_mean, running_var)):
        raise ValueError(f"bn_stats: per-channel arrays must have {C} elements")
    if use_running and (running_mean is None or running_var is None):
        raise ValueError("bn_stats: use_running needs the running buffers")
    get_kernel("batchnorm", "bn_stats", _storage("bn_stats", [x], [mean, invstd, running_mean, running_var]))(
        C, BN_THREADS, x, mean, invstd, running_mean, running_var, N, C, L, eps, momentum, int(use_running))
    return mean, invstd


def bn_forward(x, mean, invstd, gamma, beta, y):
    """y = (x - mean[c]) invstd[c] gamma[c] + beta[c] (gamma, beta may be None)."""
    C = mean.size
    N, L = _ncl(x, C)
    if y.shape != x.shape:
        raise ValueError(f"bn_forward: y {y.shape} differs from x {x.shape}")
    get_kernel("batchnorm", "bn_forward", _storage("bn_forward", [x, y], [mean, invstd, gamma, beta]))(
        *geometry_1d(x.size), x, mean, invstd, gamma, beta, y, x.size, C, L)
    return y


def bn_backward(x, dy, mean, invstd, gamma, dx, dgamma, dbeta, batch_stats):
    """dx (writes), and dgamma, dbeta (adds; may be None) of batch normalization; batch_stats: mean and
    invstd came from this batch (so they depend on x) rather than from the running buffers."""
    C = mean.size
    N, L = _ncl(x, C)
    if dy.shape != x.shape or dx.shape != x.shape:
        raise ValueError(f"bn_backward: x {x.shape}, dy {dy.shape}, dx {dx.shape} differ")
    dtype = _storage("bn_backward", [x, dy, dx], [mean, invstd, gamma, dgamma, dbeta])
    get_kernel("batchnorm", "bn_backward", dtype)(
        C, BN_THREADS, x, dy, mean, invstd, gamma, dx, dgamma, dbeta, N, C, L, int(batch_stats))
    return dx
