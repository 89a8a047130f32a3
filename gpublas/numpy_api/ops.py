"""Arithmetic functions and what DeviceArray's operators (defined in its class body) call.

    c = 2 - a * b;  a += row;  a /= a.sum(axis=1, keepdims=True);  c = a @ b;  q, r = a // 3, a % 3

Rules (NumPy's, narrowed to what the kernels hold):
  * operands are DeviceArrays, Python or NumPy scalars, or ndarrays (copied to the device first);
  * dtypes promote as NumPy 2's (gpublas.core.promotion): float32 + float64 is float64, a Python scalar
    takes the array's kind where it fits (float32 * 2.0 is float32), a NumPy scalar counts as an array;
  * shapes broadcast as in NumPy (elementwise.broadcast_shape);
  * `a op= b` writes into a; it raises ValueError when broadcasting would change a's shape. An
    operand that overlaps a other than element for element (a row of a, say) is copied first.
"""
import math

import numpy as np

from ..blas import blas3
from ..core import reduction
from . import contract
from ..core import elementwise as ew
from ..core.array import DeviceArray, provide, to_device
from ..core.checks import as_array, is_scalar, normalize_axes

OPCODES = {"add": ew.ADD, "subtract": ew.SUB, "multiply": ew.MUL, "divide": ew.DIV, "pow": ew.POW,
           "floor_divide": ew.FLOOR_DIVIDE, "remainder": ew.REMAINDER, "bitwise_and": ew.AND, "bitwise_or": ew.OR,
           "bitwise_xor": ew.XOR, "left_shift": ew.LSHIFT, "right_shift": ew.RSHIFT}
BITWISE = frozenset(n for n, op in OPCODES.items() if op in (ew.AND, ew.OR, ew.XOR, ew.LSHIFT, ew.RSHIFT))


def _operand(x):
    return isinstance(x, (DeviceArray, np.ndarray)) or is_scalar(x)


def _other(name, b):
    """The other operand of operator `name`, or None when it is of a type we do not take; a Python
    bool counts for the bitwise operators only (m & True), as NumPy's bool scalar."""
    if type(b) is bool and name in BITWISE:
        return np.bool_(b)
    return b if _operand(b) else None


def add(a, b, out=None):
    """a + b elementwise (arrays or scalars, broadcasting)."""
    return ew.binary(ew.ADD, a, b, out, "add")


def subtract(a, b, out=None):
    """a - b elementwise (arrays or scalars, broadcasting)."""
    return ew.binary(ew.SUB, a, b, out, "subtract")


def multiply(a, b, out=None):
    """a * b elementwise (arrays or scalars, broadcasting)."""
    return ew.binary(ew.MUL, a, b, out, "multiply")


def divide(a, b, out=None):
    """a / b elementwise (arrays or scalars, broadcasting)."""
    return ew.binary(ew.DIV, a, b, out, "divide")


# -- what the operators call ------------------------------------------------------------------------
def forward(name, a, b):
    """a (op) b for `a.__op__(b)`; NotImplemented for an operand type we do not take."""
    if type(b) is not DeviceArray:  # an array is taken as it is (the common case: no call to ask)
        b = _other(name, b)
        if b is None:
            return NotImplemented
    return ew.binary(OPCODES[name], a, b, None, name)


def reflected(name, a, b):
    """b (op) a for `a.__rop__(b)`."""
    b = _other(name, b)
    if b is None:
        return NotImplemented
    return ew.binary(OPCODES[name], b, a, None, name)


def inplace(name, a, b):
    """a (op)= b: writes into a, whose shape must not change."""
    b = _other(name, b)
    if b is None:
        return NotImplemented
    if not is_scalar(b):
        shape = b.shape if isinstance(b, DeviceArray) else np.shape(b)  # np.shape would dispatch to gpublas
        if shape != a.shape and ew.broadcast_shape(a.shape, shape) != a.shape:
            raise ValueError(f"{name}: in-place operation on shape {a.shape} with shape {shape} "
                             f"would give shape {ew.broadcast_shape(a.shape, shape)}")
    ew.binary(OPCODES[name], a, b, a, name)
    return a


def _matmul_operand(other, like):
    """A DeviceArray for the other side of @: ndarrays keep their dtype, lists and scalars take the
    DeviceArray's."""
    if isinstance(other, DeviceArray):
        return other
    return to_device(other if isinstance(other, np.ndarray) else np.asarray(other, dtype=like.dtype))


