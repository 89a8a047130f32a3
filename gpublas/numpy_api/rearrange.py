"""NumPy's functions that rearrange elements into a new array, on the device: each is strided copies
(memory.cu's cast kernel through indexing.copy_to) between views, a where / gather launch, or both.

    r = gpublas.roll(a, 2, axis=-1);  t = gpublas.tile(a, (2, 3));  e = gpublas.repeat(a, 3, axis=0)
    h = gpublas.hstack([a, b]);  m = gpublas.diag(v, k=1);  l = gpublas.tril(m);  w = gpublas.argwhere(a > 0)

roll: two copies per rolled axis; repeat with an int and tile: one copy from a view with stride 0 on
the repeated axes into the result seen with those axes split out; repeat with one count per element:
the source index of each output element built on the device (exclusive scan of the counts, a scatter
of index steps at each run's start, a cumsum), then a gather; the total is read back (8 bytes) to
size the result, as nonzero's count is. tril / triu: where(j - i <= k, m, 0) over a broadcast index
grid (bool and uint8 arrays: m * mask). argwhere: nonzero's index arrays stacked as columns.
"""
import operator

import numpy as np

from ..core import elementwise as ew, gather, ranges, reduction, views
from . import cumulative, manipulation
from ..core.array import DeviceArray
from ..core.checks import as_array, normalize_axes
from ..core.creation import zeros
from ..core.indexing import copy_to, take
from ..core.scan import exclusive_scan

INT64 = np.dtype(np.int64)


def _along(ndim, axis, sl):
    return (slice(None),) * axis + (sl,) + (slice(None),) * (ndim - axis - 1)


def _roll_axis(a, shift, axis):
    """A new array: a rolled by `shift` along `axis` (two strided copies)."""
    n = a.shape[axis]
    out = DeviceArray(a.shape, a.dtype)
    s = shift % n if n else 0
    if s == 0:
        return copy_to(out, a)
    copy_to(out[_along(a.ndim, axis, slice(s, None))], a[_along(a.ndim, axis, slice(None, n - s))])
    copy_to(out[_along(a.ndim, axis, slice(None, s))], a[_along(a.ndim, axis, slice(n - s, None))])
    return out


def roll(a, shift, axis=None):
    """a's elements shifted by `shift` along `axis` (of the flattened array when None), those that
    leave one end entering at the other; shift and axis may be tuples (broadcast together)."""
    a = as_array(a, "roll")
    if axis is None:
        return _roll_axis(a.reshape(-1), operator.index(shift), 0).reshape(a.shape)
    shifts, axes = np.broadcast_arrays(np.asarray(shift), np.asarray(axis))  # the arguments, not the data
    total = {}
    for s, ax in zip(shifts.reshape(-1).tolist(), axes.reshape(-1).tolist()):
        (ax,) = normalize_axes(ax, a.ndim, "roll")
        total[ax] = total.get(ax, 0) + s
    out = a if total else a.copy()
    for ax, s in total.items():
        out = _roll_axis(out, s, ax)
    return out


def _repeat_index(reps, n):
    """The int64 source index of each output element for counts `reps` (n int64 on the device): each
    i repeated reps[i] times, computed on the device."""
    if n and int(reduction.min(reps)) < 0:
        raise ValueError("repeat: negative dimensions are not allowed")
    sums, total = exclusive_scan(reps)
    if total == 0:
        return DeviceArray(0, INT64)
    (kept,) = gather.nonzero(reps)  # the elements that appear, ascending
    prev = DeviceArray(kept.shape, INT64).fill(0)
    prev[1:] = kept[:-1]
    steps = DeviceArray(total, INT64).fill(0)
    steps[take(sums, kept)] = kept - prev  # each run's start steps the index to its element
    return cumulative.cumsum(steps)


def repeat(a, repeats, axis=None):
    """Each element of `a` (flattened when axis is None) repeated `repeats` times along `axis`: an int,
    or one count per element (a sequence, ndarray or DeviceArray)."""
    a = as_array(a, "repeat")
    if axis is None:
        a, axis = a.reshape(-1), 0
    (axis,) = normalize_axes(axis, a.ndim, "repeat")
    n = a.shape[axis]
    if not isinstance(repeats, DeviceArray):
        repeats = np.asarray(repeats)
        if repeats.ndim == 1 and repeats.size == 1:
            repeats = repeats[0]
        if repeats.ndim == 0:
            r = operator.index(repeats.item())
            if r < 0:
                raise ValueError("repeat: negative dimensions are not allowed")
            pre, post = a.shape[:axis], a.shape[axis + 1:]
            out = DeviceArray(pre + (n * r,) + post, a.dtype)
            src = a._view(pre + (n, r) + post, a.strides[:axis + 1] + (0,) + a.strides[axis + 1:])
            copy_to(out.reshape(pre + (n, r) + post), src)
            return out
    reps = as_array(repeats, "repeat")
    if reps.dtype.kind not in "iub" or reps.ndim != 1 or reps.size not in (1, n):
        raise ValueError(f"repeat: repeats must be an int or {n} ints for axis {axis} of shape {a.shape}, "
                         f"got {reps.dtype} of shape {reps.shape}")
    if reps.size == 1 and n != 1:
        return repeat(a, int(reps.get()[0]), axis)
    return take(a, _repeat_index(reps.astype(INT64), n), axis)


