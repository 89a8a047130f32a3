"""Level-3 BLAS: gemm, gemm_batched, matmul and the @ operator (kernels in cuda_src/gemm.cu).

    c = gpublas.gemm(a, b)                                   # a @ b, a new array
    gpublas.gemm(a, b, c, alpha=2, beta=1, trans_b=True)     # c = 2 a @ b.T + c, in place
    c = gpublas.gemm_batched(a3, b3)                         # (batch, M, K) @ (batch, K, N)
    c = a @ b                                                # DeviceArray.__matmul__ -> ops.matmul

gemm.cu holds a ladder of kernels with one signature (naive, tiled, regblock, direct, wmma); gemm_v2.cu
the v2 kernels (cp.async pipelines, warp tiles; gpublas/gemm_v2.py launches them). `choose_kernel` picks one by
shape, transposes, alignment and SM count (the table in gemm_v2.py's docstring) unless the caller forces
one with kernel="..." or the environment variable GPUBLAS_GEMM_KERNEL: a ladder step, 'v2' (v2 with the
configuration chosen by shape), 'v2_large' / 'v2_medium' / 'v2_small' (128x128, 64x64, 32x64 tiles),
'splitk', 'tf32' (mma.sync) or 'wgmma' (Hopper's warpgroup MMA). The TF32 kernels ('wmma', 'tf32',
'wgmma') are opt-in only: float32, and on the cuda backend compute capability 8.0 or newer ('wgmma': 9.0,
and not trans_a=True with trans_b=False).

BLAS semantics: beta == 0 never reads c; alpha == 0 (or K == 0) reads neither a nor b and only scales
c; M == 0 or N == 0 returns an empty result. Transposes are strides inside the kernels, never copies.
Every check runs before any launch and raises ValueError naming the shapes.

Views go to the kernels as they are wherever cuBLAS could take them: a, b and c with unit stride along
one axis and the leading dimension (>= the other extent) and, for stacks, any batch stride, are passed
as pointer, lda/ldb/ldc and stride_a/b/c (a[:, 2:7], a[::2], w.T, out[:, 1:5] written in place; a
transposed c is computed as c.T = op(b).T op(a).T). Other layouts go through contiguous temporaries.
"""
import os

import numpy as np

from . import backends, gemm_v2
from .array import empty
from .blas1 import dot, scale_output
from .blas2 import gemv
from .checks import blas_matrix, check_operands, leading_dimension, swap_last, write_back
from .launch import ceil_div, get_kernel, simulated
from .layout import may_overlap_itself, may_share_memory

LADDER = ("naive", "tiled", "regblock", "direct", "wmma")
DIRECT_TILE = (4, 8)  # gemm.cu's DIRECT_TM x DIRECT_TN
KERNELS = LADDER + gemm_v2.NAMES
TF32 = ("wmma", "tf32", "wgmma")
ENV_KERNEL = "GPUBLAS_GEMM_KERNEL"
MAX_GRID_Z = 65535  # batches per launch
ROWS_PER_LAUNCH = 65535 * 16  # grid.y <= 65,535 with the smallest row tile (16 rows: naive, tiled)


# -- choosing a kernel ----------------------------------------------------------------------------
def choose_kernel(m, n, k, sim=False, batch=1, sms=132, lds=(0,), dtype=np.float32, trans_a=False, trans_b=False):
    """The kernel the dispatcher uses for an (m x k) @ (k x n) product (a stack of `batch`) on a device with
    `sms` SMs: 'naive' for tiny products (launch cost dominates); else a v2 configuration or 'splitk' as
    gemm_v2.choose says, or 'regblock' where a leading dimension in `lds` is too large for v2's 32-bit
    tile index math. On the simulator (sim=True) barriers cost a fiber switch per thread, so the
    barrier-free kernels win there: sim_kernel() picks 'direct' or 'naive' by their CPU cost."""
    if sim:
        return sim_kernel(m, n, k, trans_a, trans_b, dtype)
    if m * n * k <= 32 ** 3:
        return "naive"
    if not gemm_v2.indexable(*lds):
        return "regblock"
    kernel, config, _ = gemm_v2.choose(m, n, k, batch, sms, dtype)
    return "splitk" if kernel == "splitk" else f"v2_{config}"


