"""Launchers of nn/cuda/dropout.cu: the counter-based mask, forward and backward."""
import numpy as np

from gpublas.runtime.launch import geometry_1d

from .common import _same, get_kernel


def dropout_forward(x, y, mask, p, seed, counter):
    """y = x * mask / (1 - p) with mask[i] = hash(seed, offset + i) >= p, drawn on the device; offset is
    the int64 device scalar `counter`, which then moves on by x.size (dropout_advance)."""
    if mask.dtype != np.uint8 or mask.size != x.size or y.size != x.size:
        raise ValueError(f"dropout_forward: x {x.shape}, y {y.shape}, mask {mask.dtype} {mask.shape}")
    if counter.dtype != np.int64 or counter.size != 1:
        raise ValueError(f"dropout_forward: counter must be one int64 element, got {counter.dtype} {counter.shape}")
    scale = 1.0 / (1.0 - p)
    dtype = _same("dropout_forward", x, y)
    get_kernel("dropout", "dropout_forward", dtype)(*geometry_1d(x.size), x, y, mask, x.size, p, scale, seed, counter)
    dropout_advance(counter, x.size, dtype)
    return y


def dropout_advance(counter, n, dtype=np.float32):
    """*counter += n on the device (one thread): the next draw's offset. Returns counter."""
    get_kernel("dropout", "dropout_advance", dtype)(1, 1, counter, n)
    return counter


def dropout_backward(dy, mask, dx, p):
    scale = 1.0 / (1.0 - p)
    get_kernel("dropout", "dropout_backward", _same("dropout_backward", dy, dx))(
        *geometry_1d(dy.size), dy, mask, dx, dy.size, scale)
    return dx
