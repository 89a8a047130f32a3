"""Launchers of nn/cuda/attention_decode.cu: one query per (batch, head) against a key/value cache, split over
the keys in chunks (flash-decoding), then the chunks combined."""
import numpy as np

import gpublas
from gpublas.runtime import dtypes, launch, source
from gpublas.runtime.launch import ceil_div, geometry_1d

from .common import KERNELS, get_kernel

_DEFINES = source.int_defines("attention_decode.cu", "DEC_", root=KERNELS)
THREADS, MAX_CHUNK, MAX_D = _DEFINES["DEC_THREADS"], _DEFINES["DEC_CHUNK"], _DEFINES["DEC_MAX_D"]


def takes(q, k):
    """Whether the decode kernels take this query and cache: one query, head dim <= DEC_MAX_D, d contiguous."""
    return (q.ndim == 4 and q.shape[2] == 1 and 0 < q.shape[3] <= MAX_D and k.shape[2] > 0
            and k.strides[3] == k.dtype.itemsize and dtypes.is_float(q.dtype))


def chunk_size(Tk):
    """Keys a block takes: on a GPU 64 (a batch of one still spreads over many blocks), on the simulator
    DEC_CHUNK (fewer, longer blocks: the CPU's two cores need no more)."""
    return MAX_CHUNK if launch.simulated() else 64


def decode(q, k, v, scale):
    """y (B, H, 1, D) = softmax(scale q k^T) v for q (B, H, 1, D), k and v (B, H, Tk, D) (any b, h, t strides,
    d contiguous), one dtype."""
    B, H, _, D = q.shape
    Tk = k.shape[2]
    if k.shape != v.shape or k.shape[:2] != (B, H) or k.shape[3] != D or not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"attention_decode: q {q.shape} {q.dtype}, k {k.shape} {k.dtype}, v {v.shape} {v.dtype} "
                         "must be (B, H, 1, D), (B, H, Tk, D) twice, of one dtype")
    if not takes(q, k) or v.strides[3] != v.dtype.itemsize:
        raise ValueError(f"attention_decode: head dim {D} (at most {MAX_D}) with contiguous rows of d required")
    size = q.dtype.itemsize
    qs, ks, vs = ([st // size for st in a.strides] for a in (q, k, v))
    chunk = chunk_size(Tk)
    S = ceil_div(Tk, chunk)
    acc = dtypes.TABLE[q.dtype].compute
    part_o, part_ml = gpublas.empty((B * H * S * D,), acc), gpublas.empty((B * H * S * 2,), acc)
    y = gpublas.empty((B, H, 1, D), q.dtype)
    get_kernel("attention_decode", "attention_decode_partial", q.dtype)(
        (S, B * H), THREADS, q, k, v, part_o, part_ml, H, Tk, D, chunk, acc.type(scale), qs[0], qs[1],
        ks[0], ks[1], ks[2], vs[0], vs[1], vs[2], views=True)
    total = B * H * D
    get_kernel("attention_decode", "attention_decode_combine", q.dtype)(
        *geometry_1d(total), part_o, part_ml, y, S, D, np.int64(total))
    return y
