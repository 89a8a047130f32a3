"""Launchers of nn/cuda/attention_decode.cu: one query per (batch, head) against a key/value cache, split over
the keys in chunks (flash-decoding), then the chunks combined; and the cache's append at a position read from
device memory (a replayed decode step)."""
import numpy as np

import gpublas
from gpublas.runtime import device_checks, dtypes, launch, source
from gpublas.runtime.launch import ceil_div, geometry_1d

from .common import KERNELS, get_kernel, in_order_geometry

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


def _index(what, a):
    if not (isinstance(a, gpublas.DeviceArray) and a.dtype == np.int32 and a.size == 1):
        raise TypeError(f"attention_decode: {what} must be one int32 on the device, got "
                        f"{getattr(a, 'dtype', type(a).__name__)} {getattr(a, 'shape', '')}")


def decode(q, k, v, scale, n_keys=None, **defines):
    """y (B, H, 1, D) = softmax(scale q k^T) v for q (B, H, 1, D), k and v (B, H, Tk, D) (any b, h, t strides,
    d contiguous), one dtype; n_keys (one int32 on the device, or None: all Tk): attend the first n_keys of the
    Tk keys only, read by the kernels (a replayed step; Tk is then the cache's capacity). defines: the build's
    (DEC_GPU_FORM=1: the GPU's form of the partial kernel on the simulator, for the tests)."""
    B, H, _, D = q.shape
    Tk = k.shape[2]
    if k.shape != v.shape or k.shape[:2] != (B, H) or k.shape[3] != D or not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"attention_decode: q {q.shape} {q.dtype}, k {k.shape} {k.dtype}, v {v.shape} {v.dtype} "
                         "must be (B, H, 1, D), (B, H, Tk, D) twice, of one dtype")
    if not takes(q, k) or v.strides[3] != v.dtype.itemsize:
        raise ValueError(f"attention_decode: head dim {D} (at most {MAX_D}) with contiguous rows of d required")
    if n_keys is not None:
        _index("n_keys", n_keys)
    size = q.dtype.itemsize
    qs, ks, vs = ([st // size for st in a.strides] for a in (q, k, v))
    chunk = chunk_size(Tk)
    S = ceil_div(Tk, chunk)
    acc = dtypes.TABLE[q.dtype].compute
    part_o, part_ml = gpublas.empty((B * H * S * D,), acc), gpublas.empty((B * H * S * 2,), acc)
    y = gpublas.empty((B, H, 1, D), q.dtype)
    # the simulator's form is one thread a block (attention_decode.cu)
    threads = 1 if launch.simulated() and not defines.get("DEC_GPU_FORM") else THREADS
    launch.get_kernel("attention_decode", "attention_decode_partial", q.dtype, root=KERNELS, **defines)(
        (S, B * H), threads, q, k, v, part_o, part_ml, H, Tk, n_keys, D, chunk, acc.type(scale), qs[0], qs[1],
        ks[0], ks[1], ks[2], vs[0], vs[1], vs[2], views=True)
    total = B * H * D
    get_kernel("attention_decode", "attention_decode_combine", q.dtype)(
        *geometry_1d(total), part_o, part_ml, y, S, Tk, n_keys, chunk, D, np.int64(total))
    return y


def append(qkv, cache_k, cache_v, position, site=0):
    """cache_k[:, :, p] and cache_v[:, :, p] = the k and v thirds of qkv (B, 3C) (q | k | v per row, C = H D),
    for caches (B, H, T, D) (contiguous) and p = position (one int32 on the device, read by the kernel: the
    same launch serves every position). A p outside [0, T) writes nothing and, with a `site`
    (gpublas.runtime.device_checks.site), raises IndexError at the host's next synchronization."""
    B, H, T, D = cache_k.shape
    _index("position", position)
    if (cache_v.shape != cache_k.shape or not (cache_k.c_contiguous and cache_v.c_contiguous) or qkv.ndim != 2
            or qkv.shape != (B, 3 * H * D) or qkv.strides[1] != qkv.itemsize
            or not (qkv.dtype == cache_k.dtype == cache_v.dtype)):
        raise ValueError(f"kv_cache_append: qkv {qkv.shape} {qkv.dtype} must be (B, 3 H D) rows (d contiguous) for "
                         f"contiguous caches (B, H, T, D) {cache_k.shape} {cache_k.dtype} and {cache_v.shape} of "
                         "its dtype")
    total = B * H * D
    get_kernel("attention_decode", "kv_cache_append", qkv.dtype)(
        *in_order_geometry(total), qkv, qkv.strides[0] // qkv.itemsize, cache_k, cache_v, position, H, T, D,
        np.int64(total), device_checks.record() if site else None, site, views=True)
    return cache_k, cache_v
