"""Indexing and item assignment for DeviceArray, with NumPy's rules: basic indexing gives views,
integer or boolean arrays in the key gather into a new array (gpublas.core.gather does that work).

View rules (each returns a DeviceArray sharing the base's memory; no copy, no launch):
  * a[i] drops an axis; a[i:j:k] keeps it, with any step, negative included; a[:, i:j] is a
    column block (strides (row pitch, itemsize)); None / np.newaxis inserts an axis of size 1;
    ... stands for the remaining axes;
  * a.T and a.transpose(axes) permute strides; a.reshape(shape) is a view when each group of old
    axes merged into new ones is contiguous within itself (always for a contiguous array), else a
    copy, as NumPy's reshape; ravel() likewise; flatten() and copy() always copy.
Advanced indexing (a copy, as NumPy's), integer or boolean arrays beside basic entries:
  * a[idx], a[:, idx], a[..., idx, 1:]: an integer array (DeviceArray, ndarray or list; any shape)
    along one axis gives shape a.shape[:k] + idx.shape + a.shape[k+1:]; negative indices count from
    the end, one outside [-n, n) raises IndexError naming it (found on the device, before any
    write). Ints elsewhere in the key index as usual; when a slice, None or ... separates them from
    the array, idx's axes go first (NumPy's rule). take(a, idx, axis) is a[..., idx] along `axis`.
  * a[mask]: a bool array matching the axes it covers (all of a's, or leading ones, or any run of
    them) selects its True elements in C order: shape a.shape[:k] + (count,) + the axes after.
  * a[rows, cols], a[i0, :, i2], a[mask2d, idx]: several arrays broadcast together to one shape B (a
    boolean one stands for its nonzero() arrays), which replaces the indexed axes where they are
    adjacent in the key, else goes first (NumPy's rules; ints count as arrays there).
  * a[idx] = v, a[mask] = v, a[rows, cols] = v write v (scalar or array broadcast to a[idx]'s shape) into a; with a
    repeated index the last one in idx's C order wins (deterministically; NumPy does not promise it).
Item assignment a[key] = v writes a scalar, a DeviceArray or an ndarray (broadcast to the view's
shape, converted to a's dtype) through one strided copy kernel; a right-hand side that overlaps the
target otherwise than element for element is copied first, so `x[1:] += x[:-1]` gives NumPy's
result; a target whose own elements overlap (as_strided views) is written in C order, the last write to an
address winning, as NumPy's. Every check runs before anything is written: a failed assignment leaves `a` untouched.
"""
import math
import operator

import numpy as np

from . import elementwise as ew
from . import gather, layout
from .array import SRC_CODES, DeviceArray, provide, to_device
from .checks import as_array, is_fill_value
from ..runtime.launch import flat_geometry, get_kernel


def _index_error(k):
    return IndexError(f"unsupported index {k!r}: gpublas takes ints, slices, None, ... and integer or "
                      "boolean arrays (DeviceArray, ndarray or list)")


def _is_array(k):
    return isinstance(k, (DeviceArray, np.ndarray, list))


def _is_int(k):
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def getitem(a, key):
    """a[key]: a view for a basic key, a new array for one with an integer or boolean array."""
    if type(key) is int and a.ndim:  # a[i], the commonest key (a time step, a layer): _basic's view, directly
        n = a.shape[0]
        if not -n <= key < n:
            raise IndexError(f"index {key} is out of bounds for axis 0 with size {n}")
        return a._view(a.shape[1:], a.strides[1:], (key % n) * a.strides[0])
    key = key if isinstance(key, tuple) else (key,)
    if any(_is_array(k) for k in key):
        where, _ = _advanced(a, key)
        return gather.gather(*where)
    return _basic(a, key)


