"""The GEMM planner: one table from (input dtype, output dtype, target, shape, alignment) to a kernel and its
configuration. blas3 describes a checked product once (operands, M, N, K, batch, transposes, leading
dimensions, batch strides), `plan` returns one `Plan`, and blas3 launches what it says.

    kernel=      kernels (.cu family)                     when `auto` picks it (M x N x K, batch B)
    -----------  ---------------------------------------  -------------------------------------------------
    naive        gemm.cu gemm_naive                       cuda, FP32/FP64: M*N*K <= 32^3 (launch cost
                                                          dominates); sim, every dtype: by the CPU cost model
    direct       gemm.cu gemm_direct                      sim, every dtype: by the CPU cost model below
    tiled, wmma  gemm.cu gemm_tiled, gemm_wmma (TF32)     never (the ladder's steps; wmma: float32, sm_80+)
    regblock     gemm.cu gemm_regblock                    cuda, FP32/FP64: a leading dimension * 128 >= 2^31
    v2_large     gemm_v2.cu gemm_v2_large_<ta><tb>_<copy> cuda, FP32/FP64: 128x128 blocks (FP64: 128x64) * B
                                                          >= SMs
    v2_medium    gemm_v2_medium_... (64x64)               else 64x64 blocks * B >= SMs / 2
    v2_small     gemm_v2_small_... (32x64)                else, unless split-K applies
    splitk       gemm_v2_small_... per K slice, then      B == 1, 32x64 blocks < SMs / 2 and K >= 256 BK
                 gemm_splitk_reduce                       (4096 floats): S = min(SMs / blocks, K / 16 BK, 16)
    v2           the v2 configuration the shape gets      never (a forcing name: v2 without split-K)
    tf32         gemm_tf32.cu gemm_tf32_large_... (TF32)  never: opt-in, float32, sm_80+
    wgmma        gemm_tf32.cu gemm_tf32_wgmma_... (TF32)  never for float32: opt-in, sm_90a builds, not tn
    mma          gemm_half.cu gemm_half_mma_... (16-bit)  cuda, float16/bfloat16 inputs, float or their own C:
                                                          builds other than sm_90a (sm_80+; direct is below it)
    wgmma        gemm_half.cu gemm_half_wgmma_...         cuda, 16-bit inputs, sm_90a builds: always (every
                                                          orientation; an H200, 2026-11-27: 1.3-1.9x mma's speed
                                                          at 1024^3 to 4096^3 and nn's shapes, never slower)
    (16-bit split-K: mma and wgmma take K in slices, float partials, gemm_half_splitk_reduce, when B == 1, their
    tiles < SMs / 2 and K >= 8192: S = min(SMs / tiles, K / 1024, 64); half_splits, untuned until a GPU is lent)

<copy> is `vec` (16-byte cp.async) when both operands' pointers are 16-byte aligned and their leading
dimensions, batch strides and contiguous extents are multiples of 16 bytes, else `elem`. On the sim
backend every product takes the barrier-free kernels (direct / naive, by the cost model): fibers make every
barrier cost a context switch per thread, so the v2 kernels never win there (they run when forced), and the
warp-collective emulation of the 16-bit tensor cores costs ~100x FP32's time. gemm.cu's kernels read 16-bit
inputs as float and accumulate in float, as the tensor-core kernels do: the same result within the bound of
float additions (summed in another order).
`kernel=` (or $GPUBLAS_GEMM_KERNEL) forces a row; a forced kernel the operands, the device or the build
cannot take raises ValueError saying why, before any launch.
"""
import functools
import os
from typing import NamedTuple

import numpy as np

from ..runtime import backends, source
from ..runtime.dtypes import HALVES
from ..runtime.launch import ceil_div, simulated

ENV_KERNEL = "GPUBLAS_GEMM_KERNEL"
LADDER = ("naive", "tiled", "regblock", "direct", "wmma")
V2_NAMES = ("v2", "v2_large", "v2_medium", "v2_small", "splitk")
KERNELS = LADDER + V2_NAMES + ("tf32", "wgmma", "mma")
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
F32 = (np.dtype(np.float32),)
TF32_KERNELS = ("wmma", "tf32", "wgmma")
HALF_KERNELS = ("mma", "direct", "naive") + TF32_KERNELS  # past this check 16-bit inputs reach 'wgmma' only

