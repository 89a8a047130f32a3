"""NumPy's tests of values and the comparisons built on them, on the device: isnan, isinf, isfinite,
nan_to_num, isclose, allclose, array_equal, and round (around). Each is a few launches of
gpublas.core.elementwise (compare, where, abs; maximum / minimum of bool arrays as `or` / `and`);
allclose and array_equal reduce on the device (ops.all) and read one bool back, as NumPy returns one.

    m = gpublas.isnan(x);  y = gpublas.nan_to_num(x, nan=-1.0);  gpublas.allclose(a, b, rtol=1e-6)
    r = gpublas.round(x, 2)       # rint(x * 100) / 100, halves to even, as NumPy's

Complex arrays: isnan / isinf / isfinite / nan_to_num / round work on the parts, as NumPy's.
Integer and bool arrays are never NaN nor infinite (isnan: all False; nan_to_num: a copy).
"""
import numpy as np

from . import ops
from ..runtime import dtypes
from ..core import elementwise as ew
from ..core.array import DeviceArray
from ..core.checks import as_array, is_scalar, make_out
from ..core.cumath import rint
from ..core.indexing import copy_to

BOOL = np.dtype(np.bool_)


def _test(x, out, what, real_test, combine, integers):
    """A bool array: real_test on a float x, combine(test(real), test(imag)) on a complex one, `integers`
    everywhere on the others."""
    x = as_array(x, what)
    if x.dtype.kind == "c":
        r = combine(real_test(x.real), real_test(x.imag))
        return r if out is None else copy_to(make_out(out, x.shape, BOOL, what), r)
    if x.dtype.kind != "f" and x.dtype not in dtypes.HALVES:
        return make_out(out, x.shape, BOOL, what).fill(integers)
    return real_test(x, out)


def isnan(x, out=None):
    """True where x is NaN (x != x)."""
    return _test(x, out, "isnan", lambda v, o=None: ew.compare(ew.NE, v, v, o, "isnan"), ew.maximum, False)


def isinf(x, out=None):
    """True where x is +inf or -inf."""
    return _test(x, out, "isinf", lambda v, o=None: ew.compare(ew.EQ, ew.absolute(v), np.inf, o, "isinf"),
                 ew.maximum, False)


def isfinite(x, out=None):
    """True where x is neither infinite nor NaN (|x| < inf is False for NaN)."""
    return _test(x, out, "isfinite", lambda v, o=None: ew.compare(ew.LT, ew.absolute(v), np.inf, o, "isfinite"),
                 ew.minimum, True)


def _finfo(dtype):
    return np.finfo(dtype) if dtype not in dtypes.HALVES or dtype == np.float16 else __import__("ml_dtypes").finfo(dtype)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """x with NaN replaced by `nan`, +inf by `posinf` and -inf by `neginf` (default: the dtype's largest
    and lowest finite values); in place when copy=False."""
    x = as_array(x, "nan_to_num")
    out = x.copy() if copy else x
    if out.dtype.kind == "c":
        for part in (out.real, out.imag):
            nan_to_num(part, False, nan, posinf, neginf)
        return out
    if out.dtype.kind != "f" and out.dtype not in dtypes.HALVES:
        return out
    info = _finfo(out.dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    ew.where(isnan(out), nan, out, out=out)
    ew.where(ew.compare(ew.EQ, out, np.inf), posinf, out, out=out)
    return ew.where(ew.compare(ew.EQ, out, -np.inf), neginf, out, out=out)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise (b finite), or a == b (equal infinities); NaNs equal
    each other when equal_nan. A bool array of the broadcast shape (NumPy 2's formula, b in float)."""
    if is_scalar(a) and is_scalar(b):
        raise TypeError("isclose: at least one of a and b must be an array")
    a = a if is_scalar(a) else as_array(a, "isclose")
    b = float(b) if is_scalar(b) else as_array(b, "isclose")
    if isinstance(b, DeviceArray) and b.dtype.kind in "biu":
        b = b.astype(np.float64)  # NumPy: y converted to result_type(y, 1.0)
    tol = atol + rtol * abs(b) if is_scalar(b) else ew.binary(ew.ADD, ew.binary(ew.MUL, ew.absolute(b), rtol), atol)
    close = ew.compare(ew.LE, ew.absolute(ew.binary(ew.SUB, a, b, what="isclose")), tol, what="isclose")
    if is_scalar(b):
        close = close if np.isfinite(b) else close.fill(False)
    else:
        close = ew.minimum(close, isfinite(b))
    close = ew.maximum(close, ew.compare(ew.EQ, a, b, what="isclose"))
    if equal_nan:
        close = ew.maximum(close, ew.minimum(_nan(a), _nan(b)))
    return close


def _nan(v):
    """isnan of an array, or of a scalar as a 0-d bool array."""
    return isnan(v) if isinstance(v, DeviceArray) else DeviceArray((), BOOL).fill(bool(np.isnan(v)))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether isclose holds for every element: a Python bool (one device reduction read back)."""
    return bool(ops.all(isclose(a, b, rtol, atol, equal_nan)))


def array_equal(a1, a2, equal_nan=False):
    """Whether a1 and a2 have one shape and equal elements (NaNs equal each other when equal_nan):
    a Python bool (one device reduction read back)."""
    a1, a2 = (x if is_scalar(x) else as_array(x, "array_equal") for x in (a1, a2))
    if getattr(a1, "shape", ()) != getattr(a2, "shape", ()):
        return False
    if not is_scalar(a1) and a1.size == 0:
        return True
    eq = ew.compare(ew.EQ, a1, a2, what="array_equal")
    if equal_nan:
        eq = ew.maximum(eq, ew.minimum(_nan(a1), _nan(a2)))
    return bool(ops.all(eq))


def round(a, decimals=0, out=None):  # noqa: A001 (NumPy's name)
    """a rounded to `decimals` places, halves to even (NumPy's: rint(a * 10**d) / 10**d, or
    rint(a / 10**-d) * 10**-d for d < 0); integers computed in float64 for d < 0, else copied."""
    a = as_array(a, "round")
    decimals = int(decimals)
    if a.dtype.kind == "c":
        r = a.copy()
        for part in (r.real, r.imag):
            copy_to(part, round(part, decimals))
    elif a.dtype.kind in "iu":  # (bool goes the float way, as NumPy's: rint(bool) is float16)
        r = a.copy() if decimals >= 0 else round(a.astype(np.float64), decimals).astype(a.dtype)
    elif decimals == 0:
        r = rint(a)
    elif decimals > 0:
        f = 10.0 ** decimals
        r = ew.binary(ew.DIV, rint(ew.binary(ew.MUL, a, f)), f)
    else:
        f = 10.0 ** -decimals
        r = ew.binary(ew.MUL, rint(ew.binary(ew.DIV, a, f)), f)
    return r if out is None else copy_to(make_out(out, a.shape, out.dtype, "round"), r)


around = round