def _basic(a, key):
    """The view a[key] for a basic key (a tuple)."""
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(k is not None and k is not Ellipsis for k in key)
    if consumed > a.ndim:
        raise IndexError(f"too many indices for array: array is {a.ndim}-dimensional, but {consumed} were indexed")
    fill = (slice(None),) * (a.ndim - consumed)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + fill + key[i + 1:]
    else:
        key = key + fill
    shape, strides, offset, axis = [], [], 0, 0
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        n, s = a.shape[axis], a.strides[axis]
        axis += 1
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            length = len(range(start, stop, step))
            if length:
                offset += start * s
            shape.append(length)
            strides.append(s * step)
        elif _is_int(k):
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis - 1} with size {n}")
            offset += (i % n) * s
        else:
            raise _index_error(k)
    return a._view(tuple(shape), tuple(strides), offset)


def _advanced(a, key):
    """((view, axis, ndim, w, wstride, front), repeats) for a key (a tuple) holding one integer or
    boolean array: `view` is a[key] with the array's place taken by full slices, whose axes [axis,
    axis + ndim) the positions w replace (gpublas.core.gather's arguments); `repeats`: w may repeat."""
    where = [i for i, k in enumerate(key) if _is_array(k)]
    if len(where) > 1:
        return _several(a, key), True
    p = where[0]
    index = gather.as_index(key[p])
    ndim = index.ndim if index.dtype == np.bool_ else 1
    if ndim == 0:
        raise IndexError("a 0-d boolean index is not supported; use a[None] or an if statement")
    basic = key[:p] + (slice(None),) * ndim + key[p + 1:]
    view = _basic(a, basic)
    axis, a_axis = _axes_of(a, basic, p)  # in view; in a (for messages)
    if index.dtype == np.bool_:
        for k, (n, m) in enumerate(zip(view.shape[axis:axis + ndim], index.shape)):
            if n != m:
                raise IndexError(f"boolean index did not match indexed array along axis {a_axis + k}; size of "
                                 f"axis is {n} but size of corresponding boolean axis is {m}")
        w = gather.mask_positions(index, [s // a.itemsize for s in view.strides[axis:axis + ndim]])
        wstride, repeats = 1, False
    else:
        w = gather.positions(index, view.shape[axis], a_axis)
        wstride, repeats = view.strides[axis] // a.itemsize, True
    advanced = [i for i, k in enumerate(key) if _is_int(k)] + [p]  # ints count as advanced beside an array
    front = max(advanced) - min(advanced) + 1 != len(advanced)
    return (view, axis, ndim, w, wstride, front), repeats


def _axes_of(a, key, p):
    """(the axis of `view` = a[key with arrays as full slices], the axis of a) that key[p] indexes."""
    spanned = a.ndim - sum(k is not None and k is not Ellipsis for k in key)  # the axes ... stands for
    return (sum(spanned if k is Ellipsis else 1 for k in key[:p] if not _is_int(k)),
            sum(spanned if k is Ellipsis else 0 if k is None else 1 for k in key[:p]))


def _several(a, key):
    """(view, axis, ndim, w, 1, front) for a key with several index arrays (a[rows, cols]), NumPy's
    rules: a boolean array stands for its nonzero() integer arrays; the integer arrays broadcast
    together to a shape B, and element j of the result is the one at position idx_k[j] along each
    indexed axis k. The indexed axes are moved together (where they are not already: B then goes
    first, as `front` says) and given positive strides (a reversed axis flipped, its positions
    n - 1 - w), so w = sum_k w_k * stride_k are nonnegative element offsets from the first element."""
    expanded = []
    for k in key:
        k = gather.as_index(k) if _is_array(k) else k
        expanded.extend(gather.nonzero(k) if isinstance(k, DeviceArray) and k.dtype == np.bool_ else (k,))
    key = tuple(expanded)
    where = [i for i, k in enumerate(key) if isinstance(k, DeviceArray)]
    try:
        layout.broadcast_shape(*(key[p].shape for p in where))
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                         + " ".join(str(key[p].shape) for p in where)) from None
    basic = tuple(slice(None) if i in where else k for i, k in enumerate(key))
    view = _basic(a, basic)
    axes = [_axes_of(a, basic, p)[0] for p in where]
    others = [i for i in range(view.ndim) if i not in axes]
    perm = [i for i in others if i < axes[0]] + axes + [i for i in others if i > axes[0]]
    view, axis, w = view.transpose(perm), len([i for i in others if i < axes[0]]), None
    for j, p in enumerate(where):
        n, step = view.shape[axis + j], view.strides[axis + j] // a.itemsize
        wj = gather.positions(key[p], n, _axes_of(a, basic, p)[1])
        if step < 0:  # the axis reversed, so that every offset is nonnegative
            strides = view.strides[:axis + j] + (-view.strides[axis + j],) + view.strides[axis + j + 1:]
            view, wj, step = view._view(view.shape, strides, (n - 1) * view.strides[axis + j]), (n - 1) - wj, -step
        wj = wj * step
        w = wj if w is None else w + wj
    advanced = [i for i, k in enumerate(key) if _is_int(k)] + where  # ints count as advanced beside arrays
    front = max(advanced) - min(advanced) + 1 != len(advanced)
    return view, axis, len(where), w, 1, front


def take(a, indices, axis=None):
    """The elements of `a` at integer `indices` along `axis` (of the flattened array when None), as
    NumPy's take: a new array; negative indices count from the end, others outside raise IndexError."""
    a = as_array(a, "take")
    if axis is None:
        a, axis = a.reshape(-1), 0
    if not -a.ndim <= axis < a.ndim:
        raise np.exceptions.AxisError(axis, a.ndim)
    index = gather.as_index(indices)
    index = index.astype(np.int64) if index.dtype == np.bool_ else index
    return getitem(a, (slice(None),) * (axis % a.ndim) + (index,))


def setitem(a, key, value):
    """a[key] = value (a scalar, DeviceArray or ndarray-like), broadcast and converted."""
    key = key if isinstance(key, tuple) else (key,)
    if any(_is_array(k) for k in key):
        where, repeats = _advanced(a, key)
        gather.scatter(*where, value, repeats)
        return
    view = _basic(a, key)
    if is_fill_value(value):
        view.fill(value)
    elif isinstance(value, DeviceArray):
        copy_to(view, value)
    elif isinstance(value, (np.ndarray, list, tuple)):
        host = np.asarray(value)
        np.broadcast_shapes(host.shape, view.shape)  # fails before any device work
        copy_to(view, to_device(host))
    else:
        raise TypeError(f"cannot assign a {type(value).__name__} to a DeviceArray; "
                        "use a scalar, a DeviceArray or an ndarray")


def _order(a, order, what):
    """'C' or 'F' for NumPy's order argument ('A': F when a is F- but not C-contiguous)."""
    if order not in ("C", "F", "A"):
        raise ValueError(f"{what}: order must be 'C', 'F' or 'A', got {order!r}")
    if order == "A":
        return "F" if a.flags.f_contiguous and not a.c_contiguous else "C"
    return order


def reshape(a, shape, order="C", copy=None):
    """a seen with `shape` (one -1 is inferred), its elements read and placed in `order` (NumPy's C or
    F). The one rule of reshape, ravel and flatten: a view exactly when NumPy gives one: reshape when
    layout.reshape_strides finds strides, ravel (copy=None, view=contiguous) only when the array
    is contiguous in that order, flatten (copy=True) never."""
    order = _order(a, order, "reshape")
    if order == "F":  # F order is C order on the reversed axes
        return reshape(transpose(a, ()), tuple(_shape(a, shape))[::-1], "C", copy).T
    shape = _shape(a, shape)
    strides = None if copy else layout.reshape_strides(a.shape, a.strides, shape, a.itemsize)
    if strides is None:
        return a.copy()._view(shape, layout.c_strides(shape, a.itemsize))
    return a._view(shape, strides)


def ravel(a, order="C"):
    """a's elements in `order` as 1-D: a view when a is contiguous in that order, else a copy (NumPy's
    ravel: a[::-1].ravel() copies where a[::-1].reshape(-1) is a view)."""
    order = _order(a, order, "ravel")
    contiguous = a.c_contiguous if order == "C" else a.flags.f_contiguous
    return reshape(a, -1, order, copy=None if contiguous else True)


def _shape(a, shape):
    shape = [operator.index(s) for s in ((shape,) if isinstance(shape, (int, np.integer)) else shape)]
    if shape.count(-1) > 1:
        raise ValueError("reshape: only one dimension can be -1")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or a.size % known:
            raise ValueError(f"reshape: cannot reshape array of size {a.size} into shape {tuple(shape)}")
        shape[shape.index(-1)] = a.size // known
    shape = tuple(shape)
    if any(s < 0 for s in shape) or math.prod(shape) != a.size:
        raise ValueError(f"reshape: cannot reshape array of shape {a.shape} into {shape}")
    return shape


def item(a, *index):
    """a.item() (a one-element array), a.item(i) (a flat index, negative from the end) or a.item(i, j,
    ...) as a Python scalar: the one element read back through a view."""
    if not index:
        if a.size != 1:
            raise ValueError(f"can only convert an array of size 1 to a Python scalar, this one has {a.size}")
        return a.get().item()
    index = index[0] if len(index) == 1 else index
    if isinstance(index, (int, np.integer)):
        if not -a.size <= index < a.size:
            raise IndexError(f"index {index} is out of bounds for size {a.size}")
        index = np.unravel_index(index % a.size, a.shape)
    return a[tuple(index)].get().item()


def transpose(a, axes):
    """a with its axes permuted by `axes` (reversed when empty), as a view."""
    axes = tuple(range(a.ndim))[::-1] if not axes else tuple(operator.index(p) for p in axes)
    axes = tuple(p + a.ndim if p < 0 else p for p in axes)
    if sorted(axes) != list(range(a.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of the {a.ndim} axes")
    return a._view(tuple(a.shape[p] for p in axes), tuple(a.strides[p] for p in axes))


def copy_to(dst, src, stream=None):
    """dst[...] = src: src (broadcast to dst's shape, any dtype, any strides) converted into dst's
    layout by one strided cast kernel; src is buffered first when it overlaps dst otherwise than
    element for element. Returns dst."""
    shape = layout.broadcast_shape(dst.shape, src.shape)
    if shape != dst.shape:
        raise ValueError(f"could not broadcast input array from shape {src.shape} into shape {dst.shape}")
    if dst.size == 0:
        return dst
    if layout.may_share_memory(src, dst):
        if (src._offset, src.shape, src.strides, src.dtype) == (dst._offset, dst.shape, dst.strides, dst.dtype):
            return dst
        src = src.copy(stream)
    if layout.may_overlap_itself(dst.shape, dst.strides, dst.itemsize):
        return _copy_in_order(dst, src, stream)
    kind, args = ew.plan(dst.shape, src, dst, flat=False)
    k = get_kernel("memory", f"cast{kind}_real", dst.dtype)
    k(*flat_geometry(dst.size), src, SRC_CODES[src.dtype], dst, *args, stream=stream, views=True)  # sim: runs of ~1024
    return dst


def _copy_in_order(dst, src, stream):
    """copy_to into a dst whose elements overlap each other (a stack of matrices a row apart, a stride of 0):
    NumPy's assignment writes in C order, so the last write to an address wins, where one kernel's threads
    write in no order on a GPU. An axis of stride 0 keeps its last index only (it overwrites the others at
    the same addresses); then the leading axis goes one index at a time, in order, each down to views whose
    elements are distinct."""
    src = src._view(dst.shape, layout.broadcast_strides(src.shape, src.strides, dst.shape))
    if any(s == 0 and d > 1 for s, d in zip(dst.strides, dst.shape)):
        last = tuple(slice(-1, None) if s == 0 else slice(None) for s in dst.strides)
        copy_to(dst[last], src[last], stream)
        return dst
    for i in range(dst.shape[0]):
        copy_to(dst[i], src[i], stream)
    return dst


provide(getitem=getitem, setitem=setitem, reshape=reshape, ravel=ravel, transpose=transpose, item=item,
        copy_to=copy_to)  # DeviceArray's
