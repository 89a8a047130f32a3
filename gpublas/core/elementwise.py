"""Elementwise maps (cuda_src/elementwise.cu).

    y = gpublas.exp(x);  gpublas.axpby(2.0, x, -1.0, y, out=y);  z = gpublas.maximum(x, 0.5)
    m = x > 0.5;  gpublas.where(m, x, 0.0);  x[::2] *= 3     # bool results, views

Math functions take float16, bfloat16, float32 or float64 arrays (16-bit ones are computed in float32
and rounded once to their dtype, as NumPy and ml_dtypes do); + - * / // % ** maximum minimum and
comparisons take every dtype and promote as NumPy 2's ufuncs (gpublas.core.promotion: float32 + float64 is
float64, int32 / int32 divides in float64, float32 * 2.0 stays float32); the kernels compute in the
float dtypes, int32 or int64 (uint8 and bool in int32, the result cast back). `out=` must have the
result's shape and a dtype NumPy's same_kind rule casts the result to, and may be one of the inputs
or a view. Operands may be views of any strides; shapes broadcast as NumPy's (up to 8 axes after
merging neighbours); an operand that overlaps `out` other than element for element is copied first
(NumPy's buffering).
Each launch takes the cheapest of three layouts the merged axes allow (`plan`): flat, at most 3
strided axes with FastDivmod index math, or the general 8-axis walk.
"""

import numpy as np

from . import layout, promotion
from .layout import nd_args, plan  # noqa: F401 (launchers call ew.plan, ew.nd_args)
from ..runtime import dtypes, source
from .array import DeviceArray, impl, provide
from .checks import as_array, common_dtype, is_scalar, make_out
from ..runtime.launch import BLOCK, flat_geometry, get_kernel, grid_1d as grid_for

FLOATS = dtypes.FLOATS  # float32, float64, float16, bfloat16
COMPLEX = dtypes.COMPLEX  # complex64, complex128: the opcodes COMPLEX_BINARY, COMPLEX_COMPARE name
NUMERIC = tuple(d for d in promotion.KERNEL_DTYPES if d not in COMPLEX)  # the real types elementwise.cu is built for
BOOL = np.dtype(np.bool_)

# Opcodes: the EW_*, BIN_* and CMP_* #defines of cuda_src/elementwise.cu, read from the source.
_EW, _BIN, _CMP = (source.int_defines("elementwise.cu", p) for p in ("EW_", "BIN_", "CMP_"))
NEG, EXP, LOG, SQRT, ABS, TANH, SIGMOID, RELU = (_EW[f"EW_{n}"] for n in
                                                 ("NEG", "EXP", "LOG", "SQRT", "ABS", "TANH", "SIGMOID", "RELU"))
ADD_S, SUB_S, RSUB_S, MUL_S, DIV_S, RDIV_S, POW_S, RPOW_S, MAX_S, MIN_S, CLIP = (
    _EW[f"EW_{n}"] for n in ("ADD_S", "SUB_S", "RSUB_S", "MUL_S", "DIV_S", "RDIV_S", "POW_S", "RPOW_S", "MAX_S",
                             "MIN_S", "CLIP"))
ADD, SUB, MUL, DIV, POW, MAX, MIN, FLOOR_DIVIDE, REMAINDER = (
    _BIN[f"BIN_{n}"] for n in ("ADD", "SUB", "MUL", "DIV", "POW", "MAX", "MIN", "FLOOR_DIVIDE", "REMAINDER"))
