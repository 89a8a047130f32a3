"""Reductions (cuda_src/reduce.cu): sum, max, min, mean, argmax, argmin over the whole array or one
axis (sum, max, min and mean also over a tuple of axes), and softmax / logsumexp along any one axis.

    total = float(gpublas.sum(x));  col_max = x.max(axis=0, keepdims=True);  p = gpublas.softmax(logits)
    s = x.sum(axis=(0, 2))

Results are DeviceArrays (0-d for a whole-array reduction: float(r) or r.get() reads it); argmax and
argmin give int64 indices (NumPy's intp; the kernels write int32, widened once), the first one on ties (as NumPy; into the flattened array when axis is
None). float16 and bfloat16 arrays are reduced in float32 (their kernels load 16 bits and accumulate
in float: a sum of 3,000 bfloat16 ones is 3,000 before the one rounding of the result to bfloat16);
sum and mean take dtype=np.float32 to keep that float32 result.
Every result is deterministic: the summation order depends on the shape only, so the sim
backend gives identical bits under every thread order.
"""
import builtins
import math

import numpy as np

from . import promotion
from ..runtime import dtypes, source
from .array import DeviceArray, impl, provide
from .checks import as_array, check_float, normalize_axes
from ..runtime.geometry import SIM_REDUCE_RUNS
from ..runtime.launch import SIM_RUN, ceil_div, geometry_1d, get_kernel, simulated

_OPS = source.int_defines("reduce.cu", "RED_")
SUM, MAX, MIN = _OPS["RED_SUM"], _OPS["RED_MAX"], _OPS["RED_MIN"]
# reduce_serial's adjacent outputs per thread on the sim: their chains advance together as vector adds
# instead of one latency-bound chain at a time (the LSTM example's bias gradients, 768 x 256 and 768 x 45
# summed over rows: 183 -> 12 and 20 -> 6.3 us of CPU; 8 a thread: 27 and 7.7, 16: 14.4); one on a GPU
_SERIAL = source.int_defines("reduce.cu", "SERIAL_")
SIM_SERIAL_COLS = _SERIAL["SERIAL_COLS"]
SIM_SERIAL_LANES_MIN = _SERIAL["SERIAL_LANES_MIN"]  # the sim sums rows this long in lanes (reduce.cu)
PART = 4096        # elements per block before a row is split into parts (two passes)
SIM_PART = 256 * SIM_RUN  # ... on the sim: a block of 256 threads, each a contiguous run of SIM_RUN
MAX_BLOCKS = 512   # parts are added only while rows * parts stays below this
SERIAL_N = 32      # a reduced axis this short takes reduce_serial (one thread per output) on every backend


def _row_block(n):
    """Threads per block for a row of n: 256, or fewer (a multiple of 32) for short rows; one warp
    on the sim, where every thread's barriers cost a fiber switch."""
    if simulated():
        return 32
    return builtins.min(256, builtins.max(32, ceil_div(n, 32) * 32))


def serial_fits(n, inner):
    """Whether reduce_serial (a thread per output walking its n values in order, no barrier) reduces
    an axis of n with `inner` elements after it: a short axis on every backend (a block or warp
    reduce would idle most of its threads and pay its barriers for a few elements); on the sim, where
    a barrier costs a fiber switch per thread, every column reduction and every row up to PART."""
    return n <= SERIAL_N or (simulated() and (inner > 1 or n <= PART))


# -- launchers -------------------------------------------------------------------------------------
def launch_reduce(op, x, outer, n, inner, val, idx, scale=1, beta=0):
    """Reduces x seen as (outer, n, inner) over its middle axis into val (outer, inner; x's compute
    dtype, float32 for a 16-bit x) = result +
    beta * val (beta == 0 never reads val) and/or the index into idx, with the kernel that fits the
    shape: reduce_serial for a short axis (serial_fits), else reduce_rows (inner == 1), else
    reduce_cols. The order of every sum depends on the shape and backend only."""
    if serial_fits(n, inner):
        launch_reduce_serial(op, x, outer, n, inner, val, idx, scale, beta)
    elif inner == 1 and beta == 0:
        launch_reduce_rows(op, x, outer, n, val, idx, scale)
    else:
        launch_reduce_cols(op, x, outer, n, inner, val, idx, scale, beta)