# -- the simulator's choice: a CPU cost model -------------------------------------------------------
# On sim, gemm_direct pays for every multiply-add of its 4x8 tiles (full-size at C's edges: a C of one
# column costs 8x its work) plus a simulated thread (a call and 32 stores) per tile; gemm_naive pays
# for the real multiply-adds only, but each is one link of a single add chain (no independent
# accumulators), more when an operand is read across K with a stride, plus a call per output.
# CPU ns measured with one OpenMP thread on a 2-core AMD EPYC (2026-11-23, shared) over nn's digits
# and LSTM shapes, squares up to 512^3 and thin products, both dtypes. The barrier kernels lost every
# one of those shapes: regblock by 1.0-4x (its 128x128 tiles pad a 32-row product 4x, a barrier is a
# fiber switch per thread), tiled and v2 by more; direct beat naive except where C has one column
# (e.g. 2048x1x1024: naive 4.1 ms, direct 6.6). Re-measure when the simulator's barrier cost changes.
SIM_NAIVE_NS = {4: (1.2, 0.65), 8: (1.1, 1.2)}  # itemsize -> (per multiply-add, extra per strided operand)
SIM_NAIVE_OUTPUT_NS = 20.0                        # per C element (one simulated thread)
SIM_DIRECT_NS = 0.4                               # per multiply-add of gemm_direct's tiles, either dtype
SIM_DIRECT_TILE_NS = 110.0                        # per 4x8 tile (one simulated thread)


def sim_kernel(m, n, k, trans_a=False, trans_b=False, dtype=np.float32):
    """'direct' or 'naive' for an (m x k) @ (k x n) product on the simulator, whichever the cost
    model above says is cheaper on the CPU."""
    base, strided = SIM_NAIVE_NS[np.dtype(dtype).itemsize]
    per_fma = base + strided * (bool(trans_a) + (not trans_b))  # op(A) strided along K when transposed, B when not
    naive = m * n * k * per_fma + m * n * SIM_NAIVE_OUTPUT_NS
    tm, tn = DIRECT_TILE
    direct = ceil_div(m, tm) * ceil_div(n, tn) * (tm * tn * k * SIM_DIRECT_NS + SIM_DIRECT_TILE_NS)
    return "direct" if direct <= naive else "naive"


def _kernel_name(kernel, m, n, k, batch, lds, dtype, trans_a=False, trans_b=False):
    kernel = kernel or os.environ.get(ENV_KERNEL) or "auto"
    kernel = kernel.strip().lower()
    if kernel == "auto":
        sim = simulated()
        return choose_kernel(m, n, k, sim, batch, 0 if sim else gemm_v2.multiprocessors(), lds, dtype, trans_a,
                             trans_b)
    if kernel not in KERNELS:
        raise ValueError(f"gemm: unknown kernel '{kernel}'; choose one of {', '.join(KERNELS)} or 'auto' "
                         f"(argument kernel= or ${ENV_KERNEL})")
    if kernel not in LADDER and not gemm_v2.indexable(*lds):
        raise ValueError(f"gemm: kernel '{kernel}' indexes tiles with 32-bit math: leading dimensions {lds} "
                         f"must stay below 2^31 / 128; use 'regblock' or 'auto'")
    return kernel


# -- launchers: one per kernel, all with the signature of gemm.cu -----------------------------------
def _launch_naive(args, m, n, batch, dtype, stream):
    k = get_kernel("gemm", "gemm_naive", dtype)
    k((ceil_div(n, 16), ceil_div(m, 16), batch), (16, 16), *args, stream=stream)


def _launch_tiled(args, m, n, batch, dtype, stream):
    k = get_kernel("gemm", "gemm_tiled", dtype)
    k((ceil_div(n, 16), ceil_div(m, 16), batch), (16, 16), *args, stream=stream)


def _launch_regblock(args, m, n, batch, dtype, stream):
    tile = 128 if dtype == np.float32 else 64  # must match gemm_regblock's BM/BN for `real`
    k = get_kernel("gemm", "gemm_regblock", dtype)
    k((ceil_div(n, tile), ceil_div(m, tile), batch), 256, *args, stream=stream)


def _launch_direct(args, m, n, batch, dtype, stream):
    tm, tn = DIRECT_TILE  # gemm_direct's 4x8 per thread; a block of up to 16x16 threads
    bx, by = min(16, ceil_div(n, tn)), min(16, ceil_div(m, tm))
    k = get_kernel("gemm", "gemm_direct", dtype)
    k((ceil_div(n, bx * tn), ceil_div(m, by * tm), batch), (bx, by), *args, stream=stream)


