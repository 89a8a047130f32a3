"""Elementwise maps (cuda_src/elementwise.cu) and the tiled transpose (cuda_src/transpose.cu).

    y = gpublas.exp(x);  gpublas.axpby(2.0, x, -1.0, y, out=y);  z = gpublas.maximum(x, 0.5)

Every function takes DeviceArrays of float32 or float64 (the result has the inputs' dtype; mixing
float32 and float64 raises TypeError naming both: convert with astype) and an optional `out=` of the
result's shape and dtype, which may be one of the inputs. Python scalars take the array's dtype.
Binary functions broadcast as NumPy does (up to 4-D after merging neighbouring axes).
"""
import builtins

import numpy as np

from .array import DeviceArray
from .checks import as_array, check_float, common_dtype, is_scalar, make_out
from .launch import MAX_GRID as GPU_MAX_GRID, ceil_div, get_kernel, simulated

BLOCK = 256
MAX_GRID = 4096  # a grid-stride loop needs no more blocks than keep the device busy
# On the sim backend a thread costs far more than an element (a function call per thread), so its
# grid-stride loops get 8 elements per thread: the same kernels, a quarter to an eighth the threads.
SIM_ELEMENTS_PER_BLOCK = 8 * BLOCK

# Opcodes: the EW_* and BIN_* numbers of cuda_src/elementwise.cu.
NEG, EXP, LOG, SQRT, ABS, TANH, SIGMOID, RELU = range(8)
ADD_S, SUB_S, RSUB_S, MUL_S, DIV_S, RDIV_S, POW_S, RPOW_S, MAX_S, MIN_S, CLIP = range(8, 19)
ADD, SUB, MUL, DIV, POW, MAX, MIN = range(7)
# binary opcode -> (array op scalar, scalar op array) unary opcodes
SCALAR_FORMS = {ADD: (ADD_S, ADD_S), SUB: (SUB_S, RSUB_S), MUL: (MUL_S, MUL_S), DIV: (DIV_S, RDIV_S),
                POW: (POW_S, RPOW_S), MAX: (MAX_S, MAX_S), MIN: (MIN_S, MIN_S)}

def grid_for(n):
    """Blocks of BLOCK threads for a grid-stride loop over n elements."""
    per_block = SIM_ELEMENTS_PER_BLOCK if simulated() else BLOCK
    return min(ceil_div(n, per_block), MAX_GRID)


# -- aliasing --------------------------------------------------------------------------------------
def unalias(x, out):
    """x, or a copy of x when it shares memory with `out` other than element for element (a view at
    another offset, or a broadcast operand): the kernel would read elements it already wrote."""
    if x._mem is out._mem and (x._offset != out._offset or x.shape != out.shape):
        return x.copy()
    return x


