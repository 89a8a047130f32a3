"""Operand validation shared by every routine: each check runs before any launch and raises a
Python exception naming the routine, the operand and what was wrong with it.

    dtype = check_operands("gemm", a=a, b=b)     # BLAS: float32/float64 DeviceArrays of one dtype
    x = as_array(x, "exp"); check_float(x, "exp")
    out = make_out(out, shape, dtype, "add")     # a given `out` checked, or a new array
"""
import builtins
import numbers

import numpy as np

from ..runtime import dtypes
from .array import DeviceArray, to_device

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # what the BLAS routines take


def is_scalar(x):
    """A Python or NumPy number (not a bool: True + x is almost always a mistake)."""
    t = type(x)
    if t is float or t is int:  # the common cases first: numbers.Number's isinstance is an ABC check
        return True
    if t is DeviceArray:
        return False
    return isinstance(x, numbers.Number) and not isinstance(x, bool) or isinstance(x, np.generic)


def is_fill_value(x):
    """A scalar an item assignment writes to every selected element: a number or a bool (is_scalar
    refuses Python's bool for arithmetic, where True + x is a mistake; a[mask] = True is not)."""
    return is_scalar(x) or isinstance(x, (bool, np.bool_))


def as_array(x, what="argument"):
    """A DeviceArray from a DeviceArray or anything np.asarray takes (copied to the device)."""
    if isinstance(x, DeviceArray):
        return x
    if isinstance(x, (np.ndarray, list, tuple)):
        return to_device(np.asarray(x))
    raise TypeError(f"{what}: expected a DeviceArray, an ndarray or a scalar, got {type(x).__name__}")


def check_float(a, what):
    """A float array of any precision: float16, bfloat16, float32 or float64."""
    if a.dtype not in dtypes.FLOATS:
        raise TypeError(f"{what}: float arrays ({', '.join(map(str, dtypes.FLOATS))}) only, got {a.dtype}")


def common_dtype(a, b, what, allowed=FLOATS):
    """The dtype of an operation on arrays a and b (equal, and one of `allowed`) or TypeError."""
    if a.dtype != b.dtype:
        raise TypeError(f"{what}: arrays of {a.dtype} and {b.dtype} cannot be mixed; "
                        f"convert one with .astype()")
    if a.dtype not in allowed:
        raise TypeError(f"{what}: {' or '.join(str(d) for d in allowed)} arrays only, got {a.dtype}")
    return a.dtype


def make_out(out, shape, dtype, what):
    """`out` checked against the result's shape and dtype, or a new array."""
    if out is None:
        return DeviceArray(shape, dtype)
    if not isinstance(out, DeviceArray):
        raise TypeError(f"{what}: out must be a DeviceArray, got {type(out).__name__}")
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(f"{what}: out has shape {out.shape} and dtype {out.dtype}; the result has shape "
                         f"{shape} and dtype {dtype}")
    return out


def check_operands(routine, floats=FLOATS, **arrays):
    """Checks that every named operand is a DeviceArray of one dtype among `floats` (float32 and float64;
    the GEMMs also float16 and bfloat16); returns the dtype (the BLAS routines' check)."""
    for name, a in arrays.items():
        if not isinstance(a, DeviceArray):
            raise TypeError(f"{routine}: {name} must be a DeviceArray, got {type(a).__name__}")
        if a.dtype not in floats:
            raise ValueError(f"{routine}: {name} has dtype {a.dtype}; {routine} takes "
                             f"{', '.join(str(d) for d in floats[:-1])} or {floats[-1]}")
    dtypes = {a.dtype for a in arrays.values()}
    if len(dtypes) > 1:
        desc = ", ".join(f"{n} {a.dtype} {a.shape}" for n, a in arrays.items())
        raise ValueError(f"{routine}: operands have mixed dtypes ({desc}); convert with astype() first")
    return dtypes.pop()


def normalize_axes(axis, ndim, what):
    """`axis` (an int or a tuple of ints, negative ones counting from the end) as a sorted tuple of
    axes in [0, ndim); NumPy's AxisError (a ValueError) for one out of bounds, ValueError for a repeat."""
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool):
            raise TypeError(f"{what}: an axis must be an int, got {ax!r}")
        if not -ndim <= ax < ndim:
            raise np.exceptions.AxisError(f"{what}: axis {ax} is out of bounds for an array of dimension {ndim}")
    normalized = sorted(int(ax) % ndim for ax in axes)
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{what}: duplicate value in axis {axis!r}")
    return tuple(normalized)


# -- views at the BLAS boundary ------------------------------------------------------------------------
def contiguous(a, stream=None):
    """`a`, or a C-contiguous copy of a view (for kernels that take flat arrays)."""
    return a if a.c_contiguous else a.copy(stream)


def write_back(view, result, stream=None):
    """Copies `result` (a contiguous stand-in computed for `view`) into `view`; returns view."""
    if result is not view:
        view.copy_from(result, stream)
    return view


def vector(a, stream=None):
    """(array, inc) for a level-1 routine that walks element i at inc * i (BLAS's incx): a contiguous
    array of any shape (inc 1) or a view with one axis longer than 1 (its stride, any sign) as it is;
    any other layout copied to a contiguous temporary."""
    if a.c_contiguous:
        return a, 1
    long_axes = [s for d, s in zip(a.shape, a.strides) if d > 1]
    if len(long_axes) == 1:
        return a, long_axes[0] // a.itemsize
    return a.copy(stream), 1


INT_MAX = 2 ** 31 - 1  # the kernels take leading dimensions as int


def leading_dimension(a):
    """The leading dimension (elements) of a's last two axes when they are a matrix cuBLAS could take
    in row-major terms: unit column stride and rows evenly spaced at least a row apart (a[:, i:j],
    a[::2], a stack's a[:, :, 2:]); None for any other layout."""
    rows, cols = a.shape[-2:]
    if a.c_contiguous:
        return builtins.max(cols, 1)
    item = a.itemsize
    row = a.strides[-2] if rows > 1 else cols * item
    col = a.strides[-1] if cols > 1 else item
    if col == item and row % item == 0 and cols * item <= row <= INT_MAX * item:
        return builtins.max(row // item, 1)
    return None


def swap_last(a):
    """The view of `a` (2-D or a stack) with its last two axes swapped: a.T for a matrix."""
    return a.transpose(tuple(range(a.ndim - 2)) + (a.ndim - 1, a.ndim - 2))


def blas_matrix(a, trans=False, stream=None):
    """(matrix, trans, ld) for an operand (2-D, or a stack of matrices on its last two axes) of a
    routine that, as cuBLAS in row-major terms, takes rows ld elements apart (ld >= cols) with unit
    column stride, and a transpose flag: a view of that layout is taken as it is (a[:, i:j], a[::2]);
    the transpose of one (a.T) is taken with the flag flipped; any other layout is copied to a
    contiguous temporary."""
    ld = leading_dimension(a)
    if ld is not None:
        return a, trans, ld
    t = swap_last(a)
    ld = leading_dimension(t)
    if ld is not None:
        return t, not trans, ld
    a = a.copy(stream)
    return a, trans, builtins.max(a.shape[-1], 1)
