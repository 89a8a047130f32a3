"""DeviceArray: a C-contiguous n-d array in device memory, and the functions that make one.

Views (reshape, ravel, slicing along the first axis) share their base's Allocation, so freeing the
base invalidates every view: any later use raises FreedArrayError instead of reading stale memory.
Every operator is defined in the class body; the work is done by gpublas.ops, elementwise and
reduction, imported at the end of this module (they build DeviceArrays, so they import this one).
"""
import math
import warnings

import numpy as np

from . import backends
from .launch import ceil_div, get_kernel
from .pinned import PageableMemoryWarning, is_pinned
from .stream import current_stream

DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint8))


def _check_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        raise TypeError(f"unsupported dtype {dtype}; gpublas arrays hold "
                        f"{', '.join(str(d) for d in DTYPES)}")
    return dtype


def _shape(shape):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return shape


def _stream_handle(stream):
    stream = stream if stream is not None else current_stream()
    return stream.handle if stream is not None else None


class DeviceArray:
    __array_priority__ = 1000  # ndarray (op) DeviceArray defers to our operators

    def __init__(self, shape, dtype=np.float32, *, _mem=None, _offset=0):
        self.shape = _shape(shape)
        self.dtype = _check_dtype(dtype)
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        if _mem is None:
            self.backend = backends.current()
            _mem = self.backend.pool.malloc(self.nbytes, _stream_handle(None))
        else:
            self.backend = _mem.pool.backend if _mem.pool is not None else backends.current()
        self._mem = _mem
        self._offset = _offset

    # -- properties ---------------------------------------------------------------------------
    @property
    def ptr(self):
        """The device address of the first element (raises FreedArrayError once freed)."""
        return self._mem.ptr + self._offset

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def strides(self):
        return tuple(int(np.prod(self.shape[i + 1:], dtype=np.int64)) * self.itemsize for i in range(self.ndim))

    @property
    def freed(self):
        return self._mem.freed

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self):
        if self.freed:
            return f"DeviceArray(<freed>, shape={self.shape}, dtype={self.dtype})"
        body = np.array2string(self.get(), separator=", ", threshold=20, prefix="DeviceArray(")
        return f"DeviceArray({body}, dtype={self.dtype}, backend={self.backend.name})"

    def __bool__(self):
        if self.size != 1:
            raise ValueError(f"the truth value of an array of {self.size} elements is ambiguous")
        return bool(self.get())

    def __float__(self):
        if self.size != 1:
            raise TypeError(f"only one-element arrays convert to float, this one has {self.size}")
        return float(self.get().reshape(()))

    # -- transfers ----------------------------------------------------------------------------
    def set(self, host, stream=None):
        """Copies ndarray `host` (same shape and dtype) into this array. Asynchronous when a stream
        is given and `host` is pinned; with pageable memory it warns and copies synchronously."""
        host = np.asarray(host)
        if host.shape != self.shape:
            raise ValueError(f"set: host array shape {host.shape} does not match device shape {self.shape}")
        if host.dtype != self.dtype:
            raise TypeError(f"set: host dtype {host.dtype} does not match device dtype {self.dtype}")
        host = np.ascontiguousarray(host)
        handle = _async_handle(host, stream, "host-to-device")
        self.backend.htod(self.ptr, host.ctypes.data, self.nbytes, handle)
        return self

    def get(self, stream=None, out=None):
        """Copies the array to the host and returns an ndarray. With a stream and a pinned `out`
        the copy is asynchronous: synchronize the stream before reading `out`."""
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif out.shape != self.shape or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ValueError(f"get: out must be a C-contiguous {self.dtype} array of shape {self.shape}, "
                             f"got {out.dtype} {out.shape}")
        handle = _async_handle(out, stream, "device-to-host")
        self.backend.dtoh(out.ctypes.data, self.ptr, self.nbytes, handle)
        return out

    def copy(self, stream=None):
        """A new array with the same contents (device-to-device copy)."""
        out = DeviceArray(self.shape, self.dtype)
        self.backend.dtod(out.ptr, self.ptr, self.nbytes, _stream_handle(stream))
        return out

    def copy_from(self, src, stream=None):
        """Copies DeviceArray `src` (same size and dtype) into this array, device to device."""
        if src.dtype != self.dtype or src.size != self.size:
            raise ValueError(f"copy_from: {src.dtype} {src.shape} into {self.dtype} {self.shape} "
                             "(needs the same dtype and size)")
        self.backend.dtod(self.ptr, src.ptr, self.nbytes, _stream_handle(stream))
        return self

    def free(self):
        """Returns the memory to the pool now; this array and every view of it become unusable."""
        self._mem.free()

    # -- views --------------------------------------------------------------------------------
    def _view(self, shape, offset=0):
        self.ptr  # a view of freed memory is an error now, not later
        return DeviceArray(shape, self.dtype, _mem=self._mem, _offset=self._offset + offset)

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) else shape
        shape = [int(s) for s in shape]
        if shape.count(-1) > 1:
            raise ValueError("reshape: only one dimension can be -1")
        if -1 in shape:
            known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
            if known == 0 or self.size % known:
                raise ValueError(f"reshape: cannot reshape {self.size} elements into {tuple(shape)}")
            shape[shape.index(-1)] = self.size // known
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError(f"reshape: cannot reshape array of shape {self.shape} into {tuple(shape)}")
        return self._view(tuple(shape))

    def ravel(self):
        return self._view((self.size,))

    def __getitem__(self, key):
        """Basic indexing along the first axis (an int or a slice with step 1), as a view."""
        if isinstance(key, tuple):
            if any(k != slice(None) for k in key[1:]):
                raise IndexError("only the first axis can be indexed; the others must be ':'")
            key = key[0] if key else slice(None)
        if not self.shape:
            raise IndexError("a 0-d array cannot be indexed")
        n, row = self.shape[0], self.strides[0] if self.ndim else 0
        if isinstance(key, (int, np.integer)):
            i = int(key) + (n if key < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"index {int(key)} is out of bounds for axis 0 with size {n}")
            return self._view(self.shape[1:], i * row)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                raise IndexError("slices with a step other than 1 are not contiguous; copy on the host instead")
            return self._view((max(0, stop - start),) + self.shape[1:], start * row)
        raise IndexError(f"unsupported index {key!r}: use an int or a slice along the first axis")

    # -- filling ------------------------------------------------------------------------------
    def fill(self, value, stream=None):
        """Sets every element to `value` (a memset for zero, else a fill kernel)."""
        if self.size == 0:
            return self
        if value == 0:
            self.backend.memset_d8(self.ptr, 0, self.nbytes, _stream_handle(stream))
        elif self.dtype in (np.float32, np.float64, np.int32):
            k = get_kernel("memory", "fill_real", self.dtype)
            k(min(ceil_div(self.size, 256), 4096), 256, self, value, self.size, stream=stream)
        else:
            self.set(np.full(self.shape, value, self.dtype), stream=None)
        return self

    def astype(self, dtype):
        """A copy converted to `dtype` (float32, float64 or int32)."""
        dtype = _check_dtype(dtype)
        if dtype == self.dtype:
            return self.copy()
        src = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.int32): "int"}
        if self.dtype not in src or dtype not in src:
            raise TypeError(f"astype: no conversion kernel from {self.dtype} to {dtype}")
        out = DeviceArray(self.shape, dtype)
        k = get_kernel("memory", f"cast_real_from_{src[self.dtype]}", dtype)
        k(min(max(ceil_div(self.size, 256), 1), 4096), 256, self, out, self.size)
        return out


    # -- operators: arithmetic (gpublas.ops) ----------------------------------------------------
    def __add__(self, other):
        return _ops.forward("add", self, other)

    def __radd__(self, other):
        return _ops.reflected("add", self, other)

    def __iadd__(self, other):
        return _ops.inplace("add", self, other)

    def __sub__(self, other):
        return _ops.forward("subtract", self, other)

    def __rsub__(self, other):
        return _ops.reflected("subtract", self, other)

    def __isub__(self, other):
        return _ops.inplace("subtract", self, other)

    def __mul__(self, other):
        return _ops.forward("multiply", self, other)

    def __rmul__(self, other):
        return _ops.reflected("multiply", self, other)

    def __imul__(self, other):
        return _ops.inplace("multiply", self, other)

    def __truediv__(self, other):
        return _ops.forward("divide", self, other)

    def __rtruediv__(self, other):
        return _ops.reflected("divide", self, other)

    def __itruediv__(self, other):
        return _ops.inplace("divide", self, other)

    def __pow__(self, other):
        return _ops.forward("pow", self, other)

    def __rpow__(self, other):
        return _ops.reflected("pow", self, other)

    def __ipow__(self, other):
        return _ops.inplace("pow", self, other)

    def __matmul__(self, other):
        return _ops.matmul(self, other)

    def __rmatmul__(self, other):
        return _ops.matmul(other, self)

    def __neg__(self):
        return _ew.negative(self)

    def __pos__(self):
        return self.copy()

    def __abs__(self):
        return _ew.absolute(self)

    def __int__(self):
        return _ops.to_int(self)

    @property
    def T(self):
        """The transpose of a 2-D array, as a new array."""
        return _ew.transpose(self)

    # -- reductions (gpublas.reduction) ---------------------------------------------------------
    def sum(self, axis=None, keepdims=False):
        return _reduction.sum(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _reduction.mean(self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _reduction.max(self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _reduction.min(self, axis, keepdims)

    def argmax(self, axis=None, keepdims=False):
        return _reduction.argmax(self, axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        return _reduction.argmin(self, axis, keepdims)


def _async_handle(host, stream, what):
    """The stream handle for an async copy, or None (blocking) with a warning for pageable memory."""
    if stream is None:
        return None
    if not is_pinned(host):
        warnings.warn(f"{what} copy on a stream was handed pageable host memory, so it runs "
                      "synchronously; use gpublas.pinned_empty() for asynchronous copies",
                      PageableMemoryWarning, stacklevel=3)
        stream.synchronize()
        return None
    return stream.handle


# -- constructors ---------------------------------------------------------------------------------
def empty(shape, dtype=np.float32):
    return DeviceArray(shape, dtype)


def zeros(shape, dtype=np.float32):
    return DeviceArray(shape, dtype).fill(0)


def full(shape, value, dtype=np.float32):
    return DeviceArray(shape, dtype).fill(value)


def empty_like(a, dtype=None):
    return DeviceArray(a.shape, dtype or a.dtype)


def zeros_like(a, dtype=None):
    return zeros(a.shape, dtype or a.dtype)


def to_device(host, stream=None, dtype=None):
    """Copies an ndarray (or anything np.asarray takes) to a new DeviceArray. float64 input stays
    float64; Python floats become float32 only when dtype says so."""
    if isinstance(host, DeviceArray):
        return host if dtype is None or np.dtype(dtype) == host.dtype else host.astype(dtype)
    host = np.asarray(host, dtype=dtype)
    if host.dtype == np.bool_:
        host = host.astype(np.uint8)
    out = DeviceArray(host.shape, host.dtype)
    return out.set(host, stream=stream)


def asarray(a, dtype=None):
    """`a` itself when it is a DeviceArray (of `dtype`), else a copy on the device."""
    return to_device(a, dtype=dtype)


# The modules the operators call; imported last because each of them imports DeviceArray.
from . import elementwise as _ew  # noqa: E402
from . import ops as _ops  # noqa: E402
from . import reduction as _reduction  # noqa: E402