# -- broadcasting ----------------------------------------------------------------------------------
def broadcast_shape(*shapes):
    """NumPy's broadcast result shape, or ValueError naming the shapes."""
    ndim = builtins.max(len(s) for s in shapes)
    out = []
    for k in range(ndim):
        dims = {s[k - ndim + len(s)] for s in shapes if k - ndim + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise ValueError("operands could not be broadcast together with shapes "
                             + " ".join(str(tuple(s)) for s in shapes))
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(shape_a, shape_b, out_shape):
    """(dims, a strides, b strides) in elements, each padded to 4-D, for binary_bcast_real. Axes of
    size 1 are dropped and neighbouring axes merged where each operand is either contiguous across
    both or broadcast across both, so most cases fit in 4-D; raises ValueError when they do not."""
    nd = len(out_shape)
    pa = (1,) * (nd - len(shape_a)) + tuple(shape_a)
    pb = (1,) * (nd - len(shape_b)) + tuple(shape_b)
    merged = []  # [size, a broadcast?, b broadcast?]
    for d, da, db in zip(out_shape, pa, pb):
        if d == 1:
            continue
        flags = (da == 1, db == 1)
        if merged and tuple(merged[-1][1:]) == flags:
            merged[-1][0] *= d
        else:
            merged.append([d, *flags])
    if len(merged) > 4:
        raise ValueError(f"broadcasting {tuple(shape_a)} with {tuple(shape_b)} needs {len(merged)} "
                         "independent axes; at most 4 are supported")
    merged = [[1, False, False]] * (4 - len(merged)) + merged
    dims = [m[0] for m in merged]

    def strides(which):
        s, step = [0] * 4, 1
        for k in range(3, -1, -1):
            if not merged[k][which]:
                s[k] = step
                step *= dims[k]
        return s

    return dims, strides(1), strides(2)


# -- launchers: one per kernel ---------------------------------------------------------------------
def launch_unary(op, x, y, p0=0.0, p1=0.0):
    """y = f(x) for unary opcode `op` (same shape and dtype, checked by the caller)."""
    n = x.size
    if n:
        get_kernel("elementwise", "unary_real", x.dtype)(grid_for(n), BLOCK, x, y, op, p0, p1, n)
    return y


def launch_binary(op, a, b, out):
    """out = a (op) b, all of one shape."""
    n = out.size
    if n:
        get_kernel("elementwise", "binary_real", out.dtype)(grid_for(n), BLOCK, a, b, out, op, n)
    return out


def launch_binary_bcast(op, a, b, out):
    """out = a (op) b with a and b broadcast to out's shape."""
    n = out.size
    if n:
        dims, sa, sb = broadcast_strides(a.shape, b.shape, out.shape)
        get_kernel("elementwise", "binary_bcast_real", out.dtype)(grid_for(n), BLOCK, a, b, out, op, n,
                                                              dims[1], dims[2], dims[3], *sa, *sb)
    return out


_WHERE = {np.dtype(np.uint8): "where_u8_real", np.dtype(np.int32): "where_i32_real"}


def launch_where(cond, x, y, out):
    n = out.size
    if n:
        name = "where_real" if cond.dtype == out.dtype else _WHERE[cond.dtype]
        get_kernel("elementwise", name, out.dtype)(grid_for(n), BLOCK, cond, x, y, out, n)
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
def binary(op, a, b, out=None, what="binary operation"):
    """a (op) b for DeviceArrays and Python scalars (at least one array), broadcasting."""
    if isinstance(a, DeviceArray) and isinstance(b, DeviceArray):
        dtype = common_dtype(a, b, what)
        shape = a.shape if a.shape == b.shape else broadcast_shape(a.shape, b.shape)
        out = make_out(out, shape, dtype, what)
        if a._mem is out._mem or b._mem is out._mem:
            a, b = unalias(a, out), unalias(b, out)
        if a.shape == b.shape:
            return launch_binary(op, a, b, out)
        return launch_binary_bcast(op, a, b, out)
    if is_scalar(b):
        a = as_array(a, what)
        check_float(a, what)
        out = make_out(out, a.shape, a.dtype, what)
        return launch_unary(SCALAR_FORMS[op][0], unalias(a, out), out, b)
    if is_scalar(a):
        b = as_array(b, what)
        check_float(b, what)
        out = make_out(out, b.shape, b.dtype, what)
        return launch_unary(SCALAR_FORMS[op][1], unalias(b, out), out, a)
    return binary(op, as_array(a, what), as_array(b, what), out, what)


def _unary(op, what):
    def f(x, out=None):
        x = as_array(x, what)
        check_float(x, what)
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
absolute = _unary(ABS, "abs")
absolute.__doc__ = "Elementwise |x|."
tanh = _unary(TANH, "tanh")
tanh.__doc__ = "Elementwise hyperbolic tangent."
sigmoid = _unary(SIGMOID, "sigmoid")
sigmoid.__doc__ = "Elementwise 1 / (1 + exp(-x)), computed without overflow."
relu = _unary(RELU, "relu")
relu.__doc__ = "Elementwise max(x, 0) (nan stays nan)."
negative = _unary(NEG, "negative")
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
    """cond != 0 ? x : y elementwise. cond: a DeviceArray of x's dtype, uint8 (a bool array sent with
    to_device) or int32, or an ndarray; x, y: arrays or scalars. Shapes must be equal (no
    broadcasting, except that a scalar x or y fills the shape)."""
    cond = as_array(cond, "where")
    arrays = [v for v in (x, y) if not is_scalar(v)]
    if not arrays:
        raise TypeError("where: x or y must be an array (both are scalars)")
    arrays = [as_array(v, "where") for v in arrays]
    dtype = common_dtype(arrays[0], arrays[-1], "where")
    shape = arrays[0].shape
    x = as_array(x, "where") if not is_scalar(x) else DeviceArray(shape, dtype).fill(x)
    y = as_array(y, "where") if not is_scalar(y) else DeviceArray(shape, dtype).fill(y)
    if not cond.shape == x.shape == y.shape:
        raise ValueError(f"where: cond, x and y must have one shape, got {cond.shape}, {x.shape}, {y.shape}")
    if cond.dtype != dtype and cond.dtype not in _WHERE:
        raise TypeError(f"where: cond must be {dtype}, uint8 (bool) or int32, got {cond.dtype}")
    out = make_out(out, shape, dtype, "where")
    return launch_where(unalias(cond, out), unalias(x, out), unalias(y, out), out)


def axpby(a, x, b, y, out=None):
    """a * x + b * y in one pass (a, b scalars; x, y arrays of one shape and dtype)."""
    x, y = as_array(x, "axpby"), as_array(y, "axpby")
    dtype = common_dtype(x, y, "axpby")
    if x.shape != y.shape:
        raise ValueError(f"axpby: x has shape {x.shape}, y has shape {y.shape}; they must be equal")
    if not (is_scalar(a) and is_scalar(b)):
        raise TypeError("axpby: a and b must be scalars")
    out = make_out(out, x.shape, dtype, "axpby")
    return launch_axpby(a, unalias(x, out), b, unalias(y, out), out)


def transpose(a, out=None):
    """The transpose of a 2-D array, as a new array (a 1-D or 0-d array is copied)."""
    a = as_array(a, "transpose")
    if a.ndim < 2 and out is None:
        return a.copy()
    if a.ndim != 2:
        raise ValueError(f"transpose: 2-D arrays only (or a copy of a 1-D or 0-d one), got shape {a.shape}")
    check_float(a, "transpose")
    out = make_out(out, a.shape[::-1], a.dtype, "transpose")
    if out._mem is a._mem:
        raise ValueError("transpose: out must not share memory with the input")
    return launch_transpose(a, out)


# NumPy's names; `abs` and `pow` shadow the builtins only as attributes of this module.
abs = absolute  # noqa: A001
pow = power  # noqa: A001
