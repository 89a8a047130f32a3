"""NumPy's bitwise and logical ufuncs on the device (elementwise.cu's BIN_AND ... BIN_RSHIFT and
EW_INVERT, comparisons for the logical ones): what DeviceArray's & | ^ ~ << >> call.

    m = (a > 1) & (a < 5);  a[~m] = 0;  flags = bits >> 3 & 1;  gpublas.logical_xor(a, b)

Rules (NumPy's): the bitwise functions take integer and bool arrays (a float operand raises
TypeError, as NumPy's), promote as NumPy 2 (gpublas.core.promotion: int8 and uint8 compute in int32, uint32
in int64, and convert back), and take Python bools as bool scalars (`m & True`). A shift by the
width or more gives 0 (or -1 for a negative number shifted right), as NumPy's. ~ of a bool array is
logical not. The logical functions take any dtype, nonzero counting as True, and return bool arrays.
"""
import numpy as np

from ..core import elementwise as ew
from ..core.array import provide
from ..core.checks import as_array

BOOL = np.dtype(np.bool_)
INTEGERS = tuple(d for d in ew.NUMERIC if d.kind in "iu")  # the integer builds of elementwise.cu


def bool_scalar(x):
    """A Python bool as NumPy's bool scalar, which gpublas' arithmetic takes (it refuses Python's bool,
    where True + x is a mistake; m & True is not)."""
    return np.bool_(x) if isinstance(x, bool) else x


def _bitwise(op, name, doc):
    def f(a, b, out=None):
        return ew.binary(op, bool_scalar(a), bool_scalar(b), out, name)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


bitwise_and = _bitwise(ew.AND, "bitwise_and", "a & b elementwise (integer or bool arrays and scalars, broadcasting).")
bitwise_or = _bitwise(ew.OR, "bitwise_or", "a | b elementwise (integer or bool arrays and scalars, broadcasting).")
bitwise_xor = _bitwise(ew.XOR, "bitwise_xor", "a ^ b elementwise (integer or bool arrays and scalars, broadcasting).")
left_shift = _bitwise(ew.LSHIFT, "left_shift", "a << b elementwise: 0 once b reaches the width (NumPy's).")
right_shift = _bitwise(ew.RSHIFT, "right_shift", "a >> b elementwise (arithmetic for signed types; by the width "
                                                 "or more: 0, or -1 for a negative a, as NumPy's).")
_integer_invert = ew._unary(ew.INVERT, "invert", INTEGERS)


def invert(x, out=None):
    """~x elementwise: the bits flipped for an integer array (uint8 200 -> 55), logical not for a bool one."""
    x = as_array(x, "invert")
    if x.dtype == BOOL:
        return ew.compare(ew.EQ, x, np.False_, out, "invert")
    return _integer_invert(x, out)


bitwise_not = bitwise_invert = invert


def _truth(x, what):
    """x as a bool array (nonzero is True) or a Python bool for a scalar."""
    if ew.is_scalar(x) or isinstance(x, bool):
        return np.bool_(x)
    x = as_array(x, what)
    return x if x.dtype == BOOL else ew.compare(ew.NE, x, 0, what=what)


def _logical(op, name):
    def f(a, b, out=None):
        return ew.binary(op, _truth(a, name), _truth(b, name), out, name)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"NumPy's {name}: a bool array, nonzero elements of any dtype counting as True (broadcasting)."
    return f


logical_and, logical_or, logical_xor = (_logical(op, n) for op, n in ((ew.AND, "logical_and"), (ew.OR, "logical_or"),
                                                                      (ew.XOR, "logical_xor")))


def logical_not(x, out=None):
    """NumPy's logical_not: a bool array, True where x is zero (any dtype)."""
    return ew.compare(ew.EQ, as_array(x, "logical_not"), 0, out, "logical_not")


provide(invert=invert)  # DeviceArray's ~a
