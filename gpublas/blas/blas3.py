"""Level-3 BLAS: gemm, gemm_batched, matmul and the @ operator (kernels in cuda_src/gemm.cu).

    c = gpublas.gemm(a, b)                                   # a @ b, a new array
    gpublas.gemm(a, b, c, alpha=2, beta=1, trans_b=True)     # c = 2 a @ b.T + c, in place
    c = gpublas.gemm_batched(a3, b3)                         # (batch, M, K) @ (batch, K, N)
    c = a @ b                                                # DeviceArray.__matmul__ -> ops.matmul

The kernels: gemm.cu's ladder with one signature (naive, tiled, regblock, direct, wmma), gemm_v2.cu's v2
kernels (cp.async pipelines, warp tiles, split-K) and gemm_tf32.cu's TF32 tensor-core kernels. Which one
runs, in which configuration, is gpublas/blas/gemm_plan.py's table (its docstring), asked once per product:
by dtype, target, shape and alignment, unless the caller forces a row with kernel="..." or the
environment variable GPUBLAS_GEMM_KERNEL: a ladder step, 'v2' (v2 with the configuration chosen by
shape), 'v2_large' / 'v2_medium' / 'v2_small' (128x128, 64x64, 32x64 tiles), 'splitk', 'tf32'
(mma.sync) or 'wgmma' (Hopper's warpgroup MMA). The TF32 kernels ('wmma', 'tf32', 'wgmma') are opt-in
only: float32, and on the cuda backend compute capability 8.0 or newer ('wgmma': an sm_90a build, and
not trans_a=True with trans_b=False). blas3 checks the operands, asks the planner and launches its plan.

BLAS semantics: beta == 0 never reads c; alpha == 0 (or K == 0) reads neither a nor b and only scales
c; M == 0 or N == 0 returns an empty result. Transposes are strides inside the kernels, never copies.
Every check runs before any launch and raises ValueError naming the shapes.

Views go to the kernels as they are wherever cuBLAS could take them: a, b and c with unit stride along
one axis and the leading dimension (>= the other extent) and, for stacks, any batch stride, are passed
as pointer, lda/ldb/ldc and stride_a/b/c (a[:, 2:7], a[::2], w.T, out[:, 1:5] written in place; a
transposed c is computed as c.T = op(b).T op(a).T). Other layouts go through contiguous temporaries.
"""
import math

import numpy as np

from . import gemm_complex, gemm_plan
from ..core.array import DeviceArray, empty
from ..runtime import backends
from ..runtime.dtypes import COMPLEX, HALVES
from .blas1 import dot, scale_output
from .blas2 import gemv
from ..core.checks import blas_matrix, check_operands, leading_dimension, swap_last, write_back
from ..runtime.launch import ceil_div, get_kernel
from ..core.layout import broadcast_shape, broadcast_strides, may_overlap_itself, may_share_memory

KERNELS = gemm_plan.KERNELS
GEMM_FLOATS = (np.dtype(np.float32), np.dtype(np.float64)) + HALVES  # float16 / bfloat16: tensor cores, FP32 sums
_GEMM_FLOAT_SET = frozenset(GEMM_FLOATS)
MATMUL_TYPES = GEMM_FLOATS + COMPLEX  # matmul and @: complex through gemm_complex
MAX_GRID_Z = 65535  # batches per launch
ROWS_PER_LAUNCH = 65535 * 16  # grid.y <= 65,535 with the smallest row tile (16 rows: naive, tiled)


# -- shape checks -----------------------------------------------------------------------------------
def _op_shape(x, trans):
    return (x.shape[-1], x.shape[-2]) if trans else (x.shape[-2], x.shape[-1])


def _check_inner(routine, a, b, trans_a, trans_b):
    (m, ka), (kb, n) = _op_shape(a, trans_a), _op_shape(b, trans_b)
    if ka != kb:  # gemm: op(a) is 4x3 but op(b) = b.T is 4x3; inner dimensions differ
        op_a, op_b = (f"op({x}){f' = {x}.T' if t else ''}" for x, t in (("a", trans_a), ("b", trans_b)))
        raise ValueError(f"{routine}: {op_a} is {m}x{ka} but {op_b} is {kb}x{n}; inner dimensions differ")
    return m, n, ka


def _check_overlap(routine, c, *inputs):
    for name, x in inputs:
        if may_share_memory(x, c):
            raise ValueError(f"{routine}: c {c.shape} shares memory with {name} {x.shape}; "
                             "the output must not overlap an input")


