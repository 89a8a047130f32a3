"""GEMM v2 (cuda_src/gemm_v2.cu, gemm_tf32.cu): choosing a kernel variant and configuration, and launching it.

blas3.gemm's dispatcher calls `choose` for the automatic choice and `launch` for every v2 kernel name:

    name        kernels                             when `auto` picks it (cuda backend; M x N x K, batch B)
    ----------  ----------------------------------  -----------------------------------------------------------
    naive       gemm.cu gemm_naive                  M*N*K <= 32^3: launch cost dominates
    v2_large    gemm_v2_large_<ta><tb>_<copy>       blocks of 128x128 (FP64: 128x64) * B >= SMs
    v2_medium   gemm_v2_medium_...  (64x64)         else blocks of 64x64 * B >= SMs / 2
    v2_small    gemm_v2_small_...   (32x64)         else, unless split-K applies
    splitk      gemm_v2_small_... per K slice,      B == 1, 32x64 blocks < SMs / 2 and K >= 32 BK (512 floats):
                then gemm_splitk_reduce             S = min(SMs / blocks, K / (16 BK), 16) slices
    regblock    gemm.cu gemm_regblock               a leading dimension * 128 >= 2^31 (v2 index math is 32-bit)
    tf32        gemm_tf32_large_... (128x256)       never: opt-in (kernel="tf32"), float32, sm_80+

<copy> is `vec` (16-byte cp.async) when both operands' pointers are 16-byte aligned and their leading
dimensions, batch strides and contiguous extents are multiples of 16 bytes, else `elem`. On the sim
backend blas3 keeps its own choice (direct / naive): fibers make every barrier cost a context switch
per thread, so the barrier-per-K-step v2 kernels never win there (they still run there, when forced).
"""
import functools

import numpy as np

from . import backends, source
from .array import empty
from .launch import ceil_div, get_kernel

# (BM, BN, threads) of each configuration by element size; gemm_v2.cu's V2Large / V2Medium / V2Small
CONFIGS = {"large": {4: (128, 128, 256), 8: (128, 64, 256)}, "medium": {4: (64, 64, 128), 8: (64, 64, 128)},
           "small": {4: (32, 64, 128), 8: (32, 64, 128)}}
NAMES = ("v2", "v2_large", "v2_medium", "v2_small", "splitk", "tf32", "wgmma")
_TF32 = source.int_defines("gemm_tf32.cu", "TF32_")  # gemm_tf32_large: its tile and stage count
_WGMMA_STAGES = source.int_defines("gemm_tf32.cu", "WGMMA_")["WGMMA_STAGES"]  # gemm_tf32_wgmma's
MAX_SPLITS = 16
INDEX_LIMIT = 2 ** 31


def k_step(dtype):
    """gemm_v2.cu's BK: 64 bytes of each row (16 floats, 8 doubles); split-K slices are multiples of it."""
    return 64 // np.dtype(dtype).itemsize


@functools.lru_cache(maxsize=8)
def _sms(backend_id):
    return int(backends.current().device_info()["multiprocessors"])


def multiprocessors():
    """The active device's SM count (the sim: CPU cores), asked once per backend."""
    return _sms(id(backends.current()))


def tile(config, dtype):
    """(BM, BN, threads) of a configuration for `dtype`."""
    return CONFIGS[config][np.dtype(dtype).itemsize]


def blocks(config, m, n, batch=1, dtype=np.float32):
    bm, bn, _ = tile(config, dtype)
    return ceil_div(m, bm) * ceil_div(n, bn) * batch