def _launch_wmma(args, m, n, batch, dtype, stream):
    k = get_kernel("gemm", "gemm_wmma", dtype)
    k((ceil_div(n, 64), ceil_div(m, 64), batch), 128, *args, stream=stream)


_LAUNCHERS = {"naive": _launch_naive, "tiled": _launch_tiled, "regblock": _launch_regblock, "direct": _launch_direct,
              "wmma": _launch_wmma}


def _check_tf32(name, dtype, trans_a, trans_b):
    b = backends.current()
    if b.name == "cuda" and b.cc < 80:
        raise ValueError(f"gemm: kernel '{name}' needs TF32 tensor cores (compute capability 8.0 or newer); "
                         f"this device has {b.cc // 10}.{b.cc % 10}")
    if name == "wgmma" and b.name == "cuda" and b.cc != 90:
        raise ValueError(f"gemm: kernel 'wgmma' needs Hopper's warpgroup MMA (compute capability 9.0 exactly); "
                         f"this device has {b.cc // 10}.{b.cc % 10}: use 'tf32'")
    if name == "wgmma" and trans_a and not trans_b:
        raise ValueError("gemm: kernel 'wgmma' needs op(A) or op(B) stored with K contiguous, which trans_a=True, "
                         "trans_b=False lacks (TF32 wgmma reads B K-major only): use 'tf32'")
    if dtype != np.float32:
        raise ValueError(f"gemm: kernel '{name}' computes in TF32 and takes float32 operands, not {dtype}")


# -- shape checks -----------------------------------------------------------------------------------
def _op_shape(x, trans):
    return (x.shape[-1], x.shape[-2]) if trans else (x.shape[-2], x.shape[-1])


def _describe(name, x, trans):
    return f"op({name}) = {name}{'.T' if trans else ''} of {name} {x.shape}"


def _check_inner(routine, a, b, trans_a, trans_b):
    (m, ka), (kb, n) = _op_shape(a, trans_a), _op_shape(b, trans_b)
    if ka != kb:
        raise ValueError(f"{routine}: inner dimensions differ: {_describe('a', a, trans_a)} is {m}x{ka} but "
                         f"{_describe('b', b, trans_b)} is {kb}x{n}")
    return m, n, ka


def _check_overlap(routine, c, *inputs):
    for name, x in inputs:
        if may_share_memory(x, c):
            raise ValueError(f"{routine}: c {c.shape} shares memory with {name} {x.shape}; "
                             "the output must not overlap an input")


def _output(routine, a, c, shape, beta, inputs):
    if c is None:
        if beta != 0:
            raise ValueError(f"{routine}: beta = {beta} needs an output c to scale; pass c or leave beta at 0")
        return empty(shape, a.dtype)
    if c.shape != shape:
        shapes = ", ".join(f"{n} {x.shape}" for n, x in inputs)
        raise ValueError(f"{routine}: c has shape {c.shape}, expected {shape} for {shapes}")
    _check_overlap(routine, c, *inputs)
    return c


# -- the routines -----------------------------------------------------------------------------------
def gemm(a, b, c=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, stream=None, kernel=None):
    """c = alpha * op(a) @ op(b) + beta * c with op(x) = x or x.T; returns c (new when not given).
    kernel: one of KERNELS or 'auto' (default: $GPUBLAS_GEMM_KERNEL, else auto)."""
    operands = dict(a=a, b=b) if c is None else dict(a=a, b=b, c=c)
    dtype = check_operands("gemm", **operands)
    for name, x in (("a", a), ("b", b)) + ((("c", c),) if c is not None else ()):
        if x.ndim != 2:
            raise ValueError(f"gemm: {name} must be 2-D, got shape {x.shape}; use gemm_batched for stacks")
    m, n, k = _check_inner("gemm", a, b, trans_a, trans_b)
    c = _output("gemm", a, c, (m, n), beta, [("a", a), ("b", b)])
    _run(a, b, c, m, n, k, 1, alpha, beta, trans_a, trans_b, dtype, kernel, stream)
    return c