EQ, NE, LT, LE, GT, GE = (_CMP[f"CMP_{n}"] for n in ("EQ", "NE", "LT", "LE", "GT", "GE"))
CONJ, INVERT = _EW["EW_CONJ"], _EW["EW_INVERT"]
AND, OR, XOR, LSHIFT, RSHIFT = (_BIN[f"BIN_{n}"] for n in ("AND", "OR", "XOR", "LSHIFT", "RSHIFT"))
# What a complex build of elementwise.cu runs (field_binary_op, and field_unary_op for their scalar
# forms; NumPy orders complex numbers, gpublas compares them for equality only); the unary functions
# say which dtypes they take
COMPLEX_BINARY, COMPLEX_COMPARE = {ADD, SUB, MUL, DIV}, {EQ, NE}
# BIN_<NAME> opcode -> the NumPy ufunc <name> whose type resolution gives its dtypes (gpublas.core.promotion)
_NUMPY_NAME = {"DIV": "true_divide", "POW": "power", "MAX": "maximum", "MIN": "minimum", "SUB": "subtract",
               "MUL": "multiply", "AND": "bitwise_and", "OR": "bitwise_or", "XOR": "bitwise_xor",
               "LSHIFT": "left_shift", "RSHIFT": "right_shift"}
UFUNCS = {code: getattr(np, _NUMPY_NAME.get(n[4:], n[4:].lower())) for n, code in _BIN.items()}
COMPARISONS = {EQ: np.equal, NE: np.not_equal, LT: np.less, LE: np.less_equal, GT: np.greater,
               GE: np.greater_equal}
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


_FLOAT_ARGS = frozenset(d for d, row in dtypes.TABLE.items() if row.arg in "fd")  # float32, float64


def _scalar(value, dtype):
    """A Python scalar for a kernel's `real` parameter of `dtype` (int kernels take ints, 16-bit
    floats the bits of the value rounded to their dtype, complex kernels a complex)."""
    if dtype in _FLOAT_ARGS:  # a set: `in` a tuple of dtypes would compare with each
        return float(value)
    if dtype.kind == "c":
        return complex(value)
    if dtype in dtypes.HALVES:
        return dtypes.scalar_arg(dtype, value)
    value = int(value)  # the integer kernels
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise OverflowError(f"Python integer {value} out of bounds for {dtype}")
    return value


# -- launchers: one per kernel ---------------------------------------------------------------------
def launch_unary(op, x, y, p0=0.0, p1=0.0):
    """y = f(x) for unary opcode `op` (same shape and dtype, checked by the caller)."""
    n = y.size
    if n:
        p0, p1 = _scalar(p0, y.dtype), _scalar(p1, y.dtype)
        if x.c_contiguous and y.c_contiguous and x.shape == y.shape:  # plan's flat case, without its calls
            get_kernel("elementwise", "unary_real", y.dtype).launch(*flat_geometry(n), x, y, op, p0, p1, n)
            return y
        kind, args = plan(y.shape, x, y)
        get_kernel("elementwise", f"unary{kind}_real", y.dtype)(*flat_geometry(n), x, y, op, p0, p1, *args,
                                                                 views=True)
    return y


def launch_binary(op, a, b, out):
    """out = a (op) b, a and b broadcast to out's shape, any strides."""
    n = out.size
    if n:
        kind, args = plan(out.shape, a, b, out)
        get_kernel("elementwise", f"binary{kind}_real", out.dtype)(*flat_geometry(n), a, b, out, op, *args,
                                                                   views=True)
    return out


def launch_compare(op, a, b, out):
    """out (bool) = a (cmp) b; b is an array of a's dtype broadcast to out's shape, or a scalar."""
    n = out.size
    if n:
        scalar = not isinstance(b, DeviceArray)
        p0 = _scalar(b, a.dtype) if scalar else 0
        kind, args = plan(out.shape, a, a if scalar else b, out, flat=False)
        get_kernel("elementwise", f"compare{kind}_real", a.dtype)(*flat_geometry(n), a, None if scalar else b, p0,
                                                                 out, op, *args, views=True)
    return out


def launch_where(cond, x, y, out):
    """out = cond ? x : y, cond bool, all broadcast to out's shape."""
    n = out.size
    if n:
        kind, args = plan(out.shape, cond, x, y, out, flat=False)
        get_kernel("elementwise", f"where{kind}_real", out.dtype)(*flat_geometry(n), cond, x, y, out, *args,
                                                                  views=True)
    return out


def launch_axpby(a, x, b, y, out):
    n = out.size
    if n:
        get_kernel("elementwise", "axpby_real", out.dtype)(*flat_geometry(n), a, x, b, y, out, n)
    return out