def matmul(a, b):
    """a @ b for `a.__matmul__(b)`: both operands converted to the dtype NumPy's matmul promotes them
    to (the narrower one converted first, float32 @ float64 in float64, float32 @ complex64 in
    complex64), then blas3.matmul, which as every BLAS routine takes one dtype (gemm(a32, b64) still raises)."""
    a, b = _matmul_operand(a, b), _matmul_operand(b, a)
    dtype = np.result_type(a.dtype, b.dtype)
    if dtype not in blas3.MATMUL_TYPES:
        raise TypeError(f"matmul: {a.dtype} @ {b.dtype} gives {dtype} in NumPy; gpublas multiplies "
                        f"{', '.join(map(str, blas3.MATMUL_TYPES))} matrices: convert with .astype() first")
    return blas3.matmul(a if a.dtype == dtype else a.astype(dtype), b if b.dtype == dtype else b.astype(dtype))


def dot(a, b, out=None):
    """NumPy's dot (gpublas.numpy_api.contract.dot): a @ b for vectors and matrices (1-D with 1-D: a Python
    float, as blas3.matmul gives), a * b with a 0-d or scalar operand, N-D operands by NumPy's rule (the
    sum over a's last axis and b's second-to-last)."""
    if out is None and not (is_scalar(b) or np.ndim(b) == 0 or a.ndim == 0) and a.ndim <= 2 and np.ndim(b) <= 2 \
            and np.result_type(a.dtype, b.dtype if isinstance(b, DeviceArray) else np.asarray(b).dtype) in \
            blas3.GEMM_FLOATS:
        return matmul(a, b)
    return contract.dot(a, b, out)


def var(a, axis=None, ddof=0, keepdims=False):
    """Variance: mean(|a - a.mean(axis)|**2) * n / (n - ddof), n the count reduced (NumPy's two-pass
    formula; ints in float64)."""
    a = as_array(a, "var")
    d = a - reduction.mean(a, axis, keepdims=True)
    v = reduction.mean(d * d, axis, keepdims)
    n = a.size // max(v.size, 1) if a.size else 0
    return v if not ddof else v * (n / (n - ddof) if n > ddof else np.inf)  # NumPy: inf (nan for 0) past n


def std(a, axis=None, ddof=0, keepdims=False):
    """Standard deviation: sqrt(var(a, axis, ddof))."""
    return ew.sqrt(var(a, axis, ddof, keepdims))


# -- comparisons and truth tests ----------------------------------------------------------------------
COMPARISONS = {"equal": ew.EQ, "not_equal": ew.NE, "less": ew.LT, "less_equal": ew.LE, "greater": ew.GT,
               "greater_equal": ew.GE}


def comparison(name, a, b):
    """a (cmp) b for `a.__eq__(b)` and the others: a bool array; NotImplemented (so Python falls
    back to its default, e.g. `a == None` is False) for an operand type we do not take."""
    if not _operand(b):
        return NotImplemented
    return ew.compare(COMPARISONS[name], a, b, None, name)


def _comparison_function(name):
    def f(a, b, out=None):
        return ew.compare(COMPARISONS[name], a, b, out, name)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}(a, b) as a bool array (arrays or scalars, broadcasting)."
    return f


equal, not_equal, less, less_equal, greater, greater_equal = (_comparison_function(n) for n in COMPARISONS)


def _truth(a, axis, keepdims, what, is_any):
    a = as_array(a, what)
    nonzero = a.astype(np.int32) if a.dtype in (np.dtype(np.bool_), np.dtype(np.uint8)) else \
        ew.compare(ew.NE, a, 0, what=what).astype(np.int32)
    n = a.size if axis is None else math.prod(a.shape[i] for i in normalize_axes(axis, a.ndim, what))
    if n == 0:  # NumPy: any() of nothing is False, all() of nothing is True
        shape = reduction.sum(nonzero, axis, keepdims).shape
        return DeviceArray(shape, np.bool_).fill(not is_any)
    folded = reduction.max(nonzero, axis, keepdims) if is_any else reduction.min(nonzero, axis, keepdims)
    return folded.astype(np.bool_)


def any(a, axis=None, keepdims=False):  # noqa: A001 (NumPy's name)
    """True where any element (over all, or along `axis`) is nonzero; a bool array (0-d for all)."""
    return _truth(a, axis, keepdims, "any", True)


def all(a, axis=None, keepdims=False):  # noqa: A001
    """True where every element (over all, or along `axis`) is nonzero; a bool array (0-d for all)."""
    return _truth(a, axis, keepdims, "all", False)


provide(forward=forward, reflected=reflected, inplace=inplace, matmul=matmul, comparison=comparison, any=any,
        all=all, dot=dot, var=var, std=std)  # DeviceArray's operators and methods