def launch_reduce_rows(op, x, rows, n, val, idx, scale=1):
    """Reduces each row of x seen as (rows, n) into val[row] (and/or the index into idx[row]). Long
    rows of few-row arrays are split into parts reduced by separate blocks, then a second pass."""
    part = SIM_PART if simulated() else PART
    parts = builtins.max(1, builtins.min(ceil_div(n, part), MAX_BLOCKS // rows))
    k = get_kernel("reduce", "reduce_rows", x.dtype)
    if parts == 1:
        k(rows, _row_block(n), x, None, val, idx, op, n, 1, scale)
        return
    compute = dtypes.TABLE[x.dtype].compute  # the partials' dtype, and the second pass's build
    pval = DeviceArray((rows, parts), compute)
    pidx = DeviceArray((rows, parts), np.int32) if idx is not None else None
    # on the sim a part's SIM_PART elements in threads of SIM_REDUCE_RUNS runs
    k(rows * parts, SIM_PART // (SIM_REDUCE_RUNS * SIM_RUN) if simulated() else 256, x, None, pval, pidx, op, n, parts, 1)
    k2 = k if compute == x.dtype else get_kernel("reduce", "reduce_rows", compute)
    k2(rows, _row_block(parts), pval, pidx, val, idx, op, parts, 1, scale)


def launch_reduce_cols(op, x, outer, n, inner, val, idx, scale=1, beta=0):
    """Reduces x seen as (outer, n, inner) over its middle axis into val (outer, inner) = result +
    beta * val (beta == 0 never reads val); coalesced: a warp reads 32 consecutive inner positions."""
    k = get_kernel("reduce", "reduce_cols", x.dtype)
    k(outer * ceil_div(inner, 32), (32, 8), x, val, idx, op, n, inner, scale, beta)


def launch_reduce_serial(op, x, outer, n, inner, val, idx, scale=1, beta=0):
    """As launch_reduce_cols, with one thread per output walking its n values (no barrier); on the sim
    one thread per run of SIM_SERIAL_COLS adjacent outputs (the same order for each)."""
    cols = SIM_SERIAL_COLS if simulated() and inner > 1 else 1
    k = get_kernel("reduce", "reduce_serial", x.dtype)
    k(*geometry_1d(outer * ceil_div(inner, cols)), x, val, idx, op, outer, n, inner, cols, scale, beta)


def launch_softmax_rows(x, y, rows, n):
    get_kernel("reduce", "softmax_rows", x.dtype)(rows, _row_block(n), x, y, n)


def launch_logsumexp_rows(x, out, rows, n):
    get_kernel("reduce", "logsumexp_rows", x.dtype)(rows, _row_block(n), x, out, n)


# -- the reductions --------------------------------------------------------------------------------
def _fold(a, axis, keepdims, what, index=False):
    """(view, outer, n, inner, result shape) for reducing `a` over `axis`: None (all of it), an int, or
    a tuple of ints (not for argmax/argmin, as NumPy). The reduced axes are seen as one axis of n:
    a run of neighbouring axes as they are, others through a view with them moved last (inner 1),
    which _operand copies to contiguous memory."""
    if axis is None:
        return a, 1, a.size, 1, (1,) * a.ndim if keepdims else ()
    if index and not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{what}: axis must be an int or None, got {axis!r}")
    if not isinstance(axis, (int, np.integer, tuple)):
        raise TypeError(f"{what}: axis must be an int, a tuple of ints or None, got {axis!r}")
    axes = normalize_axes(axis, a.ndim, what)
    kept = [i for i in range(a.ndim) if i not in axes]
    shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape)) if keepdims else \
        tuple(a.shape[i] for i in kept)
    n = math.prod(a.shape[i] for i in axes)
    if axes and axes[-1] - axes[0] + 1 != len(axes):  # not neighbours: move them last
        return a.transpose(tuple(kept) + axes), math.prod(a.shape[i] for i in kept), n, 1, shape
    lo, hi = (axes[0], axes[-1] + 1) if axes else (a.ndim, a.ndim)  # axis=(): n = 1, nothing reduced
    return a, math.prod(a.shape[:lo]), n, math.prod(a.shape[hi:]), shape


REDUCIBLE = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint64)) + dtypes.HALVES + dtypes.COMPLEX


