"""Array layout arithmetic, shared by views, elementwise kernels and interop; no device work here.

Strides are in BYTES, as NumPy's and CuPy's `.strides` and the CUDA array interface have them; the
strided kernels take them in ELEMENTS (a view's strides are always whole elements: a.view(dtype)
keeps the itemsize). A stride may be negative (a[::-1]) or 0 (a broadcast operand).

    broadcast_shape((3, 1), (4,)) == (3, 4)
    kernel_dims((4, 5), [(5, 1), (0, 1)]) == ([1]*7 + [20], [[0]*7 + [1], ...])   # merged to 1-D
"""
import builtins
import math

from ..runtime.geometry import fast_divisor

MAX_DIMS = 8  # axes a strided kernel walks (after merging neighbours); NumPy has no limit
SMALL_INDEX = 0x7FFFFFFF  # common.cuh's small_index: below it an index fits 32-bit math


def c_strides(shape, itemsize):
    """The strides (bytes) of a C-contiguous array of `shape`."""
    if len(shape) == 1:  # the most common shape gets no loop
        return (itemsize,)
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= builtins.max(d, 1)
    return tuple(reversed(strides))


def is_c_contiguous(shape, strides, itemsize):
    """NumPy's C-contiguity: axes of size 1 may have any stride; an empty array is contiguous."""
    if 0 in shape:
        return True
    step = itemsize
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1:
            if s != step:
                return False
            step *= d
    return True


def is_f_contiguous(shape, strides, itemsize):
    return is_c_contiguous(shape[::-1], strides[::-1], itemsize)


def extent(shape, strides, itemsize):
    """(lo, hi): the byte range [first + lo, first + hi) that elements of this layout occupy,
    relative to the first element's address; (0, 0) for an empty array."""
    if 0 in shape:
        return 0, 0
    lo = sum(s * (d - 1) for d, s in zip(shape, strides) if s < 0)
    hi = sum(s * (d - 1) for d, s in zip(shape, strides) if s > 0)
    return lo, hi + itemsize


