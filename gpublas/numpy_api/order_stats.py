"""What the device sort answers (gpublas.numpy_api.sorting): unique, median, quantile, percentile, as NumPy's.

    u, inverse, counts = gpublas.unique(labels, return_inverse=True, return_counts=True)
    m = gpublas.median(x, axis=0);  q = gpublas.quantile(x, [0.1, 0.9], axis=-1)

unique sorts the flattened array (with its permutation when an index or the inverse is asked for),
marks where runs of equal values start (sort.cu's run_starts: NaNs are one value unless
equal_nan=False, -0.0 equals +0.0), and finds the starts with the mask's prefix sum (gather.nonzero).
median and quantile sort along the axes and read the order statistics they need with one gather,
interpolated on the device (NumPy's lerp) by any of NumPy's quantile methods; a NaN in a row makes its result NaN.
"""
import math

import numpy as np

from ..core import elementwise as ew
from . import ops
from ..runtime import dtypes
from ..core.array import DeviceArray, to_device
from ..core.checks import as_array, normalize_axes
from ..core.gather import nonzero
from ..core.indexing import take
from ..runtime.launch import geometry_1d
from .manipulation import concatenate
from ..core.ranges import arange
from ..core.scan import exclusive_scan
from .sorting import as_rows, key_order, kernel, sort_rows
from ..core.views import moveaxis

INT64 = np.dtype(np.int64)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           sorted=True):  # noqa: A002 (NumPy's name)
    """The sorted unique values of `ar` (flattened; the unique slices along `axis` when given), and as asked the
    index of each one's first occurrence, the indices that rebuild `ar` from them (ar's shape) and their counts:
    numpy.unique's tuple."""
    a = as_array(ar, "unique")
    if axis is not None:
        return _unique_slices(a, axis, return_index, return_inverse, return_counts)
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


def _unique_slices(a, axis, return_index, return_inverse, return_counts):
    """numpy.unique(a, axis=axis): the distinct slices along `axis` in lexicographic order (element by element,
    each as NumPy orders that dtype; -0.0 equals +0.0, a NaN equals nothing), and as asked each one's first index,
    the inverse (one index a slice) and the counts. One stable key-value sort a column, last column first."""
    ax = normalize_axes(axis, a.ndim, "unique")[0]
    key_order(a.dtype, "unique")
    x = moveaxis(a, ax, 0)
    n = x.shape[0]
    x = (x if x.c_contiguous else x.copy()).reshape(n, math.prod(x.shape[1:]))  # (n slices, m elements each)
    perm = arange(n, dtype=np.int64)
    for j in reversed(range(x.shape[1]) if n else ()):  # LSD over the columns: stable sorts keep earlier ties
        column = take(x[:, j], perm)
        perm = sort_rows(column, 1, n, values=perm, want_values=True, zeros_equal=True)[1].reshape(-1)
    s = take(x, perm, axis=0)
    flags = DeviceArray(n, np.bool_)
    if n:
        flags[:1] = True
        flags[1:] = ops.any(ops.not_equal(s[1:], s[:-1]), axis=1)  # a slice unlike the one before starts a run
    starts = nonzero(flags)[0] if n else DeviceArray(0, INT64)
    first = take(perm, starts)
    result = [moveaxis(take(x, first, axis=0).reshape((starts.size,) + a.shape[:ax] + a.shape[ax + 1:]), 0, ax)]
    if return_index:
        result.append(first)
    if return_inverse:
        inverse = DeviceArray(n, INT64)
        if n:
            inverse[perm] = ops.subtract(exclusive_scan(flags)[0][1:], 1)
        result.append(inverse)
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


def _result_dtype(dtype, weak=True):
    """An interpolated result's dtype: float64, or a float input's own with a Python scalar q (NumPy's weak q)."""
    return dtype if dtypes.is_float(dtype) and weak else np.dtype(np.float64)


def _with_nan(s, res):
    """res (rows, m) with NaN in the rows of s whose last (largest) element is NaN."""
    last = s[:, -1:]
    return ew.where(ops.not_equal(last, last), np.nan, res)


def _shaped(res, qshape, shape, keep, keepdims):
    """res (rows, m) as NumPy returns it: q's axes first, then the kept axes (or keepdims' shape)."""
    out = res.T.reshape(qshape + (keep if keepdims else shape))
    return out if out.c_contiguous else out.copy()