def _one_float(a, b, c, out_dtype):
    """The dtype of the common call: a, b (and c) DeviceArrays of one real GEMM dtype and no out_dtype, which
    nothing in _dtypes can refuse (nor is it complex); None for any other call."""
    dtype = a.dtype if type(a) is DeviceArray else None
    if (out_dtype is None and dtype in _GEMM_FLOAT_SET and type(b) is DeviceArray and b.dtype == dtype
            and (c is None or (type(c) is DeviceArray and c.dtype == dtype))):
        return dtype
    return None


def _dtypes(routine, a, b, c, out_dtype):
    """(operand dtype, C's dtype): a and b of one dtype; C of theirs, or float32 for 16-bit operands (cuBLAS's
    GemmEx with FP32 compute): out_dtype= for a new C, else c's own."""
    dtype = _one_float(a, b, c, out_dtype)
    if dtype is not None:
        return dtype, dtype
    dtype = check_operands(routine, GEMM_FLOATS, a=a, b=b)
    if c is not None:
        check_operands(routine, GEMM_FLOATS, c=c)
    out = np.dtype(out_dtype) if out_dtype is not None else (c.dtype if c is not None else dtype)
    allowed = (dtype, np.dtype(np.float32)) if dtype in HALVES else (dtype,)
    if out not in allowed or (c is not None and c.dtype != out):
        raise ValueError(f"{routine}: operands have mixed dtypes: {dtype} a and b give a "
                         f"{' or '.join(map(str, allowed))} result, not {c.dtype if c is not None else out}")
    return dtype, out


def _output(routine, a, c, shape, beta, inputs, out_dtype=None):
    if c is None:
        if beta != 0:
            raise ValueError(f"{routine}: beta = {beta} needs an output c to scale; pass c or leave beta at 0")
        return empty(shape, out_dtype or a.dtype)
    if c.shape != shape:
        shapes = ", ".join(f"{n} {x.shape}" for n, x in inputs)
        raise ValueError(f"{routine}: c has shape {c.shape}, expected {shape} for {shapes}")
    _check_overlap(routine, c, *inputs)
    return c


# -- the routines -----------------------------------------------------------------------------------
def gemm(a, b, c=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, stream=None, kernel=None,
         out_dtype=None):
    """c = alpha * op(a) @ op(b) + beta * c with op(x) = x or x.T; returns c (new when not given).
    float16/bfloat16 operands accumulate in float32; c is of their dtype or, with out_dtype=np.float32 (or a
    float32 c), float32. kernel: one of KERNELS or 'auto' (default: $GPUBLAS_GEMM_KERNEL, else auto).
    Complex operands take op(x) = x.conj().T too (trans 'C'; gpublas.blas.gemm_complex: real GEMMs on the parts)."""
    dtype = _one_float(a, b, c, out_dtype)
    key = None
    if dtype is not None and type(trans_a) is bool and type(trans_b) is bool and alpha != 0:
        pa, pb = a.ptr, b.ptr
        key = (a.shape, a.strides, b.shape, b.strides, None if c is None else (c.shape, c.strides), trans_a,
               trans_b, dtype, beta != 0, kernel, gemm_plan.env_kernel(), backends.current(), pa % 16 == 0,
               pb % 16 == 0)
        recipe = _RECIPES.get(key)
        if recipe is not None:
            return _replay(recipe, a, b, c, alpha, beta, stream, pa, pb)
    elif dtype is None and gemm_complex.is_complex(a, b, c):
        return gemm_complex.gemm("gemm", gemm_batched, a, b, c, alpha=alpha, beta=beta, trans_a=trans_a,
                                 trans_b=trans_b, stream=stream, kernel=kernel)
    trans_a, trans_b = gemm_complex.trans_op(trans_a, "gemm") != "N", gemm_complex.trans_op(trans_b, "gemm") != "N"
    dtype, out = (dtype, dtype) if dtype is not None else _dtypes("gemm", a, b, c, out_dtype)
    for name, x in (("a", a), ("b", b), ("c", c)):
        if x is not None and x.ndim != 2:
            raise ValueError(f"gemm: {name} must be 2-D, got shape {x.shape}; use gemm_batched for stacks")
    m, n, k = _check_inner("gemm", a, b, trans_a, trans_b)
    c = _output("gemm", a, c, (m, n), beta, (("a", a), ("b", b)), out)
    recipe = _run(a, b, c, m, n, k, 1, alpha, beta, trans_a, trans_b, dtype, kernel, stream)
    if key is not None and recipe is not None:
        if len(_RECIPES) >= gemm_plan.MAX_CACHED:
            _RECIPES.clear()
        _RECIPES[key] = recipe
    return c


