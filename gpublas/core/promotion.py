"""NumPy's type promotion for gpublas' elementwise maps and comparisons: the dtypes come from NumPy's
own ufunc type resolution (`ufunc.resolve_dtypes`, NEP 50), so gpublas promotes exactly as NumPy 2:

    float32 + float64 -> float64     int32 + float32 -> float64     int32 / int32 -> float64
    float32 * 2.0 -> float32         int32 + 2.5 -> float64         uint8 + 3 -> uint8 (wraps)
    float32 + np.float64(2) -> float64 (NumPy scalars are strong, Python's weak)

`resolve` gives (loop dtype, result dtype, kernel dtype): NumPy converts every operand to the loop
dtype and computes there; gpublas' kernels (elementwise.cu) are built for KERNEL_DTYPES, and a loop
dtype outside them computes in COMPUTE[loop] with the result converted back by a C cast (uint8 in
int32: the cast wraps modulo 256 as NumPy's uint8 arithmetic; uint32 in int64; bool in int32: nonzero
is True, so bool + bool is logical or, as NumPy's). A new dtype is one entry in each table, not a new branch.
"""
import functools
import numbers

import numpy as np

from ..runtime import dtypes
from .array import DTYPES, DeviceArray

KERNEL_DTYPES = dtypes.FLOATS + tuple(np.dtype(t) for t in (np.int32, np.int64, np.uint64)) + dtypes.COMPLEX
# float16/bfloat16 compute in float32 (their kernels' own rule); the narrow integers and bool here, each
# in a signed type that holds every value, converted back by a C cast (modulo 2^bits, as NumPy wraps)
COMPUTE = {np.dtype(t): np.dtype(np.int32) for t in (np.int8, np.int16, np.uint8, np.uint16, np.bool_)}
COMPUTE[np.dtype(np.uint32)] = np.dtype(np.int64)


def operand_dtype(x):
    """What NumPy's type resolution sees of an operand: an array's or NumPy scalar's dtype (strong),
    or the Python type int, float or complex (a weak scalar that takes the array's kind where it fits)."""
    if isinstance(x, (DeviceArray, np.ndarray, np.generic)):
        return x.dtype
    if isinstance(x, numbers.Integral):
        return int
    if isinstance(x, numbers.Real):
        return float
    if isinstance(x, numbers.Complex):
        return complex
    raise TypeError(f"unsupported operand type {type(x).__name__}")


def _describe(x):
    return f"{x.dtype} array" if isinstance(x, (DeviceArray, np.ndarray)) else f"{type(x).__name__} scalar"


@functools.lru_cache(maxsize=1024)
def _resolved(ufunc, ta, tb):
    """(loop, result, kernel) for operand dtypes (or int/float) ta, tb; None when gpublas cannot hold or
    compute the result. Kept: an operator asks the same few questions at every launch."""
    loop, _, result = ufunc.resolve_dtypes((ta, tb, None))
    kernel = COMPUTE.get(loop, loop)
    return (loop, result, kernel) if kernel in KERNEL_DTYPES and result in DTYPES else (loop, None, None)


@functools.lru_cache(maxsize=256)
def unary_loop(ufunc, dtype, allowed, what):
    """The dtype NumPy's unary `ufunc` computes an integer or bool array of `dtype` in (sin of int32:
    float64; of uint8 or bool: float16), or TypeError when gpublas' kernel has no such loop."""
    loop = ufunc.resolve_dtypes((dtype, None))[0]
    if loop not in allowed:
        raise TypeError(f"{what}: NumPy computes a {dtype} array in {loop}, which gpublas' {what} does not take")
    return loop


def resolve(ufunc, a, b, what):
    """(loop, result, kernel) dtypes of ufunc(a, b) as NumPy resolves them, or TypeError naming the
    operands when NumPy has no loop for them or gpublas cannot hold or compute the result."""
    try:
        loop, result, kernel = _resolved(ufunc, operand_dtype(a), operand_dtype(b))
    except TypeError as e:  # NumPy's own refusal (bool - bool, ...)
        raise TypeError(f"{what}: not defined for {_describe(a)} and {_describe(b)} ({e})") from None
    if result is None:
        raise TypeError(f"{what}: NumPy computes {_describe(a)} and {_describe(b)} in {loop}, which gpublas "
                        f"does not hold; convert with .astype() first")
    return loop, result, kernel


def check_cast(result, out, what):
    """NumPy's same_kind rule for writing a `result`-dtype value into `out` (a += b)."""
    if result != out.dtype and not np.can_cast(result, out.dtype, "same_kind"):
        raise TypeError(f"{what}: cannot write the {result} result into a {out.dtype} array (NumPy's "
                        f"same_kind casting rule); convert with .astype() first")


def fits(value, loop):
    """Whether a Python int scalar converts to the integer loop dtype (NumPy 2 raises OverflowError for
    uint8 array + 300, and compares it exactly)."""
    if loop.kind not in "iu" or not isinstance(value, numbers.Integral) or isinstance(value, np.generic):
        return True
    info = np.iinfo(loop)
    return info.min <= value <= info.max
