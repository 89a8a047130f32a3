"""Running sums and products along an axis, and products over axes (cuda_src/cumulative.cu), as NumPy's
cumsum, cumprod and prod: the result dtype is NumPy's (bool and integers narrower than int64 give int64,
floats and complex keep theirs, `dtype=` chooses another).

    c = gpublas.cumsum(x, axis=0);  p = gpublas.prod(x, axis=(0, 2), keepdims=True)

Rows with few elements per thread (or many rows) are walked one thread per row, left to right as NumPy
does; long rows of few-row arrays are cut into chunks: chunk totals, their running total (the same
kernels again), then each chunk walked from its carry (the order of the sums then differs from NumPy's
by the chunking, as any parallel scan's does). An axis other than the last moves last through a copy.
"""
import math

import numpy as np

from ..runtime import dtypes, source
from ..core.array import DeviceArray
from ..core.checks import as_array, normalize_axes
from ..runtime.launch import ceil_div, geometry_1d, get_kernel, simulated
from .ops import multiply

_OPS = source.int_defines("cumulative.cu", "CUM_")
SUM, PROD = _OPS["CUM_SUM"], _OPS["CUM_PROD"]
CHUNK = {True: 8192, False: 256}  # elements a thread walks in a long row: on the simulator, on a GPU
PARALLEL = 4096                   # rows at least this many are walked one thread per row


def result_dtype(a, dtype):
    """NumPy's: dtype if given, else int64 for bool and signed integers narrower than it (uint64 for unsigned
    ones), else a's."""
    if dtype is not None:
        return dtypes.canonical(dtype)
    if a.dtype.kind == "u" and a.dtype.itemsize < 8 and np.dtype(np.uint64) in dtypes.TABLE:
        return np.dtype(np.uint64)
    if a.dtype.kind == "b" or a.dtype.kind in "iu" and a.dtype.itemsize < 8:  # uint64 when gpublas holds it
        return np.dtype(np.int64)
    return a.dtype


def _chunk(rows, n):
    return n if rows >= PARALLEL else min(n, CHUNK[simulated()])


def _scan_rows(x, op):
    """The running op along each row of x (rows, n), a new array of x's dtype."""
    rows, n = x.shape
    y = DeviceArray(x.shape, x.dtype)
    if x.size == 0:
        return y
    chunk = _chunk(rows, n)
    chunks = ceil_div(n, chunk)
    carry = None
    if chunks > 1:
        totals = DeviceArray((rows, chunks), x.dtype)
        get_kernel("cumulative", "fold_chunks_real", x.dtype)(*geometry_1d(totals.size), x, totals, rows, n, chunk, op)
        carry = _scan_rows(totals, op)
    get_kernel("cumulative", "scan_chunks_real", x.dtype)(*geometry_1d(rows * chunks), x, y, carry, rows, n, chunk, op)
    return y


def _fold_rows(x, op):
    """op over each row of x (rows, n >= 1) as a (rows,) array of x's dtype."""
    rows, n = x.shape
    chunk = _chunk(rows, n)
    chunks = ceil_div(n, chunk)
    out = DeviceArray((rows, chunks), x.dtype)
    get_kernel("cumulative", "fold_chunks_real", x.dtype)(*geometry_1d(out.size), x, out, rows, n, chunk, op)
    return out.reshape(rows) if chunks == 1 else _fold_rows(out, op)


def _cumulative(a, axis, dtype, out, op, what):
    a = as_array(a, what)
    if out is not None:
        raise NotImplementedError(f"{what}: out= is not implemented; assign the result")
    if axis is None:
        a, axis = a.reshape(-1), 0
    if a.ndim == 0:
        a, axis = a.reshape(1), 0
    ax = normalize_axes(axis, a.ndim, what)[0]
    moved = a if ax == a.ndim - 1 else a.transpose(tuple(i for i in range(a.ndim) if i != ax) + (ax,))
    rdtype = result_dtype(a, dtype)
    x = moved if moved.dtype == rdtype and moved.c_contiguous else moved.astype(rdtype)
    n = x.shape[-1]
    y = _scan_rows(x.reshape(-1 if n else 0, n), op).reshape(x.shape)
    if ax == a.ndim - 1:
        return y
    return y.transpose(tuple(range(ax)) + (a.ndim - 1,) + tuple(range(ax, a.ndim - 1))).copy()


def cumsum(a, axis=None, dtype=None, out=None):
    """The running sum along `axis` (None: the flattened array), as numpy.cumsum."""
    return _cumulative(a, axis, dtype, out, SUM, "cumsum")


def cumprod(a, axis=None, dtype=None, out=None):
    """The running product along `axis` (None: the flattened array), as numpy.cumprod."""
    return _cumulative(a, axis, dtype, out, PROD, "cumprod")


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """The product over `axis` (None: all elements; an int or a tuple), as numpy.prod (1 for no elements)."""
    a = as_array(a, "prod")
    if out is not None or where is not None:
        raise NotImplementedError("prod: out= and where= are not implemented")
    axes = tuple(range(a.ndim)) if axis is None else normalize_axes(axis, a.ndim, "prod")
    kept = tuple(i for i in range(a.ndim) if i not in axes)
    n = math.prod(a.shape[i] for i in axes)
    rdtype = result_dtype(a, dtype)
    shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape)) if keepdims else \
        tuple(a.shape[i] for i in kept)
    if n == 0 or math.prod(shape) == 0:
        r = DeviceArray(shape, rdtype).fill(1)
    else:
        x = a.transpose(kept + axes).astype(rdtype).reshape(-1, n)
        r = _fold_rows(x, PROD).reshape(shape)
    if initial is not None:
        r = multiply(r, initial).astype(rdtype)
    return r
