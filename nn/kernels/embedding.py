"""Launchers of nn/cuda/embedding.cu: the row gather and its deterministic scatter-add backward."""
import numpy as np

import gpublas
from gpublas.runtime import device_checks, launch, source
from gpublas.runtime.launch import ceil_div, geometry_1d
from gpublas.runtime.launch import fast_divisor as fd

from .common import KERNELS, _same, get_kernel, in_order_geometry

EMB_THREADS = 128      # at most nn/cuda/embedding.cu's EMB_THREADS
EMB_RUN = source.int_defines("embedding.cu", "EMB_RUN", root=KERNELS)["EMB_RUN"]  # embedding_backward_serial's
EMB_SORT_FROM = 1 << 22  # V * n from which a GPU sorts the indices (embedding_backward_sorted) instead of
                         # comparing every index with every row (a character model's 65 x 8K: 0.5 M compares)


def _indices(idx):
    if idx.dtype != np.int32:
        raise TypeError(f"embedding: indices must be int32 on the device, got {idx.dtype}")


def embedding_forward(weight, idx, y, site=0):
    """y (n, D) = weight[idx] for int32 idx (n,); a row whose index is outside [0, V) is NaN and, with a
    `site` (gpublas.runtime.device_checks.site), raises IndexError at the host's next synchronization."""
    V, D = weight.shape
    _indices(idx)
    if y.shape != (idx.size, D):
        raise ValueError(f"embedding_forward: y {y.shape}, expected {(idx.size, D)}")
    get_kernel("embedding", "embedding_forward", _same("embedding_forward", weight, y))(
        *in_order_geometry(y.size), weight, idx, y, idx.size, fd(D), V, device_checks.record() if site else None,
        site)
    return y


def embedding_backward(dy, idx, dweight, padding_idx, sort=None):
    """dweight[r] += the sum of dy[i] over every i with idx[i] == r, in increasing i (no atomics); the
    row padding_idx (None: none) gets nothing. sort: through the indices sorted (embedding_backward_sorted:
    the same bits); None: on a GPU from V * n >= EMB_SORT_FROM."""
    V, D = dweight.shape
    _indices(idx)
    if dy.shape != (idx.size, D):
        raise ValueError(f"embedding_backward: dy {dy.shape}, expected {(idx.size, D)}")
    dtype, pad = _same("embedding_backward", dy, dweight), -1 if padding_idx is None else padding_idx
    if sort or (sort is None and not launch.simulated() and V * idx.size >= EMB_SORT_FROM):
        if idx.size:
            order = gpublas.argsort(idx.reshape(-1), kind="stable")  # each row's positions a run, increasing i
            get_kernel("embedding", "embedding_backward_sorted", dtype)(
                min(idx.size, 1 << 16), min(256, ceil_div(D, 32) * 32), dy, idx, order, dweight, idx.size, D, V, pad)
        return dweight
    if launch.simulated():  # no barriers: D = 16, V = 45, 768 indices (the LSTM example) 37 -> 8.2 us of CPU
        get_kernel("embedding", "embedding_backward_serial", dtype)(
            *geometry_1d(V * ceil_div(D, EMB_RUN)), dy, idx, dweight, idx.size, D, V, pad)
        return dweight
    block = min(EMB_THREADS, ceil_div(D, 32) * 32)
    get_kernel("embedding", "embedding_backward", dtype)((V, ceil_div(D, block)), block, dy, idx, dweight, idx.size,
                                                         D, pad)
    return dweight