def broadcast_shape(*shapes):
    """NumPy's broadcast result shape, or ValueError naming the shapes."""
    if len(shapes) == 1 or (len(shapes) == 2 and shapes[0] == shapes[1]):  # an operator's usual case
        return tuple(shapes[0])
    ndim = builtins.max(len(s) for s in shapes)
    out = []
    for k in range(ndim):
        dims = {s[k - ndim + len(s)] for s in shapes if k - ndim + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise ValueError("operands could not be broadcast together with shapes "
                             + " ".join(str(tuple(s)) for s in shapes))
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_strides(shape, strides, out_shape):
    """`strides` of an operand of `shape` seen with `out_shape` (stride 0 on broadcast axes)."""
    pad = len(out_shape) - len(shape)
    return tuple(0 if k < pad or shape[k - pad] == 1 else strides[k - pad] for k in range(len(out_shape)))


def merge_axes(shape, operand_strides):
    """[(dim, [stride per operand])] over `shape`, outermost first: axes of size 1 dropped and
    neighbouring axes merged where every operand steps evenly across both (CuPy's _reduce_dims)."""
    merged = []
    for k, d in enumerate(shape):
        if d == 1:
            continue
        ss = [s[k] for s in operand_strides]
        if merged and all(prev == cur * d for prev, cur in zip(merged[-1][1], ss)):
            merged[-1] = (merged[-1][0] * d, ss)
        else:
            merged.append((d, ss))
    return merged


def kernel_dims(shape, operand_strides):
    """(dims, strides per operand) for a strided kernel over `shape`: element strides, merged
    (merge_axes), padded at the front to MAX_DIMS axes of size 1. Raises ValueError when more than
    MAX_DIMS axes remain."""
    merged = merge_axes(shape, operand_strides)
    if len(merged) > MAX_DIMS:
        raise ValueError(f"an operation over shape {tuple(shape)} needs {len(merged)} independent axes; "
                         f"at most {MAX_DIMS} are supported")
    pad = MAX_DIMS - len(merged)
    dims = [1] * pad + [d for d, _ in merged]
    strides = [[0] * pad + [ss[j] for _, ss in merged] for j in range(len(operand_strides))]
    return dims, strides


def reshape_strides(shape, strides, new_shape, itemsize):
    """Strides that show an array of (shape, strides) as `new_shape` without copying (NumPy's
    attempt_nocopy_reshape: each group of old axes that multiplies to a group of new axes must be
    contiguous within itself), or None when only a copy can."""
    if 0 in shape or not shape:
        return c_strides(new_shape, itemsize)
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    new = list(new_shape)
    out, i, j = [], 0, 0
    while j < len(new):
        if new[j] == 1:
            out.append(itemsize)
            j += 1
            continue
        if i >= len(old):
            return None
        # grow a group of old axes [i, i2) and new axes [j, j2) until their sizes match
        i2, j2, po, pn = i + 1, j + 1, old[i][0], new[j]
        while po != pn:
            if po < pn:
                if i2 >= len(old):
                    return None
                po *= old[i2][0]
                i2 += 1
            else:
                if j2 >= len(new):
                    return None
                pn *= new[j2]
                j2 += 1
        for k in range(i, i2 - 1):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        step = old[i2 - 1][1]
        group = []
        for k in range(j2 - 1, j - 1, -1):
            group.append(step)
            step *= new[k]
        out.extend(reversed(group))
        i, j = i2, j2
    return tuple(out) if i == len(old) else None


def may_share_memory(a, b):
    """True when a and b could touch the same bytes (one allocation, overlapping extents)."""
    if a._mem is not b._mem or a.size == 0 or b.size == 0:
        return False
    alo, ahi = extent(a.shape, a.strides, a.itemsize)
    blo, bhi = extent(b.shape, b.strides, b.itemsize)
    return a._offset + alo < b._offset + bhi and b._offset + blo < a._offset + ahi


def may_overlap_itself(shape, strides, itemsize):
    """True unless two elements of this layout certainly sit at distinct addresses: sorted by |stride|,
    each axis must step past everything the smaller axes reach (every view made by slicing and
    transposing an array passes; a broadcast axis, stride 0, does not)."""
    reach = itemsize
    for s, d in sorted((builtins.abs(s), d) for d, s in zip(shape, strides) if d > 1):
        if s < reach:
            return True
        reach += s * (d - 1)
    return False


# -- elementwise kernels' layouts ----------------------------------------------------------------------
def _element_strides(shape, arrays):
    """Each array's element strides broadcast to `shape` (0 on a broadcast axis)."""
    return [broadcast_strides(a.shape, [s // a.itemsize for s in a.strides], shape) for a in arrays]


def nd_args(shape, *arrays):
    """[n, 8 dims, then 8 element strides per array] for an _nd kernel over `shape`, each array
    broadcast to it (kernel_dims merges axes; more than 8 left raises ValueError)."""
    dims, per_array = kernel_dims(shape, _element_strides(shape, arrays))
    return [math.prod(shape), *dims, *(s for st in per_array for s in st)]


def all_flat(*arrays):
    """True when every array is C-contiguous and of one shape: the flat kernels apply."""
    shape = arrays[0].shape
    for a in arrays:  # a loop, not all(genexpr): this runs at every elementwise launch
        if not a.c_contiguous or a.shape != shape:
            return False
    return True


def plan(shape, *arrays, flat=True):
    """(kernel suffix, arguments after the pointers) for a map over `shape` with these arrays broadcast
    to it, once merge_axes has dropped and merged axes (CuPy's _reduce_dims):
      "", [n]              the flat kernel (flat=True): every array contiguous over the same elements,
                           one shape or merged to one unit-stride axis (x (1, 64, 128) + y (64, 128));
      "_nd3", [n, d1, d2, strides]  at most 3 axes left and n < 2^31 (a bias over rows, a per-channel
                           scale of NCHW data): FastDivmod divisors, 3 element strides per array;
      "_nd", nd_args       anything else, up to 8 axes."""
    n = math.prod(shape)
    if flat and all_flat(*arrays):
        return "", [n]
    merged = merge_axes(shape, _element_strides(shape, arrays))
    if flat and len(merged) == 1 and builtins.all(s == 1 for s in merged[0][1]):
        return "", [n]
    if len(merged) <= 3 and n < SMALL_INDEX:
        merged = [(1, [0] * len(arrays))] * (3 - len(merged)) + merged
        return "_nd3", [n, fast_divisor(merged[1][0]), fast_divisor(merged[2][0]),
                        *(ss[j] for j in range(len(arrays)) for _, ss in merged)]
    return "_nd", nd_args(shape, *arrays)