# -- the repeated product -------------------------------------------------------------------------------
# A training step asks the same few GEMMs each step. gemm keeps what its checks, gemm_plan and _launch worked
# out for a real product of one kernel launch (operands taken as the views they are, alpha and K nonzero) as a
# recipe, under a key holding every input those depend on: the operands' shapes, strides and dtype, whether
# c is given (its shape and strides) and beta is nonzero, the transposes, the kernel asked and
# $GPUBLAS_GEMM_KERNEL, the backend, and each operand's 16-byte alignment (gemm_plan's vec). A repeat then
# checks only what depends on the arrays themselves (overlap of c with a or b; freed memory, by .ptr) and
# launches: 6 us instead of 20-30 (sim). Streams and graph capture are the launch's, as on the full path.
_RECIPES = {}


def _replay(recipe, a, b, c, alpha, beta, stream, pa, pb):
    kern, grid, block, shared, flags, (m, n, k), (lda, ldb, ldc), (ta, tb), strides = recipe
    if c is None:
        c = empty((m, n), a.dtype)
    elif a._mem is c._mem or b._mem is c._mem:
        _check_overlap("gemm", c, ("a", a), ("b", b))
    args = ((m, n, k, alpha, pa, lda, ta, pb, ldb, tb, beta, c.ptr, ldc, *strides) if flags
            else (m, n, k, alpha, pa, lda, pb, ldb, beta, c.ptr, ldc, *strides))
    kern.launch(grid, block, *args, shared=shared, stream=stream)
    return c


def gemm_batched(a, b, c=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, stream=None, kernel=None,
                 out_dtype=None):
    """gemm on stacks: c[i] = alpha * op(a[i]) @ op(b[i]) + beta * c[i] for a (batch, ., .), b (batch, ., .);
    strided batches, one launch (grid z = batch); dtypes and trans as gemm's."""
    if gemm_complex.is_complex(a, b, c):
        return gemm_complex.gemm("gemm_batched", gemm_batched, a, b, c, alpha=alpha, beta=beta, trans_a=trans_a,
                                 trans_b=trans_b, stream=stream, kernel=kernel)
    trans_a, trans_b = (gemm_complex.trans_op(t, "gemm_batched") != "N" for t in (trans_a, trans_b))
    operands = dict(a=a, b=b) if c is None else dict(a=a, b=b, c=c)
    dtype, out = _dtypes("gemm_batched", a, b, c, out_dtype)
    for name, x in operands.items():
        if x.ndim != 3:
            raise ValueError(f"gemm_batched: {name} must be 3-D (batch, rows, cols), got shape {x.shape}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"gemm_batched: batch sizes differ: a {a.shape} has {a.shape[0]}, "
                         f"b {b.shape} has {b.shape[0]}")
    m, n, k = _check_inner("gemm_batched", a, b, trans_a, trans_b)
    batch = a.shape[0]
    c = _output("gemm_batched", a, c, (batch, m, n), beta, [("a", a), ("b", b)], out)
    _run(a, b, c, m, n, k, batch, alpha, beta, trans_a, trans_b, dtype, kernel, stream)
    return c


def _run(a, b, c, m, n, k, batch, alpha, beta, trans_a, trans_b, dtype, kernel, stream):
    """Dispatches a checked product: plans it once (gemm_plan), then scales c alone when alpha or K is 0,
    else launches the plan. Each operand goes as the view it is when blas_matrix can take it (a transposed
    one with its flag flipped), its batch stride whatever it is (0 for a 2-D operand or a stack of one,
    which broadcasts); c likewise when it can be written as it is, or as c.T = op(b).T op(a).T when its
    transpose can; otherwise through a contiguous temporary."""
    a0, b0 = a, b
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
    vec = gemm_plan.vector_copies(a, lda, b, ldb, m, n, k, trans_a, trans_b, strides)
    problem = gemm_plan.Problem(m, n, k, batch, bool(trans_a), bool(trans_b), lds, strides, np.dtype(dtype), vec,
                                c.dtype)
    plan = gemm_plan.plan(kernel, problem)
    if m == 0 or n == 0 or batch == 0:
        return
    if (alpha == 0 or k == 0) and dtype in HALVES:  # the 16-bit kernels scale C themselves, reading no A or B
        _launch(plan._replace(splits=1, kslice=0), problem._replace(k=0), a, b, c, 0.0, beta, stream)
        return
    if alpha == 0 or k == 0:
        scale_output(c, beta, stream=stream)
        return
    recipe = _launch(plan, problem, a, b, c, alpha, beta, stream)
    return recipe if a._mem is a0._mem and b._mem is b0._mem else None  # not through a copy


