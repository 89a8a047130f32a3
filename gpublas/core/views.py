"""NumPy's functions that return views (no copy, no launch): the result shares the input's memory,
so writing through it writes the input, as NumPy's does.

    v = gpublas.moveaxis(a, 0, -1);  s = gpublas.swapaxes(a, 0, 1);  r = gpublas.flip(a, axis=1)
    b = gpublas.broadcast_to(row, (5, 3));  parts = gpublas.split(a, 3, axis=1);  d = gpublas.diagonal(m)

broadcast_to's view has stride 0 on its broadcast axes: several elements are one address (NumPy makes
that view read-only; gpublas cannot mark it so, and writing into it is undefined). diagonal is
a view, as NumPy's (read-only there). atleast_1d/2d/3d are the views hstack, vstack and dstack join.
"""
import operator

import numpy as np

from . import layout
from .checks import as_array, normalize_axes


def _axes(source, ndim, what):
    """`source` (an int or a sequence of ints) as a list of distinct axes in [0, ndim)."""
    axes = [source] if isinstance(source, (int, np.integer)) else list(source)
    out = [normalize_axes(ax, ndim, what)[0] for ax in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated axis in {source!r}")
    return out


def moveaxis(a, source, destination):
    """a with axes `source` moved to positions `destination` (ints or sequences of one length), the
    others in their order, as a view."""
    a = as_array(a, "moveaxis")
    src, dst = _axes(source, a.ndim, "moveaxis"), _axes(destination, a.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("moveaxis: `source` and `destination` arguments must have the same number of elements")
    order = [k for k in range(a.ndim) if k not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return a.transpose(tuple(order))


def swapaxes(a, axis1, axis2):
    """a with axes axis1 and axis2 exchanged, as a view."""
    a = as_array(a, "swapaxes")
    (i,), (j,) = normalize_axes(axis1, a.ndim, "swapaxes"), normalize_axes(axis2, a.ndim, "swapaxes")
    order = list(range(a.ndim))
    order[i], order[j] = j, i
    return a.transpose(tuple(order))


def broadcast_to(array, shape):
    """`array` seen with `shape` (NumPy's broadcasting rules; stride 0 on the broadcast axes), a view."""
    a = as_array(array, "broadcast_to")
    shape = (operator.index(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(operator.index, shape))
    if any(d < 0 for d in shape):
        raise ValueError("broadcast_to: all elements of broadcast shape must be non-negative")
    if len(shape) < a.ndim or layout.broadcast_shape(a.shape, shape) != shape:
        raise ValueError(f"broadcast_to: operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {a.shape} and requested shape {shape}")
    return a._view(shape, layout.broadcast_strides(a.shape, a.strides, shape))


def flip(m, axis=None):
    """m with the order of its elements along `axis` (all axes when None; an int or a tuple)
    reversed, as a view (a negative stride)."""
    a = as_array(m, "flip")
    axes = range(a.ndim) if axis is None else normalize_axes(axis, a.ndim, "flip")
    key = [slice(None)] * a.ndim
    for ax in axes:
        key[ax] = slice(None, None, -1)
    return a[tuple(key)]


def array_split(ary, indices_or_sections, axis=0):
    """A list of views of `ary` along `axis`: `indices_or_sections` equal parts (the first n % k one
    longer) or the parts between the given indices, as NumPy's."""
    a = as_array(ary, "array_split")
    (axis,) = normalize_axes(axis, a.ndim, "array_split")
    n = a.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("array_split: number sections must be larger than 0.")
        size, extra = divmod(n, k)
        bounds = [0]
        for i in range(k):
            bounds.append(bounds[-1] + size + (i < extra))
    else:
        bounds = [0] + [operator.index(i) for i in indices_or_sections] + [n]
    key = [slice(None)] * a.ndim
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        key[axis] = slice(lo, hi)
        parts.append(a[tuple(key)])
    return parts


def split(ary, indices_or_sections, axis=0):
    """array_split, with a number of sections that must divide the axis (NumPy's ValueError otherwise)."""
    a = as_array(ary, "split")
    if isinstance(indices_or_sections, (int, np.integer)):
        (ax,) = normalize_axes(axis, a.ndim, "split")
        if indices_or_sections <= 0 or a.shape[ax] % indices_or_sections:
            raise ValueError("array split does not result in an equal division")
    return array_split(a, indices_or_sections, axis)


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The diagonal of `a` over axes axis1, axis2 (above the main one for offset > 0, below for < 0)
    as a view with that axis last (NumPy's)."""
    a = as_array(a, "diagonal")
    if a.ndim < 2:
        raise ValueError("diagonal requires an array of at least two dimensions")
    (i,), (j,) = normalize_axes(axis1, a.ndim, "diagonal"), normalize_axes(axis2, a.ndim, "diagonal")
    if i == j:
        raise ValueError("axis1 and axis2 cannot be the same")
    offset = operator.index(offset)
    rest = [k for k in range(a.ndim) if k not in (i, j)]
    rows, cols = a.shape[i], a.shape[j]
    start_r, start_c = max(-offset, 0), max(offset, 0)
    n = max(min(rows - start_r, cols - start_c), 0)
    first = (start_r * a.strides[i] + start_c * a.strides[j]) if n else 0
    shape = tuple(a.shape[k] for k in rest) + (n,)
    strides = tuple(a.strides[k] for k in rest) + (a.strides[i] + a.strides[j],)
    return a._view(shape, strides, first)


def _at_least(ndim, arrays, place):
    """Each array (as a view) with axes of 1 added by `place` until it has `ndim`; one array alone,
    else a list (NumPy's)."""
    out = []
    for x in arrays:
        x = as_array(x, f"atleast_{ndim}d")
        while x.ndim < ndim:
            x = place(x)
        out.append(x)
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    return _at_least(1, arys, lambda x: x.reshape(1))


def atleast_2d(*arys):
    return _at_least(2, arys, lambda x: x.reshape((1,) + x.shape))


def atleast_3d(*arys):
    """(n,) -> (1, n, 1) and (m, n) -> (m, n, 1), as NumPy's."""
    return _at_least(3, arys, lambda x: x.reshape((1, 1, 1) if x.ndim == 0 else (1,) + x.shape + (1,)
                                                  if x.ndim == 1 else x.shape + (1,)))
