"""Elementwise maps (cuda_src/elementwise.cu) and the tiled transpose (cuda_src/transpose.cu).

    y = gpublas.exp(x);  gpublas.axpby(2.0, x, -1.0, y, out=y);  z = gpublas.maximum(x, 0.5)
    m = x > 0.5;  gpublas.where(m, x, 0.0);  x[::2] *= 3     # bool results, views

Math functions take float16, bfloat16, float32 or float64 arrays (16-bit ones are computed in float32
and rounded once to their dtype, as NumPy and ml_dtypes do); + - * maximum minimum negative abs and
comparisons also take int32 (int32 / int32 divides in float64, as NumPy). The result has the inputs' dtype
(comparisons: bool); mixing dtypes raises TypeError naming both: convert with astype. A Python
scalar takes the array's dtype, except that a float scalar with an int32 array gives float64 (NumPy).
`out=` must have the result's shape and dtype and may be one of the inputs or a view. Operands may
be views of any strides; shapes broadcast as NumPy's (up to 8 axes after merging neighbours); an
operand that overlaps `out` other than element for element is copied first (NumPy's buffering).
Each launch takes the cheapest of three layouts the merged axes allow (`plan`): flat, at most 3
strided axes with FastDivmod index math, or the general 8-axis walk.
"""
import builtins
import math

import numpy as np

from . import dtypes, layout, source
from .array import DeviceArray, provide
from .checks import as_array, check_float, common_dtype, is_scalar, make_out
from .launch import BLOCK, MAX_GRID as GPU_MAX_GRID, ceil_div, fast_divisor, get_kernel, grid_1d as grid_for

FLOATS = dtypes.FLOATS  # float32, float64, float16, bfloat16
NUMERIC = FLOATS + (np.dtype(np.int32),)  # the `real` types elementwise.cu is built for
BOOL = np.dtype(np.bool_)
SMALL_INDEX = 0x7FFFFFFF  # common.cuh's small_index: below it an index fits 32-bit math

# Opcodes: the EW_*, BIN_* and CMP_* #defines of cuda_src/elementwise.cu, read from the source.
_EW, _BIN, _CMP = (source.int_defines("elementwise.cu", p) for p in ("EW_", "BIN_", "CMP_"))
NEG, EXP, LOG, SQRT, ABS, TANH, SIGMOID, RELU = (_EW[f"EW_{n}"] for n in
                                                 ("NEG", "EXP", "LOG", "SQRT", "ABS", "TANH", "SIGMOID", "RELU"))
ADD_S, SUB_S, RSUB_S, MUL_S, DIV_S, RDIV_S, POW_S, RPOW_S, MAX_S, MIN_S, CLIP = (
    _EW[f"EW_{n}"] for n in ("ADD_S", "SUB_S", "RSUB_S", "MUL_S", "DIV_S", "RDIV_S", "POW_S", "RPOW_S", "MAX_S",
                             "MIN_S", "CLIP"))
ADD, SUB, MUL, DIV, POW, MAX, MIN = (_BIN[f"BIN_{n}"] for n in ("ADD", "SUB", "MUL", "DIV", "POW", "MAX", "MIN"))
EQ, NE, LT, LE, GT, GE = (_CMP[f"CMP_{n}"] for n in ("EQ", "NE", "LT", "LE", "GT", "GE"))
INT_OPS = {ADD, SUB, MUL, MAX, MIN}  # binary opcodes int32 arrays take (DIV goes through float64)
# binary opcode -> (array op scalar, scalar op array) unary opcodes
SCALAR_FORMS = {ADD: (ADD_S, ADD_S), SUB: (SUB_S, RSUB_S), MUL: (MUL_S, MUL_S), DIV: (DIV_S, RDIV_S),
                POW: (POW_S, RPOW_S), MAX: (MAX_S, MAX_S), MIN: (MIN_S, MIN_S)}
SWAPPED = {EQ: EQ, NE: NE, LT: GT, LE: GE, GT: LT, GE: LE}  # s (cmp) a == a (SWAPPED[cmp]) s


# -- aliasing and layouts ---------------------------------------------------------------------------
def unalias(x, out):
    """x, or a copy of x when it shares memory with `out` other than element for element (a view at
    another offset or with other strides, or a broadcast operand): the kernel would read elements it
    already wrote."""
    if x is out or not layout.may_share_memory(x, out):
        return x
    if x._offset == out._offset and x.shape == out.shape and x.strides == out.strides:
        return x
    return x.copy()


def broadcast_shape(*shapes):
    """NumPy's broadcast result shape, or ValueError naming the shapes."""
    return layout.broadcast_shape(*shapes)