# -- public functions ------------------------------------------------------------------------------
def _operand(x, what):
    return x if is_scalar(x) else as_array(x, what)


def check_complex(op, dtype, what, runs=COMPLEX_BINARY):
    """TypeError for an opcode a complex build does not run (orderings, real-only math)."""
    if dtype.kind == "c" and op not in runs:
        raise TypeError(f"{what}: not defined for {dtype} arrays (complex arrays take + - * / == != exp log "
                        "sqrt abs conj)")


def _converted(x, scalar, kernel):
    """An operand in the kernel's dtype: an array converted (the narrower operand, as NumPy's loop
    converts it), a scalar as it is (the launcher converts it)."""
    return x if scalar or x.dtype is kernel or x.dtype == kernel else x.astype(kernel)


def _target(out, shape, result, what):
    """The array a result of dtype `result` goes to: `out` (checked; a dtype NumPy's same_kind rule
    casts to, as a += b writes) or a new array."""
    if isinstance(out, DeviceArray):
        promotion.check_cast(result, out, what)
    return make_out(out, shape, out.dtype if isinstance(out, DeviceArray) else result, what)


# (op, dtype) -> whether op of two dtype arrays computes in dtype, gives dtype and checks nothing; (op, dtype, float
# or int): the same for a float32 or float64 array (op) a Python number (the array-scalar opcode's `real` parameter)
_SAME_DTYPE = {}


def binary(op, a, b, out=None, what="binary operation"):
    """a (op) b for arrays and scalars (at least one array), broadcasting, with NumPy's type promotion
    (gpublas.core.promotion): each operand converted to the kernel dtype, the result converted to `out`'s.
    Every operator runs this: the common case (two contiguous arrays of one dtype and shape, no out, an op
    whose type resolution, learnt at its first call, keeps the dtype) goes straight to the flat kernel."""
    if out is None and type(a) is DeviceArray and a.c_contiguous:
        if type(b) is DeviceArray:
            dtype = a.dtype
            if dtype is b.dtype and a.shape == b.shape and b.c_contiguous and _SAME_DTYPE.get((op, dtype)):
                out, n = DeviceArray._new_like(a), a.size
                if n:
                    get_kernel("elementwise", "binary_real", dtype).launch(*flat_geometry(n), a, b, out, op, n)
                return out
        elif (type(b) is float or type(b) is int) and _SAME_DTYPE.get((op, a.dtype, type(b))):  # (op) a Python number
            return launch_unary(SCALAR_FORMS[op][0], a, DeviceArray._new_like(a), b)
    scalar_a, scalar_b = is_scalar(a), is_scalar(b)  # asked once each
    if scalar_a and scalar_b:
        raise TypeError(f"{what}: at least one operand must be an array (both are scalars)")
    if not scalar_a:
        a = as_array(a, what)
    if not scalar_b:
        b = as_array(b, what)
    loop, result, kernel = promotion.resolve(UFUNCS[op], a, b, what)
    if not (scalar_a or scalar_b) and a.dtype == b.dtype:
        _SAME_DTYPE[op, a.dtype] = result == kernel == a.dtype and not (kernel.kind == "c" and op not in COMPLEX_BINARY)
    elif (type(b) is float or type(b) is int) and not scalar_a:
        _SAME_DTYPE[op, a.dtype, type(b)] = result == kernel == a.dtype and kernel in _FLOAT_ARGS and op in SCALAR_FORMS
    if kernel.kind in "icu":  # complex and integer loops have rules of their own (bool, uint8 compute in int32)
        if kernel.kind == "c":
            check_complex(op, kernel, what)
        if loop.kind in "iu":
            for s in (a, b):
                if not promotion.fits(s, loop):
                    raise OverflowError(f"{what}: Python integer {s} out of bounds for {loop}")
        if op == POW and loop.kind in "iub" and scalar_b and b < 0:
            raise ValueError(f"{what}: integers to negative integer powers are not allowed (NumPy's rule)")
    shape = a.shape if scalar_b else b.shape if scalar_a or a.shape == b.shape else broadcast_shape(a.shape, b.shape)
    target = DeviceArray(shape, result) if out is None else _target(out, shape, result, what)
    buf = target if target.dtype is kernel or target.dtype == kernel else DeviceArray(shape, kernel)
    a, b = _converted(a, scalar_a, kernel), _converted(b, scalar_b, kernel)
    if op not in SCALAR_FORMS:  # no array-scalar opcode: the scalar as a 0-d array, broadcast
        a, b = (DeviceArray((), kernel).fill(x) if is_scalar(x) else x for x in (a, b))
        scalar_a = scalar_b = False
    if buf is out:  # only `out` can overlap an operand: a new array overlaps nothing
        a, b = a if scalar_a else unalias(a, buf), b if scalar_b else unalias(b, buf)
    if scalar_b:
        launch_unary(SCALAR_FORMS[op][0], a, buf, b)
    elif scalar_a:
        launch_unary(SCALAR_FORMS[op][1], b, buf, a)
    else:
        launch_binary(op, a, b, buf)
    return target if buf is target else impl.copy_to(target, buf)