# (BM, BN, threads) of each v2 configuration by element size; gemm_v2.cu's V2Large / V2Medium / V2Small
CONFIGS = {"large": {4: (128, 128, 256), 8: (128, 64, 256)}, "medium": {4: (64, 64, 128), 8: (64, 64, 128)},
           "small": {4: (32, 64, 128), 8: (32, 64, 128)}}
_TF32 = source.int_defines("gemm_tf32.cu", "TF32_")  # gemm_tf32_large: its tile and stage count
_WGMMA_STAGES = source.int_defines("gemm_tf32.cu", "WGMMA_")["WGMMA_STAGES"]  # gemm_tf32_wgmma's
_HALF = source.int_defines("gemm_half.cu", "HALF_")  # gemm_half_mma's tile and stages; gemm_half_wgmma's
_DIRECT = source.int_defines("gemm.cu", "DIRECT_")  # gemm_direct's tile on a GPU and on the simulator
MAX_SPLITS = 16
SPLITK_MIN_STEPS = 256  # split-K from K >= 256 BK (4096 floats, 2048 doubles): choose_v2 says why
# split-K on the 16-bit tensor cores (half_splits): from K >= 256 steps of 32, slices of at least 32 steps (1,024
# of K: the cp.async stages' fill amortized), at most 64 of them. First guesses, to be tuned on a lent GPU.
HALF_SPLITK_MIN_STEPS, HALF_SLICE_STEPS, HALF_MAX_SPLITS = 256, 32, 64
INDEX_LIMIT = 2 ** 31
MAX_CACHED = 4096  # plans kept (a training loop needs a few dozen; the cache empties when full)


class Plan(NamedTuple):
    """What blas3 launches: kernel `kernel` of cuda_src/<family>.cu built with `real` = dtype (and `defines`),
    blocks of `block` threads each computing a tile[0] x tile[1] tile of C, `shared` bytes of dynamic shared
    memory; `flags`: the kernel takes trans_a/trans_b as arguments (gemm.cu's signature) instead of in its
    name (gemm_v2.cu's); `splits` > 1: split-K in that many K slices of `kslice` (gemm_splitk_reduce sums)."""
    name: str
    family: str
    kernel: str
    dtype: np.dtype
    tile: tuple
    block: tuple
    shared: int = 0
    flags: bool = False
    splits: int = 1
    kslice: int = 0
    defines: tuple = ()


class Problem(NamedTuple):
    """A checked product as blas3 passes it: C (m x n) = op(A) (m x k) op(B) (k x n), `batch` of them."""
    m: int
    n: int
    k: int
    batch: int
    trans_a: bool
    trans_b: bool
    lds: tuple       # (lda, ldb, ldc)
    strides: tuple   # batch strides of A, B, C in elements
    dtype: np.dtype  # the operands'
    vec: bool        # 16-byte copies possible (vector_copies)
    out_dtype: np.dtype = None  # C's: dtype, or float32 for 16-bit operands (None: dtype)


# -- the device --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _sms(backend_id):
    return int(backends.current().device_info()["multiprocessors"])


def multiprocessors():
    """The active device's SM count (the sim: CPU cores), asked once per backend."""
    return _sms(id(backends.current()))


def target():
    """What the active backend builds kernels for: 'sim', or the cuda backend's nvcc target ('sm_90a',
    'sm_80', 'compute_80' for a PTX build) with its compute capability."""
    b = backends.current()
    return ("sim", 0) if b.name == "sim" else (b.target, b.cc)


# -- the automatic choice ----------------------------------------------------------------------------
def k_step(dtype):
    """gemm_v2.cu's BK: 64 bytes of each row (16 floats, 8 doubles); split-K slices are multiples of it."""
    return 64 // np.dtype(dtype).itemsize


def tile(config, dtype):
    """(BM, BN, threads) of a v2 configuration for `dtype`."""
    return CONFIGS[config][np.dtype(dtype).itemsize]


def blocks(config, m, n, batch=1, dtype=np.float32):
    bm, bn, _ = tile(config, dtype)
    return ceil_div(m, bm) * ceil_div(n, bn) * batch