def gemm_batched(a, b, c=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, stream=None, kernel=None):
    """gemm on stacks: c[i] = alpha * op(a[i]) @ op(b[i]) + beta * c[i] for a (batch, ., .), b (batch, ., .);
    strided batches, one launch (grid z = batch)."""
    operands = dict(a=a, b=b) if c is None else dict(a=a, b=b, c=c)
    dtype = check_operands("gemm_batched", **operands)
    for name, x in operands.items():
        if x.ndim != 3:
            raise ValueError(f"gemm_batched: {name} must be 3-D (batch, rows, cols), got shape {x.shape}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"gemm_batched: batch sizes differ: a {a.shape} has {a.shape[0]}, "
                         f"b {b.shape} has {b.shape[0]}")
    m, n, k = _check_inner("gemm_batched", a, b, trans_a, trans_b)
    batch = a.shape[0]
    c = _output("gemm_batched", a, c, (batch, m, n), beta, [("a", a), ("b", b)])
    _run(a, b, c, m, n, k, batch, alpha, beta, trans_a, trans_b, dtype, kernel, stream)
    return c


def _run(a, b, c, m, n, k, batch, alpha, beta, trans_a, trans_b, dtype, kernel, stream):
    """Dispatches a checked product: scales c alone when alpha or K is 0, else launches the chosen
    kernel in chunks (_chunks). Each operand goes as the view it is when blas_matrix can take it (a
    transposed one with its flag flipped), its batch stride whatever it is (0 for a 2-D operand or a
    stack of one, which broadcasts); c likewise when it can be written as it is, or as c.T = op(b).T
    op(a).T when its transpose can; otherwise through a contiguous temporary."""
    a, trans_a, lda = blas_matrix(a, trans_a, stream)
    b, trans_b, ldb = blas_matrix(b, trans_b, stream)
    ldc = _writable_ld(c)
    if ldc is None:
        ct = swap_last(c)
        if _writable_ld(ct) is not None:
            _run(b, a, ct, n, m, k, batch, alpha, beta, not trans_b, not trans_a, dtype, kernel, stream)
            return
        cc = c.copy(stream) if beta != 0 else empty(c.shape, c.dtype)
        _run(a, b, cc, m, n, k, batch, alpha, beta, trans_a, trans_b, dtype, kernel, stream)
        write_back(c, cc, stream)
        return
    lds, strides = (lda, ldb, ldc), (_batch_stride(a), _batch_stride(b), _batch_stride(c))
    name = _kernel_name(kernel, m, n, k, batch, lds, dtype, trans_a, trans_b)
    if name in TF32:
        _check_tf32(name, dtype, trans_a, trans_b)
    if m == 0 or n == 0 or batch == 0:
        return
    if alpha == 0 or k == 0:
        scale_output(c, beta, stream=stream)
        return
    if name not in LADDER:
        _run_v2(name, a, b, c, m, n, k, batch, lds, strides, alpha, beta, (bool(trans_a), bool(trans_b)), dtype,
                stream)
        return
    for pa, pb, pc, nz, rows in _chunks(a, b, c, batch, lds, strides, m, trans_a):
        args = (rows, n, k, alpha, pa, lda, int(bool(trans_a)), pb, ldb, int(bool(trans_b)), beta, pc, ldc, *strides)
        _LAUNCHERS[name](args, rows, n, nz, dtype, stream)


def _writable_ld(c):
    """c's leading dimension when a kernel can write it in place: a matrix layout (leading_dimension)
    whose elements, stacks included, all sit at distinct addresses (a matrix layout's rows cannot
    overlap; a stack's matrices might); else None."""
    ld = leading_dimension(c)
    if ld is None or c.ndim == 2 or c.c_contiguous:
        return ld
    return None if may_overlap_itself(c.shape, c.strides, c.itemsize) else ld


def _batch_stride(x):
    """Elements from one matrix of a stack to the next; 0 for a matrix or a stack of one (broadcast)."""
    return x.strides[0] // x.itemsize if x.ndim == 3 and x.shape[0] > 1 else 0


def _chunks(a, b, c, batch, lds, strides, m, trans_a):
    """(A, B, C pointers, batches, rows) per launch: at most MAX_GRID_Z batches (grid z) and
    ROWS_PER_LAUNCH rows of op(A) and C (grid y) each, so no launch asks more of the grid than a GPU
    allows."""
    item = a.dtype.itemsize
    row_a, row_c = item * (1 if trans_a else lds[0]), item * lds[2]  # bytes from row to row
    for z0 in range(0, batch, MAX_GRID_Z):
        sa, sb, sc = (s * z0 * item for s in strides)
        nz = min(MAX_GRID_Z, batch - z0)
        for m0 in range(0, m, ROWS_PER_LAUNCH):
            rows = min(ROWS_PER_LAUNCH, m - m0)
            yield a.ptr + sa + m0 * row_a, b.ptr + sb, c.ptr + sc + m0 * row_c, nz, rows