def tile(A, reps):
    """A repeated `reps` times along each axis (reps padded with 1s in front, or A's shape with 1s),
    as NumPy's: one strided copy."""
    a = as_array(A, "tile")
    reps = (operator.index(reps),) if isinstance(reps, (int, np.integer)) else tuple(map(operator.index, reps))
    if any(r < 0 for r in reps):
        raise ValueError("tile: negative dimensions are not allowed")
    d = max(len(reps), a.ndim)
    reps = (1,) * (d - len(reps)) + reps
    a = a.reshape((1,) * (d - a.ndim) + a.shape)
    split = tuple(x for r, s in zip(reps, a.shape) for x in (r, s))  # (r0, s0, r1, s1, ...)
    out = DeviceArray(tuple(r * s for r, s in zip(reps, a.shape)), a.dtype)
    src = a._view(split, tuple(x for st in a.strides for x in (0, st)))
    copy_to(out.reshape(split), src)
    return out


def hstack(tup):
    """The arrays joined along their second axis (the first for 1-D ones), as NumPy's."""
    arrays = [views.atleast_1d(x) for x in _sequence(tup, "hstack")]
    return manipulation.concatenate(arrays, axis=0 if arrays and arrays[0].ndim == 1 else 1)


def vstack(tup):
    """The arrays (1-D ones as rows) joined along the first axis."""
    return manipulation.concatenate([views.atleast_2d(x) for x in _sequence(tup, "vstack")], axis=0)


def dstack(tup):
    """The arrays joined along the third axis ((n,) as (1, n, 1), (m, n) as (m, n, 1))."""
    return manipulation.concatenate([views.atleast_3d(x) for x in _sequence(tup, "dstack")], axis=2)


def _sequence(tup, what):
    if isinstance(tup, (DeviceArray, np.ndarray)):
        raise TypeError(f"{what}: takes a sequence of arrays, got one {type(tup).__name__}")
    return list(tup)


def diag(v, k=0):
    """A 1-D v on diagonal k of a new square array (zeros elsewhere); the diagonal k of a 2-D v, as a view."""
    v = as_array(v, "diag")
    k = operator.index(k)
    if v.ndim == 2:
        return views.diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("diag: input must be 1- or 2-d.")
    n = v.shape[0] + abs(k)
    out = zeros((n, n), v.dtype)
    copy_to(views.diagonal(out, k), v)
    return out


def _triangle(m, k, what, keep):
    """m where keep(j - i, k) over the last two axes (i the row, j the column), else 0."""
    m = as_array(m, what)
    if m.ndim == 0:
        raise ValueError(f"{what}: input must be at least 1-d")
    rows, cols = (m.shape[-2:] if m.ndim > 1 else m.shape * 2)
    i = ranges.arange(rows, dtype=np.int64).reshape(rows, 1)
    j = ranges.arange(cols, dtype=np.int64).reshape(1, cols)
    mask = keep(ew.binary(ew.SUB, j, i, what=what), operator.index(k))
    if m.dtype.kind in "bu":  # where's kernels hold no bool or uint8; no NaN to keep out either
        return ew.binary(ew.MUL, m, mask, what=what) if m.dtype.kind == "u" else ew.minimum(m, mask)
    return ew.where(mask, m, 0)


def tril(m, k=0):
    """m with the elements above diagonal k zeroed (the last two axes; a 1-D m as rows of an n x n)."""
    return _triangle(m, k, "tril", lambda d, k: ew.compare(ew.LE, d, k, what="tril"))


def triu(m, k=0):
    """m with the elements below diagonal k zeroed."""
    return _triangle(m, k, "triu", lambda d, k: ew.compare(ew.GE, d, k, what="triu"))


def argwhere(a):
    """The indices of a's nonzero elements as an int64 array of shape (count, a.ndim), in C order."""
    a = as_array(a, "argwhere")
    if a.ndim == 0:
        return DeviceArray((gather.count_nonzero(a), 0), INT64)
    return manipulation.stack(gather.nonzero(a), axis=1)