# NumPy's quantile methods (Hyndman & Fan 1996) as host arithmetic on q alone: n values, q an array in [0, 1].
def _boundaries(index, take_previous):
    """The discrete methods' order statistic: floor(index), or the next one unless take_previous(gamma, index)."""
    previous = np.floor(index)
    return np.maximum(np.where(take_previous(index - previous, index), previous, previous + 1), 0).astype(np.int64)


def _hf(alpha, beta):
    return lambda n, q: n * q + (alpha + q * (1 - alpha - beta)) - 1


DISCRETE = {  # method: order statistic (0-based) of q; the result keeps the input's dtype
    "inverted_cdf": lambda n, q: _boundaries(n * q - 1, lambda g, i: g == 0),
    "closest_observation": lambda n, q: _boundaries(n * q - 1.5, lambda g, i: (g == 0) & (np.floor(i) % 2 == 1)),
    "lower": lambda n, q: np.floor((n - 1) * q).astype(np.int64),
    "higher": lambda n, q: np.ceil((n - 1) * q).astype(np.int64),
    "nearest": lambda n, q: np.around((n - 1) * q).astype(np.int64),
}
CONTINUOUS = {  # method: (virtual index of q, gamma from (its fraction, the index)); interpolated between neighbours
    "linear": (lambda n, q: (n - 1) * q, None),
    "interpolated_inverted_cdf": (_hf(0, 1), None),
    "hazen": (_hf(0.5, 0.5), None),
    "weibull": (_hf(0, 0), None),
    "median_unbiased": (_hf(1 / 3, 1 / 3), None),
    "normal_unbiased": (_hf(3 / 8, 3 / 8), None),
    "averaged_inverted_cdf": (lambda n, q: n * q - 1, lambda g, v: np.where(g == 0, 0.5, 1.0)),
    "midpoint": (lambda n, q: 0.5 * (np.floor((n - 1) * q) + np.ceil((n - 1) * q)),
                 lambda g, v: np.where(v % 1 == 0, 0.0, 0.5)),
}


def _neighbours(method, n, q):
    """(previous, next order statistic, gamma) of a continuous method, clipped to the row as NumPy clips them."""
    index, fix = CONTINUOUS[method]
    v = np.asarray(index(n, q), np.float64)
    lo = np.floor(v)
    hi = lo + 1
    lo[v >= n - 1], hi[v >= n - 1] = -1, -1  # past the end: the last one (NumPy's -1, and its gamma from it)
    lo[v < 0], hi[v < 0] = 0, 0
    gamma = v - lo
    if fix is not None:
        gamma = fix(gamma, v)
    return np.where(lo < 0, n - 1, lo).astype(np.int64), np.where(hi < 0, n - 1, hi).astype(np.int64), gamma


def _check_method(method, weights, out, what):
    if method not in DISCRETE and method not in CONTINUOUS:
        raise ValueError(f"{what}: {method!r} is not a valid method; use one of {', '.join([*DISCRETE, *CONTINUOUS])}")
    if weights is not None:
        raise NotImplementedError(f"{what}: weights= is not implemented")
    if out is not None:
        raise NotImplementedError(f"{what}: out= is not implemented; assign the result")


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None):
    """numpy.quantile: the q-th quantiles (q in [0, 1], a scalar or array) over `axis`, by any of NumPy's methods
    (the discrete ones, 'lower', 'higher', 'nearest', 'inverted_cdf', 'closest_observation', keep the input's
    dtype)."""
    _check_method(method, weights, out, "quantile")
    qs = np.asarray(q.get() if isinstance(q, DeviceArray) else q, np.float64)
    if not np.all((qs >= 0) & (qs <= 1)):
        raise ValueError("Quantiles must be in the range [0, 1]")
    return _quantile(a, qs, type(q) in (int, float), axis, method, keepdims)


def _quantile(a, qs, weak, axis, method, keepdims):
    """quantile of the host array qs (weak: q was a Python scalar) with method checked."""
    s, shape, keep = _rows(a, axis, "quantile")
    n = s.shape[1]
    if method in DISCRETE:
        res = take(s, to_device(np.clip(DISCRETE[method](n, qs.reshape(-1)), 0, n - 1)), axis=1)
        return _shaped(_with_nan(s, res) if dtypes.is_float(s.dtype) else res, qs.shape, shape, keep, keepdims)
    lo, hi, t = _neighbours(method, n, qs.reshape(-1))
    dtype = _result_dtype(s.dtype, weak)
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
    _check_method(method, weights, out, "percentile")
    return _quantile(a, qs / 100, type(q) in (int, float), axis, method, keepdims)


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
