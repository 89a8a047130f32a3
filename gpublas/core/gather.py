"""Integer-array and boolean-mask indexing on the device (cuda_src/gather.cu; a mask's positions come
from scan.cu's prefix sum): the device work behind a[idx], a[mask] and their assignments (the key's
grammar is gpublas.core.indexing's), and nonzero / count_nonzero.

    w = positions(idx, n, axis)               # int64 in [0, n): negatives wrapped; IndexError outside
    w = mask_positions(mask, strides)         # int64 offsets of the True elements, in C order
    out = gather(view, axis, ndim, w, wstride, front)
    scatter(view, axis, ndim, w, wstride, front, value, repeats)

Axes [axis, axis + ndim) of `view` are replaced by w's axes: the element for w[j] sits w[j] * wstride
elements from the first one of the other axes. The result has shape view.shape[:axis] + w.shape +
view.shape[axis + ndim:], or w's axes first when `front` (NumPy's rule for an array index and ints
separated by a slice). Every check (index range, mask shape, value shape) runs before any write.
Repeated indices in an assignment: the last one in C order of the index array wins, as NumPy's
loop does (NumPy does not promise it; here index_owner makes it so under any thread order).
"""
import numpy as np

from . import elementwise as ew
from . import layout, reduction
from .array import DeviceArray, to_device
from .checks import as_array, is_fill_value
from ..runtime.launch import BLOCK, get_kernel, grid_1d
from .scan import exclusive_scan

BOOL, INT64 = np.dtype(np.bool_), np.dtype(np.int64)
INDEX_DTYPES = (np.dtype(np.int32), INT64)  # index_wrap_real's builds; uint8 indices are widened


def as_index(k):
    """An index array as a DeviceArray: integer (int32, int64) or bool; IndexError for anything else."""
    if not isinstance(k, DeviceArray):
        k = np.asarray(k)
        if k.size == 0 and k.dtype.kind == "f":  # a[[]]: NumPy takes an empty list as an integer index
            k = k.astype(np.int64)
        k = to_device(k) if k.dtype.kind in "iub" else k
    if k.dtype.kind not in "iub":
        raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got {k.dtype}")
    if k.dtype.kind != "b" and k.dtype not in INDEX_DTYPES:
        k = k.astype(np.int64)
    return k


def positions(idx, n, axis):
    """idx (int32/int64 DeviceArray) wrapped into [0, n) as int64; IndexError naming the first index
    outside [-n, n) (one 8-byte read after the launch)."""
    idx = idx if idx.c_contiguous else idx.copy()
    w = DeviceArray(idx.shape, INT64)
    if idx.size == 0:
        return w
    bad = DeviceArray((), INT64).fill(-1)  # the kernel's unsigned atomicMin sees -1 as "none yet"
    get_kernel("gather", "index_wrap_real", idx.dtype)(grid_1d(idx.size), BLOCK, idx, idx.size, n, w, bad)
    j = int(bad.get())
    if j >= 0:
        raise IndexError(f"index {int(idx.reshape(-1)[j].get())} is out of bounds for axis {axis} with size {n}")
    return w


def _selected(mask):
    """(contiguous mask, its exclusive scan, the count of True elements)."""
    m = mask if mask.c_contiguous else mask.copy()
    before, count = exclusive_scan(m.reshape(-1))
    return m, before, count


def _offsets(m, before, count, strides):
    """The offsets (int64, under `strides` in elements, one per mask axis) of m's True elements."""
    pos = DeviceArray(count, INT64)
    if count:
        dims, (s,) = layout.kernel_dims(m.shape, [strides])
        get_kernel("gather", "mask_offsets", INT64)(grid_1d(m.size), BLOCK, m, before, m.size, pos, *dims, *s)
    return pos


def mask_positions(mask, strides):
    """The element offsets of a bool mask's True elements in C order, under `strides` (elements)."""
    return _offsets(*_selected(mask), strides)