def compare(op, a, b, out=None, what="comparison"):
    """a (cmp) b elementwise as a bool array, arrays and scalars, broadcasting, compared in the dtype
    NumPy promotes them to (a Python int outside an integer array's range: exactly, in int64)."""
    if is_scalar(a) and not is_scalar(b):
        return compare(SWAPPED[op], b, a, out, what)
    a, b = as_array(a, what), _operand(b, what)
    loop, _, kernel = promotion.resolve(COMPARISONS[op], a, b, what)
    check_complex(op, kernel, what, COMPLEX_COMPARE)
    kernel = kernel if promotion.fits(b, loop) else np.dtype(np.int64)
    a, b = _converted(a, False, kernel), _converted(b, is_scalar(b), kernel)
    out = make_out(out, broadcast_shape(a.shape, a.shape if is_scalar(b) else b.shape), BOOL, what)
    return launch_compare(op, unalias(a, out), b if is_scalar(b) else unalias(b, out), out)


def _unary(op, what, dtypes=FLOATS):
    ufunc = getattr(np, what, None)  # NumPy's ufunc of that name, if any: its type resolution applies

    def f(x, out=None):
        if out is None and type(x) is DeviceArray and x.c_contiguous and x.dtype in dtypes:  # no conversion
            return launch_unary(op, x, DeviceArray._new_like(x))
        x = as_array(x, what)
        result = x.dtype
        if x.dtype not in dtypes and isinstance(ufunc, np.ufunc) and x.dtype.kind in "biu":
            # NumPy's loop: sin(int32) in float64; -uint8 in uint8, which computes in int32 and wraps back
            result = promotion.unary_loop(ufunc, x.dtype, dtypes + tuple(promotion.COMPUTE), what)
            x = x.astype(promotion.COMPUTE.get(result, result))
        if x.dtype not in dtypes:
            raise TypeError(f"{what}: {' or '.join(map(str, dtypes))} arrays only, got {x.dtype}")
        if result != x.dtype:
            return impl.copy_to(make_out(out, x.shape, result, what), launch_unary(op, x, x))
        out = make_out(out, x.shape, x.dtype, what)
        return launch_unary(op, unalias(x, out), out)

    f.__name__ = f.__qualname__ = what
    return f


exp = _unary(EXP, "exp", FLOATS + COMPLEX)
exp.__doc__ = "Elementwise e**x (complex: e**re (cos im + i sin im))."
log = _unary(LOG, "log", FLOATS + COMPLEX)
log.__doc__ = "Elementwise natural logarithm (nan below 0, -inf at 0; complex: the principal branch)."
sqrt = _unary(SQRT, "sqrt", FLOATS + COMPLEX)
sqrt.__doc__ = "Elementwise square root (complex: the principal root, real part >= 0)."
_real_abs = _unary(ABS, "abs", NUMERIC)


def absolute(x, out=None):
    """Elementwise |x|; for a complex array a real one, hypot of the parts (NumPy's)."""
    x = as_array(x, "abs")
    if x.dtype.kind != "c":
        return _real_abs(x, out)
    return binary(_BIN["BIN_HYPOT"], x.real, x.imag, out, "abs")