def _element_strides(shape, arrays):
    """Each array's element strides broadcast to `shape` (0 on a broadcast axis)."""
    return [layout.broadcast_strides(a.shape, [s // a.itemsize for s in a.strides], shape) for a in arrays]


def nd_args(shape, *arrays):
    """[n, 8 dims, then 8 element strides per array] for an _nd kernel over `shape`, each array
    broadcast to it (layout.kernel_dims merges axes; more than 8 left raises ValueError)."""
    dims, per_array = layout.kernel_dims(shape, _element_strides(shape, arrays))
    return [math.prod(shape), *dims, *(s for st in per_array for s in st)]


def _flat(*arrays):
    """True when every array is C-contiguous and of one shape: the flat kernels apply."""
    shape = arrays[0].shape
    for a in arrays:  # a loop, not all(genexpr): this runs at every elementwise launch
        if not a.c_contiguous or a.shape != shape:
            return False
    return True


def plan(shape, *arrays, flat=True):
    """(kernel suffix, arguments after the pointers) for a map over `shape` with these arrays broadcast
    to it, once layout.merge_axes has dropped and merged axes (CuPy's _reduce_dims):
      "", [n]              the flat kernel (flat=True): every array contiguous over the same elements,
                           one shape or merged to one unit-stride axis (x (1, 64, 128) + y (64, 128));
      "_nd3", [n, d1, d2, strides]  at most 3 axes left and n < 2^31 (a bias over rows, a per-channel
                           scale of NCHW data): FastDivmod divisors, 3 element strides per array;
      "_nd", nd_args       anything else, up to 8 axes."""
    n = math.prod(shape)
    if flat and _flat(*arrays):
        return "", [n]
    merged = layout.merge_axes(shape, _element_strides(shape, arrays))
    if flat and len(merged) == 1 and builtins.all(s == 1 for s in merged[0][1]):
        return "", [n]
    if len(merged) <= 3 and n < SMALL_INDEX:
        merged = [(1, [0] * len(arrays))] * (3 - len(merged)) + merged
        return "_nd3", [n, fast_divisor(merged[1][0]), fast_divisor(merged[2][0]),
                        *(ss[j] for j in range(len(arrays)) for _, ss in merged)]
    return "_nd", nd_args(shape, *arrays)


def _scalar(value, dtype):
    """A Python scalar for a kernel's `real` parameter of `dtype` (int kernels take ints, 16-bit
    floats the bits of the value rounded to their dtype)."""
    if dtype in dtypes.HALVES:
        return dtypes.scalar_arg(dtype, value)
    if dtype.kind != "f":
        value = int(value)
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python integer {value} out of bounds for {dtype}")
        return value
    return float(value)


# -- launchers: one per kernel ---------------------------------------------------------------------
def launch_unary(op, x, y, p0=0.0, p1=0.0):
    """y = f(x) for unary opcode `op` (same shape and dtype, checked by the caller)."""
    n = y.size
    if n:
        p0, p1 = _scalar(p0, y.dtype), _scalar(p1, y.dtype)
        kind, args = plan(y.shape, x, y)
        get_kernel("elementwise", f"unary{kind}_real", y.dtype)(grid_for(n), BLOCK, x, y, op, p0, p1, *args,
                                                                 views=True)
    return y


def launch_binary(op, a, b, out):
    """out = a (op) b, a and b broadcast to out's shape, any strides."""
    n = out.size
    if n:
        kind, args = plan(out.shape, a, b, out)
        get_kernel("elementwise", f"binary{kind}_real", out.dtype)(grid_for(n), BLOCK, a, b, out, op, *args,
                                                                   views=True)
    return out


def launch_compare(op, a, b, out):
    """out (bool) = a (cmp) b; b is an array of a's dtype broadcast to out's shape, or a scalar."""
    n = out.size
    if n:
        scalar = not isinstance(b, DeviceArray)
        p0 = _scalar(b, a.dtype) if scalar else 0
        kind, args = plan(out.shape, a, a if scalar else b, out, flat=False)
        get_kernel("elementwise", f"compare{kind}_real", a.dtype)(grid_for(n), BLOCK, a, None if scalar else b, p0,
                                                                 out, op, *args, views=True)
    return out


def launch_where(cond, x, y, out):
    """out = cond ? x : y, cond bool, all broadcast to out's shape."""
    n = out.size
    if n:
        kind, args = plan(out.shape, cond, x, y, out, flat=False)
        get_kernel("elementwise", f"where{kind}_real", out.dtype)(grid_for(n), BLOCK, cond, x, y, out, *args,
                                                                  views=True)
    return out


def launch_axpby(a, x, b, y, out):
    n = out.size
    if n:
        get_kernel("elementwise", "axpby_real", out.dtype)(grid_for(n), BLOCK, a, x, b, y, out, n)
    return out


def launch_transpose(a, out):
    rows, cols = a.shape
    if a.size:
        grid = (ceil_div(cols, 32), min(ceil_div(rows, 32), GPU_MAX_GRID[1]))  # the kernel strides over row tiles
        get_kernel("transpose", "transpose_tiled", a.dtype)(grid, (32, 8), a, out, rows, cols)
    return out


# -- public functions ------------------------------------------------------------------------------
def _arith_dtype(a, b, op, what):
    """The dtype of a (op) b for two arrays: one of NUMERIC, and float for the float-only opcodes."""
    dtype = common_dtype(a, b, what, NUMERIC)
    if dtype.kind == "i" and op not in INT_OPS:
        raise TypeError(f"{what}: not defined for {dtype} arrays; convert with .astype(np.float64)")
    return dtype


def _with_scalar(a, s, op, what):
    """(array, dtype) for array (op) scalar: an int32 array meets a float scalar (or a division) in
    float64, as NumPy does."""
    if a.dtype not in NUMERIC:
        raise TypeError(f"{what}: {', '.join(map(str, NUMERIC))} arrays only, got {a.dtype}")
    if a.dtype.kind == "i" and (op == DIV or isinstance(s, (float, np.floating))):
        return a.astype(np.float64)
    if a.dtype.kind == "i" and op not in INT_OPS:
        raise TypeError(f"{what}: not defined for {a.dtype} arrays; convert with .astype(np.float64)")
    return a


def binary(op, a, b, out=None, what="binary operation"):
    """a (op) b for DeviceArrays and Python scalars (at least one array), broadcasting."""
    if isinstance(a, DeviceArray) and isinstance(b, DeviceArray):
        if op == DIV and a.dtype == b.dtype and a.dtype.kind == "i":
            a, b = a.astype(np.float64), b.astype(np.float64)
        dtype = _arith_dtype(a, b, op, what)
        shape = a.shape if a.shape == b.shape else broadcast_shape(a.shape, b.shape)
        out = make_out(out, shape, dtype, what)
        return launch_binary(op, unalias(a, out), unalias(b, out), out)
    if is_scalar(b):
        a = _with_scalar(as_array(a, what), b, op, what)
        out = make_out(out, a.shape, a.dtype, what)
        return launch_unary(SCALAR_FORMS[op][0], unalias(a, out), out, b)
    if is_scalar(a):
        b = _with_scalar(as_array(b, what), a, op, what)
        out = make_out(out, b.shape, b.dtype, what)
        return launch_unary(SCALAR_FORMS[op][1], unalias(b, out), out, a)
    return binary(op, as_array(a, what), as_array(b, what), out, what)


def compare(op, a, b, out=None, what="comparison"):
    """a (cmp) b elementwise as a bool array: arrays of one dtype (broadcasting) or an array and a
    scalar (an int32 array meets a float scalar in float64)."""
    if is_scalar(a) and not is_scalar(b):
        return compare(SWAPPED[op], b, a, out, what)
    a = as_array(a, what)
    if is_scalar(b):
        a = _with_scalar(a, b, ADD, what)
        out = make_out(out, a.shape, BOOL, what)
        return launch_compare(op, a, b, out)
    b = as_array(b, what)
    common_dtype(a, b, what, NUMERIC)
    out = make_out(out, broadcast_shape(a.shape, b.shape), BOOL, what)
    return launch_compare(op, unalias(a, out), unalias(b, out), out)


def _unary(op, what, dtypes=FLOATS):
    def f(x, out=None):
        x = as_array(x, what)
        if x.dtype not in dtypes:
            raise TypeError(f"{what}: {' or '.join(map(str, dtypes))} arrays only, got {x.dtype}")
        out = make_out(out, x.shape, x.dtype, what)
        return launch_unary(op, unalias(x, out), out)

    f.__name__ = f.__qualname__ = what
    return f


exp = _unary(EXP, "exp")
exp.__doc__ = "Elementwise e**x."
log = _unary(LOG, "log")
log.__doc__ = "Elementwise natural logarithm (nan below 0, -inf at 0)."
sqrt = _unary(SQRT, "sqrt")
sqrt.__doc__ = "Elementwise square root."
absolute = _unary(ABS, "abs", NUMERIC)
absolute.__doc__ = "Elementwise |x|."
tanh = _unary(TANH, "tanh")
tanh.__doc__ = "Elementwise hyperbolic tangent."
sigmoid = _unary(SIGMOID, "sigmoid")
sigmoid.__doc__ = "Elementwise 1 / (1 + exp(-x)), computed without overflow."
relu = _unary(RELU, "relu")
relu.__doc__ = "Elementwise max(x, 0) (nan stays nan)."
negative = _unary(NEG, "negative", NUMERIC)
negative.__doc__ = "Elementwise -x."


def maximum(a, b, out=None):
    """Elementwise maximum of arrays or scalars, broadcasting; a NaN in either gives NaN (NumPy's)."""
    return binary(MAX, a, b, out, "maximum")


def minimum(a, b, out=None):
    """Elementwise minimum of arrays or scalars, broadcasting; a NaN in either gives NaN (NumPy's)."""
    return binary(MIN, a, b, out, "minimum")


def power(a, b, out=None):
    """a ** b elementwise: array ** scalar, scalar ** array or array ** array (broadcasting)."""
    return binary(POW, a, b, out, "pow")


def clip(a, lo, hi, out=None):
    """minimum(maximum(a, lo), hi); lo and hi are scalars (one kernel), None, or arrays."""
    a = as_array(a, "clip")
    check_float(a, "clip")
    if (lo is None or is_scalar(lo)) and (hi is None or is_scalar(hi)):
        out = make_out(out, a.shape, a.dtype, "clip")
        if lo is None and hi is None:
            raise ValueError("clip: lo and hi cannot both be None")
        a = unalias(a, out)
        if lo is None:
            return launch_unary(MIN_S, a, out, hi)
        if hi is None:
            return launch_unary(MAX_S, a, out, lo)
        return launch_unary(CLIP, a, out, lo, hi)
    if hi is None:
        return maximum(a, lo, out)
    if lo is None:
        return minimum(a, hi, out)
    return minimum(maximum(a, lo), hi, out)


def where(cond, x, y, out=None):
    """x where cond else y, elementwise, broadcasting cond, x and y together. cond: a bool array (any
    other dtype counts as cond != 0) or an ndarray; x, y: arrays of one dtype, or scalars (at least
    one array)."""
    cond = as_array(cond, "where")
    arrays = [as_array(v, "where") for v in (x, y) if not is_scalar(v)]
    if not arrays:
        raise TypeError("where: x or y must be an array (both are scalars)")
    dtype = common_dtype(arrays[0], arrays[-1], "where", NUMERIC)
    x = as_array(x, "where") if not is_scalar(x) else DeviceArray((), dtype).fill(x)
    y = as_array(y, "where") if not is_scalar(y) else DeviceArray((), dtype).fill(y)
    if cond.dtype != BOOL:
        if cond.dtype not in NUMERIC:
            cond = cond.astype(BOOL)
        else:
            cond = compare(NE, cond, 0, what="where")
    out = make_out(out, broadcast_shape(cond.shape, x.shape, y.shape), dtype, "where")
    return launch_where(unalias(cond, out), unalias(x, out), unalias(y, out), out)


def axpby(a, x, b, y, out=None):
    """a * x + b * y in one pass (a, b scalars; x, y arrays of one shape and dtype)."""
    x, y = as_array(x, "axpby"), as_array(y, "axpby")
    dtype = common_dtype(x, y, "axpby", FLOATS)
    if x.shape != y.shape:
        raise ValueError(f"axpby: x has shape {x.shape}, y has shape {y.shape}; they must be equal")
    if not (is_scalar(a) and is_scalar(b)):
        raise TypeError("axpby: a and b must be scalars")
    out = make_out(out, x.shape, dtype, "axpby")
    if _flat(x, y, out):
        return launch_axpby(a, unalias(x, out), b, unalias(y, out), out)
    return binary(ADD, binary(MUL, x, a), binary(MUL, y, b), out, "axpby")  # views: two passes


def transpose(a, out=None):
    """The transpose of a 2-D array as a new C-contiguous array (the tiled kernel; a.T is the view);
    a 1-D or 0-d array is copied."""
    a = as_array(a, "transpose")
    if a.ndim < 2 and out is None:
        return a.copy()
    if a.ndim != 2:
        raise ValueError(f"transpose: 2-D arrays only (or a copy of a 1-D or 0-d one), got shape {a.shape}")
    check_float(a, "transpose")
    out = make_out(out, a.shape[::-1], a.dtype, "transpose")
    if layout.may_share_memory(out, a):
        raise ValueError("transpose: out must not share memory with the input")
    if not out.c_contiguous:
        out[...] = transpose(a)
        return out
    return launch_transpose(a if a.c_contiguous else a.copy(), out)


# NumPy's names; `abs` and `pow` shadow the builtins only as attributes of this module.
abs = absolute  # noqa: A001
pow = power  # noqa: A001

provide(negative=negative, absolute=absolute)  # DeviceArray's -a and abs(a)