def _launch(plan, p, a, b, c, alpha, beta, stream):
    """Runs a Plan: one launch per chunk (_chunks) over a grid of the plan's tiles; split-K as its slices'
    products into a workspace W (splits, m, n) (one batched launch for the full slices, one for the
    last), then gemm_splitk_reduce sums them in slice order and applies alpha and beta. Returns gemm's
    recipe for a plan of one launch (see _RECIPES), else None. The 16-bit kernels' slices write float partials
    (their out_real = float build) and gemm_half_splitk_reduce rounds the sum into C's type."""
    half_split = plan.splits > 1 and plan.family == "gemm_half"
    defines = (("out_real", "float"),) if half_split else plan.defines
    kern = get_kernel(plan.family, plan.kernel, plan.dtype, **dict(defines)) if defines else \
        get_kernel(plan.family, plan.kernel, plan.dtype)
    if plan.shared:
        kern.allow_shared(plan.shared)  # above the default 48 KB: an opt-in, once per kernel
    (lda, ldb, ldc), item = p.lds, a.dtype.itemsize
    bm, bn = plan.tile

    def run(rows, n, k, alpha, pa, pb, beta, pc, ldc, strides, nz):
        args = ((rows, n, k, alpha, pa, lda, int(p.trans_a), pb, ldb, int(p.trans_b), beta, pc, ldc, *strides)
                if plan.flags else (rows, n, k, alpha, pa, lda, pb, ldb, beta, pc, ldc, *strides))
        kern((ceil_div(n, bn), ceil_div(rows, bm), nz), plan.block, *args, shared=plan.shared, stream=stream)

    if plan.splits == 1 and p.batch <= MAX_GRID_Z and p.m <= ROWS_PER_LAUNCH:  # one launch: the common case
        run(p.m, p.n, p.k, alpha, a.ptr, b.ptr, beta, c.ptr, ldc, p.strides, p.batch)
        return (kern, (ceil_div(p.n, bn), ceil_div(p.m, bm), p.batch), plan.block, plan.shared, plan.flags,
                (p.m, p.n, p.k), p.lds, (int(p.trans_a), int(p.trans_b)), p.strides)  # gemm's recipe
    for pa, pb, pc, nz, rows in _chunks(a, b, c, p.batch, p.lds, p.strides, p.m, p.trans_a):
        if plan.splits == 1:
            run(rows, p.n, p.k, alpha, pa, pb, beta, pc, ldc, p.strides, nz)
            continue
        ks, s = plan.kslice, plan.splits - 1
        off_a, off_b = ks * (lda if p.trans_a else 1), ks * (1 if p.trans_b else ldb)  # slice to slice
        reduce = (get_kernel("gemm_half", "gemm_half_splitk_reduce", plan.dtype, **dict(plan.defines)) if half_split
                  else get_kernel("gemm_v2", "gemm_splitk_reduce", plan.dtype))
        for z in range(nz):  # split-K runs one product at a time
            za, zb, zc = (pa + z * p.strides[0] * item, pb + z * p.strides[1] * item, pc + z * p.strides[2] * item)
            work = empty((plan.splits, rows, p.n), np.float32 if half_split else plan.dtype)
            if s:
                run(rows, p.n, ks, 1.0, za, zb, 0.0, work.ptr, p.n, (off_a, off_b, rows * p.n), s)
            run(rows, p.n, p.k - s * ks, 1.0, za + s * off_a * item, zb + s * off_b * item, 0.0,
                work.ptr + s * rows * p.n * work.itemsize, p.n, (0, 0, 0), 1)
            reduce(min(ceil_div(rows * p.n, 256), 4096), 256, rows, p.n, plan.splits, alpha, work, beta, zc, ldc,
                   stream=stream)


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


