"""Array manipulation with NumPy's names: squeeze, expand_dims and a.view(dtype) are views (no copy,
no launch); concatenate and stack copy each input into a view of the output (one strided copy
kernel per input, memory.cu's cast kernels through indexing.copy_to); gpublas.transpose copies a
matrix transposed (cuda_src/transpose.cu's tiled kernel).

    v = a.squeeze();  c = gpublas.expand_dims(a, (0, 2));  bits = a.view(np.int32)
    c = gpublas.concatenate([a, b], axis=1);  s = gpublas.stack([a, b, a], axis=-1)

concatenate and stack take DeviceArrays or ndarrays of any strides; the result has NumPy's dtype
(np.result_type of the inputs': each input is converted as it is copied) unless `out=` is given, whose
dtype it then has. An input that overlaps `out` is copied first (copy_to's rule).
"""
import numpy as np

from ..core import layout
from ..runtime import dtypes
from ..core.array import DTYPES, DeviceArray, provide
from ..core.checks import as_array, check_float, make_out, normalize_axes
from ..core.indexing import copy_to
from ..runtime.launch import MAX_GRID as GPU_MAX_GRID, ceil_div, get_kernel


def squeeze(a, axis=None):
    """`a` without its axes of size 1 (axis=None), or without the given ones (which must have size
    1), as a view."""
    a = as_array(a, "squeeze")
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = normalize_axes(axis, a.ndim, "squeeze")
        for ax in axes:
            if a.shape[ax] != 1:
                raise ValueError(f"squeeze: cannot squeeze out axis {ax} of shape {a.shape}: its size is not 1")
    keep = [i for i in range(a.ndim) if i not in axes]
    return a._view(tuple(a.shape[i] for i in keep), tuple(a.strides[i] for i in keep))


def expand_dims(a, axis):
    """`a` with an axis of size 1 inserted at each position `axis` names (an int or a tuple; positions
    in the result, negative ones from its end), as a view."""
    a = as_array(a, "expand_dims")
    count = len(axis) if isinstance(axis, (tuple, list)) else 1
    shape, strides = list(a.shape), list(a.strides)
    for ax in normalize_axes(axis, a.ndim + count, "expand_dims"):
        after = strides[ax] * shape[ax] if ax < len(shape) else a.itemsize  # a C-contiguous array stays so
        shape.insert(ax, 1)
        strides.insert(ax, after)
    return a._view(tuple(shape), tuple(strides))


def view(a, dtype=None):
    """The same memory seen as `dtype`, which must have a's itemsize (float32 <-> int32, float64 <->
    int64, uint8 <-> bool), as a view; a plain view of a when dtype is None."""
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    if dtype not in DTYPES:
        raise TypeError(f"view: unsupported dtype {dtype}; gpublas arrays hold {', '.join(map(str, DTYPES))}")
    if dtype.itemsize != a.itemsize:
        raise ValueError(f"view: {a.dtype} has {a.itemsize} bytes per element, {dtype} has {dtype.itemsize}; "
                         "gpublas views keep the itemsize")
    a.ptr  # a view of freed memory is an error now, not later
    return DeviceArray(a.shape, dtype, _mem=a._mem, _offset=a._offset, _strides=a.strides,
                       _base=a if a.base is None else a.base)


def _part(a, imag):
    """The real (imag False) or imaginary parts of a complex array as a view of the component dtype:
    the same shape and byte strides, offset by half an element for the imaginary part."""
    a.ptr  # a view of freed memory is an error now, not later
    return DeviceArray(a.shape, dtypes.real_of(a.dtype), _mem=a._mem, _offset=a._offset + imag * a.itemsize // 2,
                       _strides=a.strides, _base=a if a.base is None else a.base)


def real(a):
    """a.real: a view of a complex array's real parts; a itself for a real array (NumPy's)."""
    return _part(a, False) if a.dtype.kind == "c" else a


def imag(a):
    """a.imag: a view of a complex array's imaginary parts; zeros for a real array (NumPy's)."""
    return _part(a, True) if a.dtype.kind == "c" else DeviceArray(a.shape, a.dtype).fill(0)


