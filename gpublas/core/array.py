"""DeviceArray: an n-d array in device memory with NumPy's layout, and the functions that make one.

Layout: `shape`, `dtype`, `strides` in BYTES (NumPy's convention; may be negative, or 0 for an axis of size
1), `ptr` the address of element [0, ..., 0], `c_contiguous`. Views (indexing, reshape, .T: the rules are in
core/indexing.py) share their base's Allocation, so freeing the base invalidates every view: any later use
raises FreedArrayError instead of reading stale memory. Kernels that take flat arrays refuse a non-contiguous
view at launch (runtime/launch.py); the library's own launchers walk strides (elementwise.cu, memory.cu) or
pass views through contiguous temporaries. Every operator and method is defined in the class body; each hands
its work to core.indexing, numpy_api.ops, core.elementwise, reduction or interop through the table `impl`.
"""
import math
import types
import warnings

import numpy as np

from . import layout
from .array_layouts import LAYOUTS, RESHAPES, _shape, new_layout, reshape_kept  # noqa: F401 (_shape: re-exported)
from .operations import arithmetic, comparison, impl, method, provide, reduction  # noqa: F401 (provide: re-exported)
from ..runtime import backends, device_checks, dtypes
from ..runtime.launch import geometry_1d, get_kernel
from ..runtime.stream import _local, copy_handle, refuse_in_capture, stream_handle

DTYPES = dtypes.DTYPES
SRC_CODES = {d: r.src for d, r in dtypes.TABLE.items()}  # the SRC_* numbers of cuda_src/memory.cu


_READ_BACK = "it reads a value back to the host, and nothing captured runs until a replay"


