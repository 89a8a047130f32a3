"""Launchers of nn/cuda/pool.cu: max and average pooling, forward and backward."""
import functools

import numpy as np

from gpublas.runtime.launch import flat_geometry
from gpublas.runtime.launch import fast_divisor as fd

from .common import _same, get_kernel


@functools.lru_cache(maxsize=256)  # a model asks the same few geometries every step
def _pool_sizes(N, C, H, W, OH, OW, geom):
    """pool.cu's size arguments (planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw), divisors packed."""
    kh, kw, sh, sw, ph, pw = geom
    return N * C, fd(H), fd(W), fd(OH), fd(OW), kh, kw, fd(sh), fd(sw), ph, pw


def maxpool_forward(x, y, idx, geom):
    """y, idx (N, C, OH, OW) = the max over each window and its flat position in the input plane."""
    N, C, H, W = x.shape
    OH, OW = y.shape[2:]
    if idx.dtype != np.int32 or idx.shape != y.shape:
        raise ValueError(f"maxpool_forward: idx must be int32 {y.shape}, got {idx.dtype} {idx.shape}")
    get_kernel("pool", "maxpool_forward", _same("maxpool_forward", x, y))(
        *flat_geometry(y.size), x, y, idx, *_pool_sizes(N, C, H, W, OH, OW, geom))
    return y


def _pool_backward_items(dy, dx, geom):
    """The thread items of pool.cu's backward kernels: dy's elements when no two windows overlap (each
    writes its stride cell of dx), else dx's (each gathers)."""
    kh, kw, sh, sw = geom[:4]
    return dy.size if kh <= sh and kw <= sw and dy.size else dx.size


def maxpool_backward(dy, idx, dx, geom):
    """dx = dy routed back to each window's argmax (writes dx)."""
    N, C, H, W = dx.shape
    OH, OW = dy.shape[2:]
    get_kernel("pool", "maxpool_backward", _same("maxpool_backward", dy, dx))(
        *flat_geometry(_pool_backward_items(dy, dx, geom)), dy, idx, dx, *_pool_sizes(N, C, H, W, OH, OW, geom))
    return dx


def avgpool_forward(x, y, geom):
    N, C, H, W = x.shape
    OH, OW = y.shape[2:]
    get_kernel("pool", "avgpool_forward", _same("avgpool_forward", x, y))(
        *flat_geometry(y.size), x, y, *_pool_sizes(N, C, H, W, OH, OW, geom))
    return y


def avgpool_backward(dy, dx, geom):
    N, C, H, W = dx.shape
    OH, OW = dy.shape[2:]
    get_kernel("pool", "avgpool_backward", _same("avgpool_backward", dy, dx))(
        *flat_geometry(_pool_backward_items(dy, dx, geom)), dy, dx, *_pool_sizes(N, C, H, W, OH, OW, geom))
    return dx