def _inputs(arrays, what):
    """The inputs as DeviceArrays, and the dtype NumPy gives their combination."""
    if isinstance(arrays, (DeviceArray, np.ndarray)):
        raise TypeError(f"{what}: takes a sequence of arrays, got one {type(arrays).__name__}")
    arrays = [as_array(x, what) for x in arrays]
    if not arrays:
        raise ValueError(f"{what}: need at least one array")
    dtype = np.result_type(*(x.dtype for x in arrays))
    if dtype not in DTYPES:
        raise TypeError(f"{what}: the inputs' dtypes combine to {dtype}, which gpublas arrays cannot hold")
    return arrays, dtype


def _copy_along(out, axis, start, x):
    """Copies x into out's elements from `start` along `axis` (out.shape[axis] counted by x's shape
    there; x.ndim == out.ndim), one strided copy."""
    if x.size:
        copy_to(out._view(x.shape, out.strides, start * out.strides[axis]), x)


def concatenate(arrays, axis=0, out=None):
    """The arrays joined along an existing axis (axis=None: each flattened first); their shapes must
    agree on every other axis."""
    arrays, dtype = _inputs(arrays, "concatenate")
    if axis is None:
        arrays, axis = [x.reshape(-1) for x in arrays], 0
    first = arrays[0]
    if first.ndim == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    (axis,) = normalize_axes(axis, first.ndim, "concatenate")
    for i, x in enumerate(arrays):
        if x.ndim != first.ndim or x.shape[:axis] + x.shape[axis + 1:] != first.shape[:axis] + first.shape[axis + 1:]:
            raise ValueError(f"concatenate: array 0 has shape {first.shape} and array {i} shape {x.shape}; "
                             f"all but axis {axis} must match")
    shape = first.shape[:axis] + (sum(x.shape[axis] for x in arrays),) + first.shape[axis + 1:]
    out = make_out(out, shape, getattr(out, "dtype", dtype), "concatenate")
    start = 0
    for x in arrays:
        _copy_along(out, axis, start, x)
        start += x.shape[axis]
    return out


def stack(arrays, axis=0, out=None):
    """The arrays (all of one shape) joined along a new axis at position `axis` of the result."""
    arrays, dtype = _inputs(arrays, "stack")
    first = arrays[0]
    for i, x in enumerate(arrays):
        if x.shape != first.shape:
            raise ValueError(f"stack: array 0 has shape {first.shape} and array {i} shape {x.shape}; "
                             "all must be equal")
    (axis,) = normalize_axes(axis, first.ndim + 1, "stack")
    shape = first.shape[:axis] + (len(arrays),) + first.shape[axis:]
    out = make_out(out, shape, getattr(out, "dtype", dtype), "stack")
    for i, x in enumerate(arrays):
        _copy_along(out, axis, i, expand_dims(x, axis))
    return out


def launch_transpose(a, out):
    rows, cols = a.shape
    if a.size:
        grid = (ceil_div(cols, 32), min(ceil_div(rows, 32), GPU_MAX_GRID[1]))  # the kernel strides over row tiles
        get_kernel("transpose", "transpose_tiled", a.dtype)(grid, (32, 8), a, out, rows, cols)
    return out


def transpose(a, out=None):
    """The transpose of a 2-D array as a new C-contiguous array (the tiled kernel; a.T is the view);
    a 1-D or 0-d array is copied."""
    a = as_array(a, "transpose")
    if a.ndim < 2 and out is None:
        return a.copy()
    if a.ndim != 2:
        raise ValueError(f"transpose: 2-D arrays only (or a copy of a 1-D or 0-d one), got shape {a.shape}")
    check_float(a, "transpose")
    out = make_out(out, a.shape[::-1], a.dtype, "transpose")
    if layout.may_share_memory(out, a):
        raise ValueError("transpose: out must not share memory with the input")
    if not out.c_contiguous:
        out[...] = transpose(a)
        return out
    return launch_transpose(a if a.c_contiguous else a.copy(), out)


provide(squeeze=squeeze, view=view, real=real, imag=imag)  # DeviceArray's a.squeeze() and a.view(dtype)