def choose_v2(m, n, k, batch=1, sms=132, dtype=np.float32):
    """(kernel, config, splits) of GEMM v2 for an (m x k) @ (k x n) product on `sms` SMs: kernel 'v2' or
    'splitk', the rows v2_* and splitk of the table above. Split-K costs two more launches and a workspace,
    tens of microseconds: it pays for a long K only (an H200, 2026-11-27: 128x128x65536 7.5x faster with
    it, 256x512x784 3x slower)."""
    if blocks("large", m, n, batch, dtype) >= sms:
        return "v2", "large", 1
    if blocks("medium", m, n, batch, dtype) * 2 >= sms:
        return "v2", "medium", 1
    small = blocks("small", m, n, batch, dtype)
    if batch == 1 and small * 2 < sms and k >= SPLITK_MIN_STEPS * k_step(dtype):
        splits = min(max(1, sms // small), k // (16 * k_step(dtype)), MAX_SPLITS)
        if splits >= 2:
            return "splitk", "small", splits
    return "v2", "small", 1


def choose_kernel(m, n, k, sim=False, batch=1, sms=132, lds=(0,), dtype=np.float32, trans_a=False, trans_b=False,
                  hopper=False):
    """The kernel `auto` takes for an (m x k) @ (k x n) product (a stack of `batch`) on a device with `sms` SMs
    (sim=True: the simulator; hopper=True: an sm_90a build, which has warpgroup MMA): the table above."""
    if sim:
        return sim_kernel(m, n, k, trans_a, trans_b, dtype)
    if np.dtype(dtype) in HALVES:
        return "wgmma" if hopper else "mma"
    if m * n * k <= 32 ** 3:
        return "naive"
    if not indexable(*lds):
        return "regblock"
    kernel, config, _ = choose_v2(m, n, k, batch, sms, dtype)
    return "splitk" if kernel == "splitk" else f"v2_{config}"


# -- the simulator's choice: a CPU cost model -------------------------------------------------------
# On sim, gemm_direct (gemm_sim.cuh) pays per K step of each micro-tile (6 rows of 64 bytes: 16 floats, 8 doubles;
# a C of one column costs 16 (8) columns' work), per simulated thread (a 48 x 64-float or 48 x 32-double tile: its
# set-up, epilogue, the block around it), and for op(B)'s elements it packs (per thread: every column when B is
# transposed, the last 64 bytes' worth when C's width leaves a part); gemm_naive pays for the real multiply-adds
# only, but each is one link of a single add chain (no independent accumulators), more when an operand is read
# across K with a stride, plus a call per output. The barrier kernels lost every shape measured (2026-11-23:
# regblock by 1.0-4x, its 128x128 tiles pad a 32-row product 4x and a barrier is a fiber switch per thread; tiled
# and v2 by more). CPU ns with one OpenMP thread on a 2-core AMD EPYC (Zen 3, AVX2, shared: +-30%), float and
# double: the micro-kernel's step from 256^3 (float 0.46 ms: 2.5 ns, double 1.2 ms: 3.4 ns), naive's multiply-add
# from 64^3 and columns (1.0-1.3 ns); direct wins all but a C of a few elements with a long K (with the call's
# 17 us of CPU: 1x1x4096 naive 23 us, direct 51; 4x1x10000 59 against 103; 16x1x2048, 2x2x512 and 1x16x1024
# within 10%; 2048x1x1024 direct 1.9 ms, naive 2.6). Re-measure when the simulator's launch cost or
# gemm_direct's tiles change.
SIM_NAIVE_NS = {2: (1.0, 0.35), 4: (1.0, 0.35), 8: (1.0, 0.6)}  # itemsize -> (per multiply-add, extra per strided
                                                                # operand); 16-bit read as float: FP32's
SIM_NAIVE_OUTPUT_NS = 8.0                         # per C element (one simulated thread)
SIM_DIRECT_STEP_NS = 3.0                          # per K step of a gemm_direct micro-tile, every dtype
SIM_DIRECT_TILE_NS = 100.0                        # per tile (one simulated thread, a block)
SIM_DIRECT_PACK_NS = 0.5                          # per element of op(B) packed


def direct_tile(dtype, sim=None):
    """(rows, columns) of C that one gemm_direct thread computes for `dtype` inputs on the simulator (sim=True), a
    GPU (False) or the active backend (None): 4x8 on a GPU; 16 rows of one 64-byte vector of the accumulator type on
    the simulator (16x16 for float and 16-bit inputs, 16x8 for double: gemm.cu says why)."""
    if not (simulated() if sim is None else sim):
        return _DIRECT["DIRECT_GPU_TM"], _DIRECT["DIRECT_GPU_TN"]
    acc_size = 8 if np.dtype(dtype).itemsize == 8 else 4
    return _DIRECT["DIRECT_SIM_TM"], _DIRECT["DIRECT_SIM_ROW_BYTES"] * _DIRECT["DIRECT_SIM_TN_VECTORS"] // acc_size


def sim_kernel(m, n, k, trans_a=False, trans_b=False, dtype=np.float32):
    """'direct' or 'naive' for an (m x k) @ (k x n) product on the simulator, whichever the cost
    model above says is cheaper on the CPU."""
    base, strided = SIM_NAIVE_NS[np.dtype(dtype).itemsize]
    # op(A) is strided along K when transposed, op(B) when not, unless it is one row (column): a plain vector
    per_fma = base + strided * (bool(trans_a and m > 1) + bool(not trans_b and n > 1))
    naive = m * n * k * per_fma + m * n * SIM_NAIVE_OUTPUT_NS
    tm, tn = direct_tile(dtype, sim=True)
    mr, nr = _DIRECT["DIRECT_SIM_MR"], tn // _DIRECT["DIRECT_SIM_TN_VECTORS"]
    row_tiles = ceil_div(m, tm)
    packed = ceil_div(n, nr) * nr if trans_b else (nr if n % nr else 0)  # op(B)'s columns packed, per row of tiles
    direct = (ceil_div(m, mr) * ceil_div(n, nr) * k * SIM_DIRECT_STEP_NS + row_tiles * ceil_div(n, tn) *
              SIM_DIRECT_TILE_NS + row_tiles * packed * k * SIM_DIRECT_PACK_NS)
    return "direct" if direct <= naive else "naive"


# -- what a kernel can take --------------------------------------------------------------------------
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


def _refuse(name, p):
    """Why kernel `name` cannot run problem p on this backend ('' when it can)."""
    where, cc = target()
    half = p.dtype in HALVES
    if half and name not in HALF_KERNELS:
        return (f"kernel '{name}' takes float32 or float64; {p.dtype} products run on 'mma', 'wgmma', 'direct' or "
                f"'naive' (or 'auto')")
    if name == "mma" and not half:
        return f"kernel 'mma' multiplies float16 or bfloat16 on the tensor cores, not {p.dtype} (float32: 'tf32')"
    if name == "mma" and where != "sim" and cc < 80:
        return (f"kernel 'mma' needs 16-bit tensor cores with mma.m16n8k16 (compute capability 8.0 or newer); this "
                f"device has {cc // 10}.{cc % 10}")
    if name not in LADDER and not indexable(*p.lds):
        return (f"kernel '{name}' indexes tiles with 32-bit math: leading dimensions {p.lds} must stay below "
                f"2^31 / 128; use 'regblock' or 'auto'")
    if name in TF32_KERNELS and p.dtype not in F32 and not (name == "wgmma" and half):
        return f"kernel '{name}' computes in TF32 and takes float32 operands, not {p.dtype}"
    if name in TF32_KERNELS and not half and where != "sim" and cc < 80:
        return (f"kernel '{name}' needs TF32 tensor cores (compute capability 8.0 or newer); this device has "
                f"{cc // 10}.{cc % 10}")
    if name == "wgmma" and where != "sim" and where != "sm_90a":
        return (f"kernel 'wgmma' needs Hopper's warpgroup MMA, built for sm_90a (a 9.0 device, nvcc 12.0 or newer, "
                f"no other GPUBLAS_CUDA_ARCH); this backend builds for {where} (compute capability "
                f"{cc // 10}.{cc % 10}), where the kernel's body is empty: use '{'mma' if half else 'tf32'}'")
    if name == "wgmma" and p.trans_a and not p.trans_b and not half:  # 16-bit wgmma reads B either way
        return ("kernel 'wgmma' needs op(A) or op(B) stored with K contiguous for float32, which trans_a=True, "
                "trans_b=False lacks (TF32 wgmma reads B K-major only): use 'tf32'")
    return ""


# -- the plan ---------------------------------------------------------------------------------------
def kernel_name(kernel, p):
    """The row of the table a product takes: `kernel` (else $GPUBLAS_GEMM_KERNEL, else 'auto'), checked."""
    name = (kernel or os.environ.get(ENV_KERNEL) or "auto").strip().lower()
    if name == "auto":
        sim = simulated()
        name = choose_kernel(p.m, p.n, p.k, sim, p.batch, 0 if sim else multiprocessors(), p.lds, p.dtype,
                             p.trans_a, p.trans_b, hopper=target()[0] == "sm_90a")
    elif name not in KERNELS:
        raise ValueError(f"gemm: unknown kernel '{name}'; choose one of {', '.join(KERNELS)} or 'auto' "
                         f"(argument kernel= or ${ENV_KERNEL})")
    why = _refuse(name, p)
    if why:
        raise ValueError(f"gemm: {why}")
    return name


_PLANS = {}  # (kernel, $GPUBLAS_GEMM_KERNEL, target, SMs, Problem) -> Plan


def env_kernel():
    """$GPUBLAS_GEMM_KERNEL as it is now (read at each product: a test or a user may set it between calls)."""
    return os.environ.get(ENV_KERNEL)


def plan(kernel, p):
    """The Plan for problem p (a Problem) with kernel= `kernel` (None: $GPUBLAS_GEMM_KERNEL or auto): made once
    per kernel argument, environment value, target (and SM count on a GPU) and Problem, which holds every other
    input of the table (shape, transposes, leading dimensions, batch strides, dtypes, alignment), then looked
    up; a refusal is raised again each time, never kept."""
    where = target()
    key = (kernel, env_kernel(), where, where[0] != "sim" and multiprocessors(), p)
    found = _PLANS.get(key)
    if found is None:
        if len(_PLANS) >= MAX_CACHED:
            _PLANS.clear()
        found = _PLANS[key] = _plan(kernel, p)
    return found


def _plan(kernel, p):
    name = kernel_name(kernel, p)
    dtype = np.dtype(p.dtype)
    if name in LADDER:
        return _ladder(name, p, dtype)
    t = ("t" if p.trans_a else "n") + ("t" if p.trans_b else "n")
    copy = "vec" if p.vec else "elem"
    if name == "tf32":
        bm, bn, stages = _TF32["TF32_BM"], _TF32["TF32_BN"], _TF32["TF32_STAGES"]
        return Plan(name, "gemm_tf32", f"gemm_tf32_large_{t}_{copy}", dtype, (bm, bn), (256,),
                    stages * (bm + bn) * k_step(dtype) * 4)
    if name == "mma" or (name == "wgmma" and dtype in HALVES):
        return _half(name, p, dtype, t, copy, _out_real(p))
    if name == "wgmma":  # a 128 x 256 tile of D, which is C^T for nn; its stages, aligned to 1024 bytes
        bm, bn = (128, 256) if p.trans_b else (256, 128)
        return Plan(name, "gemm_tf32", f"gemm_tf32_wgmma_{t}_{copy}", dtype, (bm, bn), (256,),
                    _WGMMA_STAGES * (bm + bn) * k_step(dtype) * 4 + 1024)
    splits = 1
    if name.startswith("v2_"):
        config = name[3:]
    else:  # 'v2' or 'splitk': the configuration (and the K slices) from the shape
        sms = 8 if simulated() else multiprocessors()
        auto, config, splits = choose_v2(p.m, p.n, p.k, p.batch, sms, dtype)
        if name == "v2":
            splits = 1
        elif auto != "splitk":
            splits = max(2, min(MAX_SPLITS, p.k // (4 * k_step(dtype))))  # forced: K / (4 BK), 2 to 16
    bm, bn, threads = tile(config, dtype)
    kslice = ceil_div(ceil_div(p.k, splits), k_step(dtype)) * k_step(dtype) if splits > 1 and p.k > 0 else 0
    return Plan(name, "gemm_v2", f"gemm_v2_{config}_{t}_{copy}", dtype, (bm, bn), (threads,),
                splits=ceil_div(p.k, kslice) if kslice else 1, kslice=kslice)


def _out_real(p):
    """The defines that build a kernel with a float C for 16-bit inputs (out_real; else C is `real`)."""
    return (("out_real", "float"),) if p.out_dtype == np.float32 and p.dtype in HALVES else ()


def _ladder(name, p, dtype):
    """gemm.cu's kernels: one signature, transposes as arguments; 16-bit inputs on direct and naive."""
    if name == "regblock":
        edge = 128 if dtype == np.float32 else 64  # gemm_regblock's BM/BN for `real`
        return Plan(name, "gemm", "gemm_regblock", dtype, (edge, edge), (256,), flags=True)
    if name == "direct":  # direct_tile per thread; a block of up to 16x16 threads (the simulator's form: one)
        tm, tn = direct_tile(dtype)
        edge = 16 if (tm, tn) == direct_tile(dtype, sim=False) else 1
        bx, by = min(edge, ceil_div(p.n, tn)), min(edge, ceil_div(p.m, tm))
        return Plan(name, "gemm", "gemm_direct", dtype, (by * tm, bx * tn), (bx, by), flags=True,
                    defines=_out_real(p))
    if name == "wmma":
        return Plan(name, "gemm", "gemm_wmma", dtype, (64, 64), (128,), flags=True)
    return Plan(name, "gemm", f"gemm_{name}", dtype, (16, 16), (16, 16), flags=True,  # naive, tiled
                defines=_out_real(p))


def _half(name, p, dtype, t, copy, defines):
    """gemm_half.cu's kernels: 16-bit A and B (`real`), C of `out_real` (`defines`: float32 when asked), K steps
    of 32; split-K (half_splits) when a long K meets too few tiles to fill the device."""
    stage = k_step(dtype) * dtype.itemsize  # bytes of one row of a stage (64)
    if name == "mma":
        bm, bn = _HALF["HALF_BM"], _HALF["HALF_BN"]
        plan = Plan(name, "gemm_half", f"gemm_half_mma_{t}_{copy}", dtype, (bm, bn), (256,),
                    _HALF["HALF_STAGES"] * (bm + bn) * stage, defines=defines)
    else:
        bm, bn = (128, 256) if p.trans_a or p.trans_b else (256, 128)  # a 128 x 256 tile of D, C^T for nn
        plan = Plan(name, "gemm_half", f"gemm_half_wgmma_{t}_{copy}", dtype, (bm, bn), (256,),
                    _HALF["HALF_WGMMA_STAGES"] * (bm + bn) * stage + 1024, defines=defines)
    splits = half_splits(p.m, p.n, p.k, p.batch, plan.tile, 8 if simulated() else multiprocessors())
    if splits < 2:
        return plan
    kslice = ceil_div(ceil_div(p.k, splits), k_step(dtype)) * k_step(dtype)
    return plan._replace(splits=ceil_div(p.k, kslice), kslice=kslice)


def half_splits(m, n, k, batch, tile, sms):
    """K slices for a 16-bit tensor-core product (1: none): a product whose tiles fill under half of `sms` SMs
    and whose K is long (128x128x65536 is one 128 x 256 tile: 1 SM of 132 busy) runs as slices of at least
    HALF_SLICE_STEPS steps of K, enough to fill the SMs, at most HALF_MAX_SPLITS; their float partial products
    are summed by gemm_half_splitk_reduce (blas3._launch). The simulator plans as for 8 SMs (as choose_v2's
    callers do), so its tests run the split path."""
    tiles = ceil_div(m, tile[0]) * ceil_div(n, tile[1]) * batch
    if batch != 1 or tiles * 2 >= sms or k < HALF_SPLITK_MIN_STEPS * 32:
        return 1
    return max(1, min(sms // tiles, k // (HALF_SLICE_STEPS * 32), HALF_MAX_SPLITS))