def choose(m, n, k, batch=1, sms=132, dtype=np.float32):
    """(kernel, config, splits) for an (m x k) @ (k x n) product on a device with `sms` SMs: the table in
    this module's docstring. kernel is 'v2' or 'splitk' (blas3 handles naive and regblock)."""
    if blocks("large", m, n, batch, dtype) >= sms:
        return "v2", "large", 1
    if blocks("medium", m, n, batch, dtype) * 2 >= sms:
        return "v2", "medium", 1
    small = blocks("small", m, n, batch, dtype)
    if batch == 1 and small * 2 < sms and k >= 32 * k_step(dtype):
        splits = min(max(1, sms // small), k // (16 * k_step(dtype)), MAX_SPLITS)
        if splits >= 2:
            return "splitk", "small", splits
    return "v2", "small", 1


def forced_splits(k, dtype):
    """Slices for kernel='splitk' where the shape alone would not split: K / (4 BK), at least 2, at most 16."""
    return max(2, min(MAX_SPLITS, k // (4 * k_step(dtype))))


def indexable(*lds):
    """True when 32-bit index math inside a 128-row tile cannot overflow for these leading dimensions."""
    return max(lds) * 128 < INDEX_LIMIT


def vector_copies(a, lda, b, ldb, m, n, k, trans_a, trans_b, strides):
    """True when both operands (DeviceArrays, views included) allow 16-byte cp.async: aligned pointers,
    and leading dimension, batch stride and contiguous extent (the stored row length) multiples of 16
    bytes; a view at an unaligned offset or with lda % 4 != 0 (floats) takes the one-element copies."""
    w = 16 // a.dtype.itemsize
    extent_a, extent_b = (m if trans_a else k), (k if trans_b else n)
    return (a.ptr % 16 == 0 and b.ptr % 16 == 0 and lda % w == 0 and ldb % w == 0
            and strides[0] % w == 0 and strides[1] % w == 0 and extent_a % w == 0 and extent_b % w == 0)


def _kernel(prefix, config, trans_a, trans_b, vec, dtype):
    """<prefix>_<config>_<ta><tb>_<copy> of the family (.cu file) named `prefix`: gemm_v2 or gemm_tf32."""
    t = ("t" if trans_a else "n") + ("t" if trans_b else "n")
    return get_kernel(prefix, f"{prefix}_{config}_{t}_{'vec' if vec else 'elem'}", dtype)


def tf32_tile():
    """(BM, BN, threads, dynamic shared bytes) of gemm_tf32_large: its STAGES tiles of A and B, BK deep."""
    bm, bn, stages = _TF32["TF32_BM"], _TF32["TF32_BN"], _TF32["TF32_STAGES"]
    return bm, bn, 256, stages * (bm + bn) * k_step(np.float32) * 4


def wgmma_tile(trans_b):
    """(BM, BN, threads, dynamic shared bytes) of gemm_tf32_wgmma: a 128 x 256 tile of D, which is C^T for
    nn (B not transposed), its stages of A and B, BK deep, and 1 KB to align them to 1024 bytes."""
    bm, bn = (128, 256) if trans_b else (256, 128)
    return bm, bn, 256, _WGMMA_STAGES * (bm + bn) * k_step(np.float32) * 4 + 1024


def launch_tiles(prefix, config, args, m, n, batch, trans, vec, dtype, stream):
    """One v2 kernel over the grid of `config` tiles; args in gemm_v2.cu's signature order."""
    kernel = _kernel(prefix, config, *trans, vec, dtype)
    if prefix == "gemm_tf32":
        bm, bn, threads, shared = wgmma_tile(trans[1]) if config == "wgmma" else tf32_tile()
        kernel.allow_shared(shared)  # above the default 48 KB: an opt-in, once per kernel
    else:
        (bm, bn, threads), shared = tile(config, dtype), 0
    kernel((ceil_div(n, bn), ceil_div(m, bm), batch), threads, *args, shared=shared, stream=stream)


def launch_splitk(args, m, n, k, trans, vec, dtype, config, splits, stream):
    """C = alpha op(A) op(B) + beta C as `splits` K slices: the slices' products go to a workspace
    W (splits, m, n) (one batched v2 launch for the full slices, one for the last), then
    gemm_splitk_reduce sums them in slice order and applies alpha and beta."""
    _, _, _, alpha, pa, lda, pb, ldb, beta, pc, ldc = args[:11]
    step = k_step(dtype)
    kslice = ceil_div(ceil_div(k, splits), step) * step
    splits = ceil_div(k, kslice)
    item = np.dtype(dtype).itemsize
    off_a = kslice * (lda if trans[0] else 1)  # elements from one slice's A to the next
    off_b = kslice * (1 if trans[1] else ldb)
    work = empty((splits, m, n), dtype)
    if splits > 1:
        full = (m, n, kslice, 1.0, pa, lda, pb, ldb, 0.0, work, n, off_a, off_b, m * n)
        launch_tiles("gemm_v2", config, full, m, n, splits - 1, trans, vec, dtype, stream)
    s = splits - 1
    last = (m, n, k - s * kslice, 1.0, _addr(pa) + s * off_a * item, lda, _addr(pb) + s * off_b * item, ldb, 0.0,
            work.ptr + s * m * n * item, n, 0, 0, 0)
    launch_tiles("gemm_v2", config, last, m, n, 1, trans, vec, dtype, stream)
    reduce = get_kernel("gemm_v2", "gemm_splitk_reduce", dtype)
    reduce(min(ceil_div(m * n, 256), 4096), 256, m, n, splits, alpha, work, beta, pc, ldc, stream=stream)


def _addr(p):
    return p if isinstance(p, int) else p.ptr