def _operand(a, op, what, mean):
    """(`a` as the reduction takes it, contiguous; the dtype its result converts to, or None): a mean
    of ints in float64, a sum of ints or bools in int64 (of unsigned ints: uint64, the same bits), as
    NumPy's; max, min and the arg-reductions of the narrow integers and bool in int32 or int64 (exact)."""
    a = as_array(a, what)
    result = None
    if a.dtype.kind == "c" and op != SUM:
        raise TypeError(f"{what}: not defined for {a.dtype} arrays (complex arrays take sum and mean)")
    if mean and not (dtypes.is_float(a.dtype) or a.dtype.kind == "c"):
        a = a.astype(np.float64)
    elif op == SUM and a.dtype.kind in "iub":
        result = np.dtype(np.uint64) if a.dtype.kind == "u" else None
        a = a.view(np.int64) if a.dtype == np.uint64 else a.astype(np.int64)
    elif a.dtype in promotion.COMPUTE:
        a, result = a.astype(promotion.COMPUTE[a.dtype]), a.dtype
    elif a.dtype not in REDUCIBLE:
        raise TypeError(f"{what}: {', '.join(map(str, REDUCIBLE))} arrays only, got {a.dtype}")
    return (a if a.c_contiguous else a.copy()), result


def _reduce(a, op, axis, keepdims, what, index=False, mean=False, dtype=None):
    a, outer, n, inner, shape = _fold(as_array(a, what), axis, keepdims, what, index)
    a, result = _operand(a, op, what, mean)
    compute = dtypes.TABLE[a.dtype].compute  # the kernels' output: float32 for a 16-bit a
    dtype = (result or a.dtype) if dtype is None else np.dtype(dtype)
    if dtype not in (a.dtype, compute, result):
        raise TypeError(f"{what}: dtype={dtype} for a {a.dtype} array; it takes {a.dtype} or {compute}")
    val = None if index else DeviceArray(shape, compute)
    idx = DeviceArray(shape, np.int32) if index else None
    if n == 0:
        if op != SUM:
            raise ValueError(f"zero-size array to reduction operation {what} which has no identity")
        val.fill(np.nan if mean else 0)
    elif outer * inner:
        scale = 1.0 / n if mean else 1  # an int: the int builds take an int scale
        launch_reduce(op, a, outer, n, inner, val, idx, scale)
    if index:
        return idx.astype(np.int64)  # NumPy's intp
    if dtype == np.uint64 and val.dtype == np.int64:
        return val.view(dtype)  # a sum modulo 2^64: the same bits
    return val if val.dtype == dtype else val.astype(dtype)  # one rounding of each float32 result


def sum(a, axis=None, keepdims=False, dtype=None):  # noqa: A001 (NumPy's name)
    """Sum over all elements (axis=None, a 0-d array) or over one axis; 0 for an empty array.
    dtype=np.float32 on a 16-bit array returns its float32 accumulation unrounded."""
    return _reduce(a, SUM, axis, keepdims, "sum", dtype=dtype)