def _walk(view, axis, ndim, w):
    """(natural result shape, view with size-1 axes where w's go, w with size-1 axes around it): the
    three operands of take_nd / put_nd, each broadcast to the result by nd_args."""
    outer, inner = view.shape[:axis], view.shape[axis + ndim:]
    shape = outer + w.shape + inner
    rest = view._view(outer + (1,) * w.ndim + inner, view.strides[:axis] + (0,) * w.ndim + view.strides[axis + ndim:])
    return shape, rest, w.reshape((1,) * axis + w.shape + (1,) * len(inner))


def _order(ndim, axis, q, front):
    """(permutation from the natural result order to the one returned, its inverse)."""
    perm = tuple(range(axis, axis + q)) + tuple(range(axis)) + tuple(range(axis + q, ndim)) if front else \
        tuple(range(ndim))
    return perm, tuple(int(i) for i in np.argsort(perm))


def gather(view, axis, ndim, w, wstride, front=False):
    """A new C-contiguous array: view's axes [axis, axis + ndim) replaced by the positions w."""
    shape, rest, wb = _walk(view, axis, ndim, w)
    perm, inverse = _order(len(shape), axis, w.ndim, front)
    out = DeviceArray(tuple(shape[p] for p in perm), view.dtype)
    dst = out.transpose(inverse)  # the result seen in the natural order the kernel walks
    get_kernel("gather", "take_nd_real", view.dtype)(grid_1d(out.size), BLOCK, rest, w, wstride, dst,
                                                     *ew.nd_args(shape, rest, wb, dst), views=True)
    return out


def _broadcasts(shape, to):
    try:
        return layout.broadcast_shape(to, shape) == to
    except ValueError:
        return False


def scatter(view, axis, ndim, w, wstride, front, value, repeats=True):
    """view's elements at the positions w = value (a scalar, or an array broadcast to the shape gather
    would return, converted to view's dtype). `repeats`: w may hold a position twice (integer
    indices), so one write per position is chosen, the last."""
    shape, rest, wb = _walk(view, axis, ndim, w)
    perm, inverse = _order(len(shape), axis, w.ndim, front)
    result_shape = tuple(shape[p] for p in perm)
    v = DeviceArray((), view.dtype).fill(value) if is_fill_value(value) else \
        as_array(value, "item assignment")
    if not _broadcasts(v.shape, result_shape):
        raise ValueError(f"shape mismatch: value array of shape {v.shape} could not be broadcast to indexing "
                         f"result of shape {result_shape}")
    if v.dtype != view.dtype or layout.may_share_memory(v, view):
        v = v.astype(view.dtype)  # converted, and a copy: the writes below must not change what they read
    v = v.reshape((1,) * (len(shape) - v.ndim) + v.shape).transpose(inverse)  # in the kernel's order
    owner = None
    if repeats and w.size > 1:  # one slot per position w can hold: w * wstride spans the indexed axes
        span = sum((d - 1) * abs(s) for d, s in zip(view.shape[axis:axis + ndim], view.strides[axis:axis + ndim]))
        owner = DeviceArray(1 + span // (abs(wstride) * view.itemsize), INT64).fill(0)
        get_kernel("gather", "index_owner", INT64)(grid_1d(w.size), BLOCK, w, w.size, owner)
    get_kernel("gather", "put_nd_real", view.dtype)(grid_1d(v.size), BLOCK, v, w, wstride, owner, rest,
                                                    *ew.nd_args(shape, v, wb, rest), views=True)


# -- functions ----------------------------------------------------------------------------------------
def _nonzero_mask(a, what):
    a = as_array(a, what)
    return a if a.dtype == BOOL else ew.compare(ew.NE, a, 0, what=what)


def nonzero(a):
    """The indices of a's nonzero elements, one int64 array per axis, in C order (NumPy's nonzero)."""
    m = _nonzero_mask(a, "nonzero")
    if m.ndim == 0:
        raise ValueError("nonzero: a 0-d array has no axes to index; use a.reshape(1)")
    m, before, count = _selected(m)
    return tuple(_offsets(m, before, count, [int(k == axis) for k in range(m.ndim)]) for axis in range(m.ndim))


def count_nonzero(a, axis=None, keepdims=False):
    """How many elements are nonzero: a Python int for the whole array, else an int64 array per `axis`."""
    counts = reduction.sum(_nonzero_mask(a, "count_nonzero"), axis, keepdims)
    return int(counts) if axis is None and not keepdims else counts