class DeviceArray:
    __array_priority__ = 1000  # ndarray (op) DeviceArray defers to our operators
    __hash__ = None  # == is elementwise, so arrays are unhashable (as NumPy's)

    def __init__(self, shape, dtype=np.float32, *, _mem=None, _offset=0, _strides=None, _base=None):
        if _strides is None:  # a new C-contiguous array: its layout made once per (shape, dtype) as given
            try:
                kept = LAYOUTS.get((shape, dtype))
            except TypeError:  # unhashable (a list)
                kept = None
            # outside the except: a bad shape's ValueError comes alone, not chained to a lookup's miss
            shape, dtype, size, nbytes, strides = kept or new_layout(shape, dtype)
            self.c_contiguous = True
        else:
            # a view (_base given, from _view) has its base's dtype and int tuples derived from its base's
            # layout: only an array on memory of its own (interop) needs its arguments checked and converted
            if _base is None:
                shape, dtype, _strides = _shape(shape), dtypes.canonical(dtype), tuple(int(s) for s in _strides)
            strides, size = _strides, math.prod(shape)
            nbytes = size * dtype.itemsize
            self.c_contiguous = layout.is_c_contiguous(shape, strides, dtype.itemsize)
        self.shape, self.dtype, self.size, self.nbytes, self.strides = shape, dtype, size, nbytes, strides
        if _mem is None:
            self.backend = backend = backends.current()
            stream = _local.stack  # current_stream(), inline
            _mem = backend.pool.malloc(nbytes, stream[-1].handle if stream else None)
        else:
            self.backend = _mem.pool.backend if _mem.pool is not None else backends.current()
        self._mem = _mem
        self._offset = _offset  # bytes from the allocation's start to element [0, ..., 0]
        self.base = _base  # the array this is a view of (None when it owns its memory)

    @classmethod
    def _new_like(cls, a):
        """A new C-contiguous array of a's shape and dtype, `a` being C-contiguous: its shape and sizes taken as
        they are, not checked and converted again (an operator's result: 1.2 us less than DeviceArray(...))."""
        out = object.__new__(cls)
        out.shape, out.dtype, out.size, out.nbytes, out._offset = a.shape, a.dtype, a.size, a.nbytes, 0
        out.strides, out.c_contiguous, out.base = layout.c_strides(a.shape, a.dtype.itemsize), True, None
        out.backend = backend = backends.current()
        stream = _local.stack  # current_stream(), inline
        out._mem = backend.pool.malloc(a.nbytes, stream[-1].handle if stream else None)
        return out

    # -- properties ---------------------------------------------------------------------------
    @property
    def ptr(self):
        """The device address of element [0, ..., 0] (raises FreedArrayError once freed)."""
        return self._mem.ptr + self._offset

    ndim = property(lambda self: len(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)

    @property
    def flags(self):
        """NumPy's layout flags: c_contiguous, f_contiguous, owndata."""
        f = layout.is_f_contiguous(self.shape, self.strides, self.itemsize)
        return types.SimpleNamespace(c_contiguous=self.c_contiguous, f_contiguous=f, owndata=self.base is None)

    @property
    def freed(self):
        return self._mem.freed

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):  # NumPy's: the subarrays along the first axis (views); a 0-d array has none
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __format__(self, spec):
        """f"{a:.3f}": a 0-d array formats as its NumPy scalar (a read-back); other arrays take only an
        empty spec (their str), as NumPy's ndarray."""
        if not self.shape:
            return self._one(lambda v: format(v[()], spec), "a formatted scalar", "format()")
        if spec:
            raise TypeError("unsupported format string passed to DeviceArray.__format__ (NumPy formats "
                            "0-d arrays only; format a.get() or one element)")
        return str(self)

    def __repr__(self):
        if self.freed:
            return f"DeviceArray(<freed>, shape={self.shape}, dtype={self.dtype})"
        body = np.array2string(self.get(), separator=", ", prefix="DeviceArray(")
        return f"DeviceArray({body}, dtype={self.dtype}, backend={self.backend.name})"

    def __str__(self):  # print(a): NumPy's text of the values (all of a small array)
        return repr(self) if self.freed else str(self.get())

    def _one(self, convert, what, call):
        refuse_in_capture(f"{call} of a DeviceArray", _READ_BACK)
        if self.size != 1:
            raise TypeError(f"only one-element arrays convert to {what}, this one has {self.size}")
        return convert(self.get().reshape(()))

    def __bool__(self):
        refuse_in_capture("bool() of a DeviceArray", _READ_BACK)
        if self.size != 1:
            raise ValueError(f"the truth value of an array of {self.size} elements is ambiguous; "
                             "use .any() or .all()")
        return bool(self.get())

    def __float__(self):
        return self._one(float, "float", "float()")

    def __int__(self):
        return self._one(int, "int", "int()")

    item = method("item", "(*index): one element as a Python scalar (the only one, or at a flat or per-axis index).")

    def tolist(self):
        """The elements as nested Python lists of Python scalars (a host copy)."""
        return self.get().tolist()

    # -- transfers ----------------------------------------------------------------------------
    def set(self, host, stream=None):
        """Copies ndarray `host` (same shape and dtype) into this array. Asynchronous when a stream
        is given and `host` is pinned; with pageable memory it warns and copies synchronously."""
        host = np.asarray(host)
        if host.shape != self.shape:
            raise ValueError(f"set: host array shape {host.shape} does not match device shape {self.shape}")
        if host.dtype != self.dtype:
            raise TypeError(f"set: host dtype {host.dtype} does not match device dtype {self.dtype}")
        if not self.c_contiguous:  # through a contiguous buffer, then a strided copy
            impl.copy_to(self, DeviceArray(self.shape, self.dtype).set(host, stream), stream)
            return self
        host = np.ascontiguousarray(host)
        handle = copy_handle(host, stream, "host-to-device", self)
        self.backend.htod(self.ptr, host.ctypes.data, self.nbytes, handle)
        return self

    def get(self, stream=None, out=None):
        """Copies the array to the host and returns an ndarray. With a stream and a pinned `out`
        the copy is asynchronous: synchronize the stream before reading `out`."""
        if out is None:
            refuse_in_capture("DeviceArray.get()", _READ_BACK + " (a pinned `out` is copied into at each replay)")
            out = np.empty(self.shape, self.dtype)
        elif out.shape != self.shape or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ValueError(f"get: out must be a C-contiguous {self.dtype} array of shape {self.shape}, "
                             f"got {out.dtype} {out.shape}")
        src = self if self.c_contiguous else self.copy(stream)
        handle = copy_handle(out, stream, "device-to-host", src)
        self.backend.dtoh(out.ctypes.data, src.ptr, self.nbytes, handle)
        if handle is None:  # a host synchronization: report a bad index a kernel found (device_checks)
            device_checks.raise_pending()
        return out

    def copy(self, stream=None):
        """A new C-contiguous array with the same contents (a device-to-device copy)."""
        out = DeviceArray(self.shape, self.dtype)
        if self.c_contiguous:
            self.backend.dtod(out.ptr, self.ptr, self.nbytes, stream_handle(stream, out, self))
            return out
        return impl.copy_to(out, self, stream)

    def copy_from(self, src, stream=None):
        """Copies DeviceArray `src` (same size and dtype) into this array, device to device."""
        if src.dtype != self.dtype or src.size != self.size:
            raise ValueError(f"copy_from: {src.dtype} {src.shape} into {self.dtype} {self.shape} "
                             "(needs the same dtype and size)")
        if not (self.c_contiguous and src.c_contiguous):
            return impl.copy_to(self, src.reshape(self.shape), stream)
        self.backend.dtod(self.ptr, src.ptr, self.nbytes, stream_handle(stream, self, src))
        return self

    def __reduce__(self):
        """pickle.dumps(a): a host copy; unpickling makes a new C-contiguous DeviceArray of the same
        dtype, shape and values on the current backend (a view comes back as an array of its own, as
        CuPy's, whose pickles are its host copy too)."""
        return to_device, (self.get(),)

    def __deepcopy__(self, memo):
        """copy.deepcopy(a): a new C-contiguous array with the same contents, copied on the device (as
        CuPy's: no host round trip; a view becomes an array of its own)."""
        return self.copy()

    __copy__ = copy  # copy.copy(a): NumPy's and CuPy's copy.copy is a copy of the data too

    def free(self):
        """Returns the memory to the pool now; this array and every view of it become unusable."""
        self._mem.free()

    # -- views (gpublas.core.indexing) -------------------------------------------------------------
    def _view(self, shape, strides, offset=0):
        """A view of the same memory: `offset` bytes from this array's first element; shape and
        strides are tuples of ints (the constructor takes them unchecked)."""
        mem = self._mem
        if mem.freed:
            mem.ptr  # raises FreedArrayError: a view of freed memory is an error now, not later
        out = object.__new__(DeviceArray)  # the constructor's view branch, without its call (views are many)
        out.shape, out.dtype, out.strides, out.size = shape, self.dtype, strides, math.prod(shape)
        out.nbytes = out.size * out.dtype.itemsize
        out.c_contiguous = layout.is_c_contiguous(shape, strides, out.dtype.itemsize)
        out.backend = mem.pool.backend if mem.pool is not None else backends.current()
        out._mem, out._offset, out.base = mem, self._offset + offset, self if self.base is None else self.base
        return out

    def __getitem__(self, key):
        """Basic indexing (ints, slices with any step, None, ...) returns a view, as NumPy's; one integer
        or boolean array in the key gathers into a new array (gpublas.core.indexing states the rules)."""
        return impl.getitem(self, key)

    def __setitem__(self, key, value):
        """a[key] = scalar or array (broadcast, converted to a's dtype), as NumPy's; also through an
        integer array or a mask (repeated indices: the last one wins)."""
        impl.setitem(self, key, value)

    def reshape(self, *shape, order="C"):
        """A view with a new shape when the layout allows (always for a contiguous array), else a copy,
        as NumPy's; `order` 'C', 'F' or 'A' reads and places the elements in that order."""
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        if order == "C" and type(shape) is tuple:  # a layout's reshapes worked out once (array_layouts)
            for s in shape:
                if type(s) is not int:  # 2.0 equals 2 as a key, but reshape refuses it
                    return impl.reshape(self, shape, order)
            key = (self.shape, self.strides, self.dtype.itemsize, shape)
            view = RESHAPES.get(key)
            if view is None:  # (not in an except: a refused shape's ValueError comes alone)
                return reshape_kept(impl.reshape(self, shape, order), self, key)
            mem = self._mem
            if mem.freed:
                mem.ptr  # raises FreedArrayError, as _view does
            out = object.__new__(DeviceArray)
            out.shape, out.strides, out.c_contiguous = view
            out.dtype, out.size, out.nbytes, out._mem, out._offset = self.dtype, self.size, self.nbytes, mem, self._offset
            out.backend = mem.pool.backend if mem.pool is not None else backends.current()
            out.base = self if self.base is None else self.base
            return out
        return impl.reshape(self, shape, order)

    def ravel(self, order="C"):
        """The elements as 1-D: a view when contiguous in `order`, else a copy (NumPy's rule)."""
        return impl.ravel(self, order)

    def flatten(self, order="C"):
        """The elements as a new 1-D array (always a copy)."""
        return impl.reshape(self, -1, order, copy=True)

    def transpose(self, *axes):
        """A view with the axes permuted (reversed by default), as NumPy's."""
        return impl.transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes)

    @property
    def T(self):
        """The transpose as a view (axes reversed); gpublas.transpose makes a contiguous copy."""
        return impl.transpose(self, ())

    def squeeze(self, axis=None):
        """A view without the axes of size 1 (or the given ones), as NumPy's (gpublas.numpy_api.manipulation)."""
        return impl.squeeze(self, axis)

    # complex parts (gpublas.numpy_api.manipulation: views of a complex array; a real array's real is itself, its
    # imag zeros) and the conjugate, a new array (gpublas.core.elementwise)
    real, imag = property(lambda self: impl.real(self)), property(lambda self: impl.imag(self))
    conj = conjugate = lambda self: impl.conjugate(self)  # noqa: E731

    def view(self, dtype=None):
        """A view of the same memory as `dtype` of the same itemsize (float32 <-> int32 ...)."""
        return impl.view(self, dtype)

    # -- filling and converting ---------------------------------------------------------------
    def fill(self, value, stream=None):
        """Sets every element to `value` (a memset for zero, else a fill kernel)."""
        if self.size == 0:
            return self
        if not self.c_contiguous:
            return impl.copy_to(self, DeviceArray((), self.dtype).fill(value, stream), stream)
        if value == 0:
            self.backend.memset_d8(self.ptr, 0, self.nbytes, stream_handle(stream, self))
        else:
            value = dtypes.scalar_arg(self.dtype, value)
            get_kernel("memory", "fill_real", self.dtype)(*geometry_1d(self.size), self, value, self.size, stream=stream)
        return self

    def astype(self, dtype, copy=True):
        """A new C-contiguous array converted to `dtype` (any of DTYPES; as C casts: floats to ints
        truncate toward zero, anything nonzero is True; complex to real keeps the real part and warns
        NumPy's ComplexWarning). copy=False returns self when it already has `dtype` (any layout)."""
        dtype = dtypes.canonical(dtype)
        if dtype == self.dtype:
            return self.copy() if copy else self
        if self.dtype.kind == "c" and dtype.kind not in "cb":  # to bool tests both parts: no warning
            warnings.warn("Casting complex values to real discards the imaginary part", np.exceptions.ComplexWarning,
                          stacklevel=2)
        return impl.copy_to(DeviceArray(self.shape, dtype), self)

    # -- operators: arithmetic, each as a + b, 2 + a and a += b (gpublas.numpy_api.ops) --------------------
    __add__, __radd__, __iadd__ = arithmetic("add", "+")
    __sub__, __rsub__, __isub__ = arithmetic("subtract", "-")
    __mul__, __rmul__, __imul__ = arithmetic("multiply", "*")
    __truediv__, __rtruediv__, __itruediv__ = arithmetic("divide", "/")
    __pow__, __rpow__, __ipow__ = arithmetic("pow", "**")
    __floordiv__, __rfloordiv__, __ifloordiv__ = arithmetic("floor_divide", "//")
    __mod__, __rmod__, __imod__ = arithmetic("remainder", "%")
    # bitwise, on integer and bool arrays (gpublas.numpy_api.ops, gpublas.numpy_api.bitwise); ~ of a bool array is logical not
    __and__, __rand__, __iand__ = arithmetic("bitwise_and", "&")
    __or__, __ror__, __ior__ = arithmetic("bitwise_or", "|")
    __xor__, __rxor__, __ixor__ = arithmetic("bitwise_xor", "^")
    __lshift__, __rlshift__, __ilshift__ = arithmetic("left_shift", "<<")
    __rshift__, __rrshift__, __irshift__ = arithmetic("right_shift", ">>")

    def __invert__(self):
        return impl.invert(self)

    def __matmul__(self, other):
        return impl.matmul(self, other)

    def __rmatmul__(self, other):
        return impl.matmul(other, self)

    def __neg__(self):  # gpublas.core.elementwise
        return impl.negative(self)

    def __pos__(self):
        return self.copy()

    def __abs__(self):  # gpublas.core.elementwise
        return impl.absolute(self)

    # -- comparisons: elementwise, bool results, never identity (gpublas.numpy_api.ops) ----------------------
    __eq__, __ne__ = comparison("equal"), comparison("not_equal")
    __lt__, __le__ = comparison("less"), comparison("less_equal")
    __gt__, __ge__ = comparison("greater"), comparison("greater_equal")

    # -- reductions (gpublas.core.reduction; any and all: gpublas.numpy_api.ops) ----------------------------------
    sum, mean, max, min = reduction("sum"), reduction("mean"), reduction("max"), reduction("min")
    argmax, argmin, any, all = reduction("argmax"), reduction("argmin"), reduction("any"), reduction("all")

    var = method("var", "(axis=None, ddof=0, keepdims=False): mean((a - a.mean(axis))**2) * n / (n - ddof).")
    std = method("std", "(axis=None, ddof=0, keepdims=False): the square root of var.")
    clip = method("clip", "(min=None, max=None, out=None): values limited to [min, max], as gpublas.clip.")
    dot = method("dot", "(b): NumPy's dot up to 2-D operands (a @ b, or a * b with a scalar).")

    # -- NumPy's protocols (gpublas.numpy_api.numpy_dispatch) -------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        """Refused, as CuPy does: np.asarray(a) would copy from the device behind the caller's back."""
        raise TypeError("implicit conversion of a DeviceArray to a NumPy array is not allowed; "
                        "call .get() for a host copy")

    def __array_function__(self, func, types, args, kwargs):
        """np.sum(a), np.reshape(a, s), ...: gpublas' function of that name, or TypeError naming what to call."""
        return impl.array_function(func, types, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """np.add(a, b), np.exp(a), ndarray + a: gpublas' function, a DeviceArray result."""
        return impl.array_ufunc(ufunc, method, *inputs, **kwargs)

    # -- interop (gpublas.core.interop) ----------------------------------------------------------------
    @property
    def __cuda_array_interface__(self):
        """CUDA array interface v3 (cuda backend only: on sim there is no device pointer to share)."""
        return impl.cuda_array_interface(self)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing this array's memory (kDLCUDA on cuda, kDLCPU on sim)."""
        return impl.to_dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return impl.dlpack_device(self)


# -- constructors ---------------------------------------------------------------------------------
def empty(shape, dtype=np.float32):
    return DeviceArray(shape, dtype)


def to_device(host, stream=None, dtype=None):
    """Copies an ndarray (or anything np.asarray takes) to a new DeviceArray. float64 input stays
    float64; Python floats become float32 only when dtype says so."""
    if isinstance(host, DeviceArray):
        return host if dtype is None or np.dtype(dtype) == host.dtype else host.astype(dtype)
    host = np.asarray(host, dtype=dtype)
    out = DeviceArray(host.shape, host.dtype)
    return out.set(host, stream=stream)


def asarray(a, dtype=None):
    """`a` itself when it is a DeviceArray (of `dtype`), else a copy on the device."""
    return to_device(a, dtype=dtype)