def _broadcast_gemm(a, b, kernel=None):
    """a @ b for 3-D stacks where one side is 2-D (or a stack of one): the 2-D side gets batch stride 0."""
    dtype = check_operands("matmul", MATMUL_TYPES, a=a, b=b)
    a3 = a if a.ndim == 3 else a.reshape((1,) + a.shape)
    b3 = b if b.ndim == 3 else b.reshape((1,) + b.shape)
    if a3.shape[0] != b3.shape[0] and 1 not in (a3.shape[0], b3.shape[0]):
        raise ValueError(f"matmul: batch sizes differ: a {a.shape}, b {b.shape}")
    m, n, k = _check_inner("matmul", a3, b3, False, False)
    batch = a3.shape[0] if b3.shape[0] == 1 else b3.shape[0]  # NumPy broadcasting: 1 stretches, 0 stays 0
    if dtype.kind == "c":  # gemm_complex takes stacks of one batch size: the one-matrix side repeated
        a3, b3 = (x if x.shape[0] == batch else x._view((batch,) + x.shape[1:], (0,) + x.strides[1:]).copy()
                  for x in (a3, b3))
        return gemm_batched(a3, b3, kernel=kernel)
    c = empty((batch, m, n), dtype)
    _run(a3, b3, c, m, n, k, batch, 1.0, 0.0, False, False, dtype, kernel, None)
    return c


def _as_stack(x, batch):
    """x (..., rows, cols) broadcast to batch + (rows, cols) as a 3-D stack for _broadcast_gemm: one
    matrix (batch stride 0) when x does not vary along the batch axes, else (prod(batch), rows, cols),
    a view where its broadcast batch strides merge into one stride, else a contiguous copy."""
    strides = broadcast_strides(x.shape[:-2], x.strides[:-2], batch)
    if not any(strides):
        return x._view((1,) + x.shape[-2:], (0,) + x.strides[-2:])
    return x._view(batch + x.shape[-2:], strides + x.strides[-2:]).reshape((math.prod(batch),) + x.shape[-2:])


def _matmul_stacks(a, b):
    """a @ b with a stack on at least one side, NumPy's rules: a 1-D a is one row, a 1-D b one column,
    and the result drops that axis; the batch axes (all but the last two) broadcast over any number
    of dimensions and are flattened into one for a single batched GEMM."""
    k_a, k_b = a.shape[-1], b.shape[-2] if b.ndim > 1 else b.shape[0]
    if k_a != k_b:
        raise ValueError(f"matmul: a {a.shape} @ b {b.shape}: a has {k_a} columns, b {k_b} rows")
    a2 = a.reshape((1, k_a)) if a.ndim == 1 else a
    b2 = b.reshape((k_b, 1)) if b.ndim == 1 else b
    try:
        batch = broadcast_shape(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: the batch axes of a {a.shape} and b {b.shape} do not broadcast") from None
    shape = batch + a.shape[-2:-1] + b.shape[-1:] if b.ndim > 1 else batch + a.shape[-2:-1]
    if math.prod(batch) == 0:
        return empty(shape, a.dtype)
    return _broadcast_gemm(_as_stack(a2, batch), _as_stack(b2, batch)).reshape(shape)


def matmul(a, b):
    """a @ b as NumPy defines it: 2-D @ 2-D -> gemm, a matrix with a vector -> gemv (1-D @ 1-D ->
    dot into a 0-d array, NumPy's 0-d result, no read-back), anything with a stack -> one batched gemm
    (_matmul_stacks: batch axes of any number broadcast, a vector on either side of a stack). Complex
    operands take the same paths (gemm_complex's products; a vector side never conjugated)."""
    dtype = check_operands("matmul", MATMUL_TYPES, a=a, b=b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must have at least 1 dimension, got a {a.shape}, b {b.shape}")
    if dtype in HALVES and min(a.ndim, b.ndim) == 1:  # 16-bit: a vector is a one-row or one-column GEMM
        return _matmul_stacks(a, b)
    if a.ndim == 1 and b.ndim == 1:
        if a.shape != b.shape:
            raise ValueError(f"matmul: vectors of different lengths: a {a.shape}, b {b.shape}")
        return dot(a, b, out=empty((), dtype))
    if a.ndim == 2 and b.ndim == 1:
        return gemv(a, b)
    if a.ndim == 1 and b.ndim == 2:
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"matmul: a {a.shape} @ b {b.shape}: a has {a.shape[0]} elements, b {b.shape[0]} rows")
        return gemv(b, a, trans=True)
    if a.ndim == 2 and b.ndim == 2:
        return gemm(a, b)
    return _matmul_stacks(a, b)