def conjugate(x, out=None):
    """Elementwise complex conjugate (a copy for a real array, as NumPy's)."""
    x = as_array(x, "conjugate")
    if x.dtype.kind != "c":
        return x.copy() if out is None else binary(ADD, x, 0, out, "conjugate")
    out = make_out(out, x.shape, x.dtype, "conjugate")
    return launch_unary(CONJ, unalias(x, out), out)
tanh = _unary(TANH, "tanh")
tanh.__doc__ = "Elementwise hyperbolic tangent."
sigmoid = _unary(SIGMOID, "sigmoid")
sigmoid.__doc__ = "Elementwise 1 / (1 + exp(-x)), computed without overflow."
relu = _unary(RELU, "relu")
relu.__doc__ = "Elementwise max(x, 0) (nan stays nan)."
negative = _unary(NEG, "negative", NUMERIC + COMPLEX)
conj = conjugate
negative.__doc__ = "Elementwise -x."


def maximum(a, b, out=None):
    """Elementwise maximum of arrays or scalars, broadcasting; a NaN in either gives NaN (NumPy's)."""
    return binary(MAX, a, b, out, "maximum")


def minimum(a, b, out=None):
    """Elementwise minimum of arrays or scalars, broadcasting; a NaN in either gives NaN (NumPy's)."""
    return binary(MIN, a, b, out, "minimum")


def floor_divide(a, b, out=None):
    """a // b elementwise (NumPy's: the quotient rounded down; integer x // 0 is 0), broadcasting."""
    return binary(FLOOR_DIVIDE, a, b, out, "floor_divide")


def remainder(a, b, out=None):
    """a % b elementwise (NumPy's: the remainder has b's sign; integer x % 0 is 0), broadcasting."""
    return binary(REMAINDER, a, b, out, "remainder")


def power(a, b, out=None):
    """a ** b elementwise: array ** scalar, scalar ** array or array ** array (broadcasting)."""
    return binary(POW, a, b, out, "pow")


def clip(a, lo, hi, out=None):
    """minimum(maximum(a, lo), hi); lo and hi are scalars (one kernel), None, or arrays. An int array
    with a float bound is clipped in float64 (NumPy's promotion)."""
    a = as_array(a, "clip")
    dtype = np.result_type(a.dtype, *(v for v in (lo, hi) if is_scalar(v)))
    if dtype not in NUMERIC:
        raise TypeError(f"clip: {', '.join(map(str, NUMERIC))} arrays only, got {a.dtype}")
    a = a if a.dtype == dtype else a.astype(dtype)
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
    other dtype counts as cond != 0) or an ndarray; x, y: arrays (of two dtypes: converted to NumPy's
    result_type, float32 and float64 give float64), or scalars taking the array's dtype (at least one array)."""
    cond = as_array(cond, "where")
    arrays = [as_array(v, "where") for v in (x, y) if not is_scalar(v)]
    if not arrays:
        raise TypeError("where: x or y must be an array (both are scalars)")
    if len(arrays) == 2 and arrays[0].dtype != arrays[1].dtype:  # two arrays: NumPy's result_type
        wide = np.result_type(arrays[0].dtype, arrays[1].dtype)
        arrays = [v if v.dtype == wide else v.astype(wide) for v in arrays]
        x, y = arrays
    dtype = common_dtype(arrays[0], arrays[-1], "where", NUMERIC + COMPLEX)
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
    if layout.all_flat(x, y, out):
        return launch_axpby(a, unalias(x, out), b, unalias(y, out), out)
    return binary(ADD, binary(MUL, x, a), binary(MUL, y, b), out, "axpby")  # views: two passes


# NumPy's names; `abs` and `pow` shadow the builtins only as attributes of this module.
abs = absolute  # noqa: A001
pow = power  # noqa: A001

provide(negative=negative, absolute=absolute, clip=clip, conjugate=conjugate)  # -a, abs(a), a.clip(), a.conj()