def mean(a, axis=None, keepdims=False, dtype=None):
    """Arithmetic mean over all elements or one axis (nan for an empty array, as NumPy); dtype as sum's."""
    return _reduce(a, SUM, axis, keepdims, "mean", mean=True, dtype=dtype)


def max(a, axis=None, keepdims=False):  # noqa: A001
    """Largest element (nan if any is nan); ValueError for an empty array."""
    return _reduce(a, MAX, axis, keepdims, "maximum")


def min(a, axis=None, keepdims=False):  # noqa: A001
    """Smallest element (nan if any is nan); ValueError for an empty array."""
    return _reduce(a, MIN, axis, keepdims, "minimum")


def argmax(a, axis=None, keepdims=False):
    """int64 index of the largest element (first on ties; into the flattened array for axis=None)."""
    return _reduce(a, MAX, axis, keepdims, "argmax", index=True)


def argmin(a, axis=None, keepdims=False):
    """int64 index of the smallest element (first on ties; into the flattened array for axis=None)."""
    return _reduce(a, MIN, axis, keepdims, "argmin", index=True)


def _last_axis(x, axis, what):
    """(x with `axis` moved last, C-contiguous (a copy when it was not); rows; n; the permutation that
    moved it). axis None (logsumexp over everything) flattens x."""
    x = as_array(x, what)
    check_float(x, what)
    if x.ndim == 0:
        raise ValueError(f"{what}: needs an array of at least one dimension")
    if axis is None:
        x, axis = x.reshape(-1), 0
    (axis,) = normalize_axes(axis, x.ndim, what)
    perm = tuple(i for i in range(x.ndim) if i != axis) + (axis,)
    x = x.transpose(perm) if axis != x.ndim - 1 else x
    x = x if x.c_contiguous else x.copy()
    n = x.shape[-1]
    return x, (x.size // n if n else 0), n, perm


def softmax(x, axis=-1, out=None):
    """exp(x - max) / sum(exp(x - max)) along `axis` (any one, or None: over every element, as scipy's): the
    last axis runs as it is, another is moved last through a transposed copy and back. Finite for
    logits of any size."""
    x0 = as_array(x, "softmax")
    if axis is None and x0.ndim != 1:  # over every element (scipy's axis=None), in x's shape
        y = softmax(x0.reshape(-1), 0).reshape(x0.shape)
        return y if out is None else impl.copy_to(out, y)
    x, rows, n, perm = _last_axis(x0, axis, "softmax")
    if out is not None and (out.shape != x0.shape or out.dtype != x0.dtype):
        raise ValueError(f"softmax: out must be {x0.dtype} of shape {x0.shape}, got {out.dtype} {out.shape}")
    moved = perm != tuple(range(x.ndim))
    y = DeviceArray(x.shape, x.dtype) if out is None or moved or not out.c_contiguous else out
    if rows and n:
        launch_softmax_rows(x, y, rows, n)
    if not moved:
        return y if y is out or out is None else impl.copy_to(out, y)
    back = y.transpose(tuple(int(i) for i in np.argsort(perm)))
    return back.copy() if out is None else impl.copy_to(out, back)


def logsumexp(x, axis=-1, keepdims=False):
    """max + log(sum(exp(x - max))) along `axis` (any one, or None: every element; -inf for an empty axis)."""
    x0 = as_array(x, "logsumexp")
    x, rows, n, _ = _last_axis(x0, axis, "logsumexp")
    out = DeviceArray(x.shape[:-1], dtypes.TABLE[x.dtype].compute)
    if n == 0:
        out.fill(-np.inf)
    elif rows:
        launch_logsumexp_rows(x, out, rows, n)
    if keepdims:
        out = out.reshape(_fold(x0, axis, True, "logsumexp")[4])
    return out if out.dtype == x.dtype else out.astype(x.dtype)


provide(sum=sum, mean=mean, max=max, min=min, argmax=argmax, argmin=argmin)  # DeviceArray's methods
