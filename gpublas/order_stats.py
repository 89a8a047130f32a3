"""What the device sort answers (gpublas.sorting): unique, median, quantile, percentile, as NumPy's.

    u, inverse, counts = gpublas.unique(labels, return_inverse=True, return_counts=True)
    m = gpublas.median(x, axis=0);  q = gpublas.quantile(x, [0.1, 0.9], axis=-1)

unique sorts the flattened array (with its permutation when an index or the inverse is asked for),
marks where runs of equal values start (sort.cu's run_starts: NaNs are one value unless
equal_nan=False, -0.0 equals +0.0), and finds the starts with the mask's prefix sum (gather.nonzero).
median and quantile sort along the axes and read the order statistics they need with one gather,
interpolated on the device (NumPy's 'linear' method and its lerp); a NaN in a row makes its result NaN.
"""
import math

import numpy as np

from . import dtypes, elementwise as ew, ops
from .array import DeviceArray, to_device
from .checks import as_array, normalize_axes
from .gather import nonzero
from .indexing import take
from .launch import geometry_1d
from .manipulation import concatenate
from .scan import exclusive_scan
from .sorting import as_rows, key_order, kernel, sort_rows

INT64 = np.dtype(np.int64)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           sorted=True):  # noqa: A002 (NumPy's name)
    """The sorted unique values of `ar` (flattened), and as asked the index of each one's first occurrence,
    the indices that rebuild `ar` from them (ar's shape) and their counts: numpy.unique's tuple."""
    if axis is not None:
        raise NotImplementedError("unique: axis= (unique slices) is not implemented; it takes the flattened array")
    a = as_array(ar, "unique")
    flat = a.reshape(-1)
    flat = flat if flat.c_contiguous else flat.copy()
    n = flat.size
    kind, inf = key_order(a.dtype, "unique")
    keys, perm = sort_rows(flat, 1, n, want_values=True, zeros_equal=True)  # NumPy's stable order: -0.0 == 0.0
    s, perm = keys.reshape(-1), perm.reshape(-1)
    flags = DeviceArray(n, np.bool_)
    if n:
        kernel("run_starts", a.itemsize)(*geometry_1d(n), s, n, kind, inf, int(bool(equal_nan)), flags)
    starts = nonzero(flags)[0] if n else DeviceArray(0, INT64)
    first = take(perm, starts)  # each value's first occurrence
    result = [take(flat, first)]  # the value there (the sort wrote -0.0 as +0.0)
    if return_index:
        result.append(first)
    if return_inverse:
        inverse = DeviceArray(n, INT64)
        if n:
            group = ops.subtract(exclusive_scan(flags)[0][1:], 1)  # the run each sorted position is in
            inverse[perm] = group
        result.append(inverse.reshape(a.shape))
    if return_counts:
        ends = concatenate([starts[1:], to_device(np.array([n], np.int64))]) if n else starts
        result.append(ops.subtract(ends, starts))
    return result[0] if len(result) == 1 else tuple(result)


def _rows(a, axis, what):
    """(sorted rows (rows, n), the shape of the result without q's axes, with keepdims' 1s) of `a` reduced
    over `axis` (None, an int or a tuple of ints)."""
    a = as_array(a, what)
    key_order(a.dtype, what)
    if axis is None:
        axes = tuple(range(a.ndim))
    else:
        axes = normalize_axes(axis, a.ndim, what)
    kept = tuple(i for i in range(a.ndim) if i not in axes)
    x = a.transpose(kept + axes) if axes != tuple(range(a.ndim - len(axes), a.ndim)) else a
    n = math.prod(a.shape[i] for i in axes)
    if n == 0:
        raise ValueError(f"{what}: the reduced axes hold no elements")
    x = x.reshape(-1, n) if x.c_contiguous else x.copy().reshape(-1, n)
    rows = x.shape[0]
    keys, _ = sort_rows(x, rows, n)
    shape = tuple(a.shape[i] for i in kept)
    keep = tuple(1 if i in axes else d for i, d in enumerate(a.shape))
    return keys, shape, keep


def _result_dtype(dtype):
    return dtype if dtypes.is_float(dtype) else np.dtype(np.float64)


def _with_nan(s, res):
    """res (rows, m) with NaN in the rows of s whose last (largest) element is NaN."""
    last = s[:, -1:]
    return ew.where(ops.not_equal(last, last), np.nan, res)


def _shaped(res, qshape, shape, keep, keepdims):
    """res (rows, m) as NumPy returns it: q's axes first, then the kept axes (or keepdims' shape)."""
    out = res.T.reshape(qshape + (keep if keepdims else shape))
    return out if out.c_contiguous else out.copy()


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    """numpy.quantile with method='linear': the q-th quantiles (q in [0, 1], a scalar or array) over `axis`."""
    if method != "linear" or weights is not None:
        raise NotImplementedError(f"quantile: method={method!r}{' with weights' if weights is not None else ''} "
                                  "is not implemented (method='linear' is)")
    if out is not None:
        raise NotImplementedError("quantile: out= is not implemented; assign the result")
    qs = np.asarray(q.get() if isinstance(q, DeviceArray) else q, np.float64)
    if not np.all((qs >= 0) & (qs <= 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    s, shape, keep = _rows(a, axis, "quantile")
    n = s.shape[1]
    virtual = qs.reshape(-1) * (n - 1)  # NumPy's 'linear': between the floor and the next order statistic
    lo = np.floor(virtual).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    t = virtual - lo  # host arithmetic on q alone: which order statistics, and how far between them
    dtype = _result_dtype(s.dtype)
    below, above = take(s, to_device(lo), axis=1).astype(dtype), take(s, to_device(hi), axis=1).astype(dtype)
    gamma = to_device(t.astype(dtype))
    diff = ops.subtract(above, below)
    res = ew.where(to_device(t >= 0.5), ops.subtract(above, ops.multiply(diff, ops.subtract(1, gamma))),
                   ops.add(below, ops.multiply(diff, gamma)))  # NumPy's _lerp: from the nearer end
    return _shaped(_with_nan(s, res), qs.shape, shape, keep, keepdims)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    """numpy.percentile: quantile of q / 100."""
    qs = np.asarray(q.get() if isinstance(q, DeviceArray) else q, np.float64)
    if not np.all((qs >= 0) & (qs <= 100)):
        raise ValueError("Percentiles must be in the range [0, 100]")
    return quantile(a, qs / 100, axis, out, overwrite_input, method, keepdims, weights=weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """numpy.median: the middle element over `axis`, or the mean of the two middle ones."""
    if out is not None:
        raise NotImplementedError("median: out= is not implemented; assign the result")
    s, shape, keep = _rows(a, axis, "median")
    n = s.shape[1]
    dtype = _result_dtype(s.dtype)
    mid = s[:, n // 2:n // 2 + 1].astype(dtype)
    if n % 2 == 0:
        mid = ops.divide(ops.add(s[:, n // 2 - 1:n // 2].astype(dtype), mid), 2)
    return _shaped(_with_nan(s, mid), (), shape, keep, keepdims)