def _run_v2(name, a, b, c, m, n, k, batch, lds, strides, alpha, beta, trans, dtype, stream):
    """Launches a GEMM v2 kernel (gemm_v2.cu, gemm_tf32.cu): 'v2' and 'splitk' take their configuration from the
    shape."""
    lda, ldb, ldc = lds
    vec = gemm_v2.vector_copies(a, lda, b, ldb, m, n, k, *trans, strides)
    prefix = "gemm_tf32" if name in ("tf32", "wgmma") else "gemm_v2"  # the kernel family
    if name.startswith("v2_"):
        config = name[3:]
    elif prefix == "gemm_tf32":
        config = "large" if name == "tf32" else "wgmma"
    else:  # 'v2' or 'splitk': the configuration (and the K slices) from the shape
        auto, config, splits = gemm_v2.choose(m, n, k, batch, 8 if simulated() else gemm_v2.multiprocessors(), dtype)
        if name == "splitk" and auto != "splitk":
            splits = gemm_v2.forced_splits(k, dtype)
    item = a.dtype.itemsize
    for pa, pb, pc, nz, rows in _chunks(a, b, c, batch, lds, strides, m, trans[0]):
        if name == "splitk":
            for z in range(nz):  # split-K runs one product at a time
                args = (rows, n, k, alpha, pa + z * strides[0] * item, lda, pb + z * strides[1] * item, ldb,
                        beta, pc + z * strides[2] * item, ldc)
                gemm_v2.launch_splitk(args, rows, n, k, trans, vec, dtype, config, splits, stream)
            continue
        args = (rows, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc, *strides)
        gemm_v2.launch_tiles(prefix, config, args, rows, n, nz, trans, vec, dtype, stream)


def _broadcast_gemm(a, b, kernel=None):
    """a @ b for 3-D stacks where one side is 2-D (or a stack of one): the 2-D side gets batch stride 0."""
    dtype = check_operands("matmul", a=a, b=b)
    a3 = a if a.ndim == 3 else a.reshape((1,) + a.shape)
    b3 = b if b.ndim == 3 else b.reshape((1,) + b.shape)
    if a3.shape[0] != b3.shape[0] and 1 not in (a3.shape[0], b3.shape[0]):
        raise ValueError(f"matmul: batch sizes differ: a {a.shape}, b {b.shape}")
    m, n, k = _check_inner("matmul", a3, b3, False, False)
    batch = a3.shape[0] if b3.shape[0] == 1 else b3.shape[0]  # NumPy broadcasting: 1 stretches, 0 stays 0
    c = empty((batch, m, n), dtype)
    _run(a3, b3, c, m, n, k, batch, 1.0, 0.0, False, False, dtype, kernel, None)
    return c


def matmul(a, b):
    """a @ b as NumPy defines it for 1-D, 2-D and 3-D operands: 2-D @ 2-D -> gemm, with a vector ->
    gemv (1-D @ 1-D -> dot, a Python float), 3-D stacks -> batched gemm (a 2-D side broadcasts)."""
    check_operands("matmul", a=a, b=b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must have at least 1 dimension, got a {a.shape}, b {b.shape}")
    if a.ndim > 3 or b.ndim > 3:
        raise ValueError(f"matmul: at most 3 dimensions supported, got a {a.shape}, b {b.shape}")
    if a.ndim == 1 and b.ndim == 1:
        if a.shape != b.shape:
            raise ValueError(f"matmul: vectors of different lengths: a {a.shape}, b {b.shape}")
        return dot(a, b)
    if a.ndim == 2 and b.ndim == 1:
        return gemv(a, b)
    if a.ndim == 1 and b.ndim == 2:
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"matmul: a {a.shape} @ b {b.shape}: a has {a.shape[0]} elements, b {b.shape[0]} rows")
        return gemv(b, a, trans=True)
    if a.ndim == 1 or b.ndim == 1:
        raise ValueError(f"matmul: a {a.shape} @ b {b.shape}: vectors with stacks are not supported")
    if a.ndim == 2 and b.ndim == 2:
        return gemm(a, b)
    return _broadcast_gemm(a, b)
