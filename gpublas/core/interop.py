"""Zero-copy exchange with other array libraries: DLPack and the CUDA array interface (v3).

    t = torch.from_dlpack(a)             # cuda: shares a's device memory (kDLCUDA)
    b = gpublas.from_dlpack(cupy_array)  # and back, no copy
    h = np.from_dlpack(a)                # sim: device memory is host memory (kDLCPU), no copy
    c = gpublas.as_device_array(obj)     # anything with __cuda_array_interface__ or __dlpack__

DLPack 1.0: a consumer passing max_version >= (1, 0) (NumPy 2, PyTorch) gets a "dltensor_versioned"
capsule, never flagged read-only (device memory is writable), so np.from_dlpack(a) is a writable
view; from_dlpack asks producers for one too and refuses a tensor they flag read-only (BufferError:
gpublas arrays are writable), taking unversioned capsules from older producers.
Sharing is two-way: a write through either side is seen by the other. The exporter's memory stays
alive while the importer holds it (a DLPack capsule keeps the DeviceArray's allocation; an imported
array keeps the producer's object), but `free()` on a shared DeviceArray frees it regardless: don't.
Streams: on cuda an exporter synchronizes the device before handing out memory unless the consumer
passes stream=-1; an importer synchronizes when the producer names a stream. On sim a launch has
finished when it returns and the memory is kDLCPU, for which DLPack defines no stream: `stream` must
be None (or -1, "no synchronization", PyTorch's default), anything else raises BufferError.

PyTorch on sim (CPU tensors, kDLCPU): `torch.from_dlpack(a)` and `gpublas.from_dlpack(t)` /
`as_device_array(t)` share memory both ways (the simulator addresses any host memory), views
included; strides travel in elements. PyTorch has no negative strides (torch 2.13 aborts the whole
process on importing one): hand it `a[::-1].copy()`, not `a[::-1]`.
"""
import ctypes

import numpy as np

from ..runtime import dtypes
from .array import DTYPES, DeviceArray, provide
from ..runtime.pool import Allocation
from ..runtime.stream import current_stream

KDLCPU, KDLCUDA = 1, 2
# numpy dtype <-> DLPack (type code, bits): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6;
# lanes are 1.
DL_TYPES = {d: row.dlpack for d, row in dtypes.TABLE.items()}
NP_TYPES = {v: k for k, v in DL_TYPES.items()}
DL_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
_NAME, _USED = b"dltensor", b"used_dltensor"
_NAME_V, _USED_V = b"dltensor_versioned", b"used_dltensor_versioned"
VERSION = (1, 0)  # the DLPack version of the versioned capsules made and taken here
FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2  # DLPACK_FLAG_BITMASK_READ_ONLY, _IS_COPIED


# -- dlpack.h's structs: DLManagedTensor (0.8, "dltensor") and DLManagedTensorVersioned (1.0) ---------
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", _DELETER_V), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]  # c_void_p: callable on a dying capsule
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_rename = ctypes.pythonapi.PyCapsule_SetName
_capsule_rename.restype = ctypes.c_int
_capsule_rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]


# -- exporting ----------------------------------------------------------------------------------
# Address of each DLManagedTensor handed out -> what it points into (the struct, its shape and strides
# buffers, and the DeviceArray that owns the memory). The deleter drops the entry.
_exported = {}


def _release(address):
    _exported.pop(address, None)


@_DELETER
def _deleter(managed):
    _release(ctypes.cast(managed, ctypes.c_void_p).value)


@_DELETER_V
def _deleter_versioned(managed):
    _release(ctypes.cast(managed, ctypes.c_void_p).value)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    """A capsule nobody consumed (still named "dltensor" or "dltensor_versioned") runs the deleter itself."""
    for name in (_NAME, _NAME_V):
        if _capsule_valid(capsule, name):
            _release(_capsule_pointer_raw(capsule, name))


def _device_id(backend):
    """The CUDA ordinal of the cuda backend's device (GPUBLAS_DEVICE may pick another than 0); 0 on sim."""
    if backend.name != "cuda":
        return 0
    drv, bus = backend.drv, backend.device.pci_bus_id()
    return next((i for i in range(drv.Device.count()) if drv.Device(i).pci_bus_id() == bus), 0)


def dlpack_device(a):
    """(device type, device id): kDLCUDA on the cuda backend, kDLCPU on sim (host memory)."""
    return (KDLCUDA if a.backend.name == "cuda" else KDLCPU), _device_id(a.backend)


def _sync_for_consumer(a, stream):
    """The consumer reads on `stream` (None: its default; -1: it asked for no synchronization)."""
    if a.backend.name != "cuda":
        if stream is not None and stream != -1:
            raise BufferError(f"__dlpack__: stream={stream!r}, but this array is host memory (kDLCPU, the "
                              f"{a.backend.name} backend), which has no streams: pass None")
        return
    if stream != -1:
        a.backend.synchronize()


def to_dlpack(a, stream=None, max_version=None, dl_device=None, copy=None):
    """A PyCapsule sharing a's memory (a.copy()'s with copy=True): a DLPack 1.0 "dltensor_versioned"
    when the consumer takes one (max_version >= (1, 0), as NumPy 2 and PyTorch pass), flagged
    writable (a DeviceArray's memory is never read-only) and IS_COPIED for copy=True; else the
    unversioned "dltensor" older consumers read."""
    if dl_device is not None and tuple(dl_device) != dlpack_device(a):
        raise BufferError(f"__dlpack__: this array lives on device {dlpack_device(a)}, not {tuple(dl_device)}")
    if copy:
        a = a.copy()
    ptr = a.ptr  # raises FreedArrayError for a freed array
    _sync_for_consumer(a, stream)
    versioned = max_version is not None and tuple(max_version)[:2] >= VERSION
    managed = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
    strides = (ctypes.c_int64 * max(a.ndim, 1))(*(s // a.itemsize for s in a.strides))
    t = managed.dl_tensor
    t.data, t.byte_offset, t.ndim = ptr, 0, a.ndim
    t.device = DLDevice(*dlpack_device(a))
    t.dtype = DLDataType(*DL_TYPES[a.dtype], 1)
    t.shape, t.strides = shape, strides
    if versioned:
        managed.version, managed.flags = DLPackVersion(*VERSION), FLAG_IS_COPIED if copy else 0
    managed.deleter = _deleter_versioned if versioned else _deleter
    address = ctypes.addressof(managed)
    _exported[address] = (managed, shape, strides, a)
    return _capsule_new(address, _NAME_V if versioned else _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


# -- importing ----------------------------------------------------------------------------------
class ExternalMemory(Allocation):
    """Memory another library owns; `owner` (the producer's object, or a DLPack deleter guard)
    keeps it alive for as long as an array uses it."""

    __slots__ = ("owner",)

    def __init__(self, ptr, owner):
        super().__init__(ptr, 0, None)
        self.owner = owner

    def free(self):
        self.freed, self.owner = True, None


class _DLPackGuard:
    """Runs the producer's deleter once the last array using the tensor is gone."""

    def __init__(self, managed_address, struct):
        self.address, self.struct = managed_address, struct

    def __del__(self):
        managed = self.struct.from_address(self.address)
        if managed.deleter:
            managed.deleter(ctypes.pointer(managed))


def _wrap(ptr, shape, dtype, strides, owner, what):
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        raise TypeError(f"{what}: dtype {dtype} is not one gpublas holds ({', '.join(map(str, DTYPES))})")
    if strides is not None and any(s % dtype.itemsize for s in strides):
        raise ValueError(f"{what}: strides {strides} are not whole {dtype} elements")
    return DeviceArray(shape, dtype, _mem=ExternalMemory(ptr, owner), _strides=strides)


def from_dlpack(obj):
    """A DeviceArray sharing the memory of any object with __dlpack__ (CuPy, PyTorch, JAX, NumPy on
    sim...): the device must be the active backend's (kDLCUDA on cuda, kDLCPU on sim)."""
    from ..runtime import backends

    backend = backends.current()
    want = KDLCUDA if backend.name == "cuda" else KDLCPU
    if hasattr(obj, "__dlpack_device__") and obj.__dlpack_device__()[0] != want:
        raise BufferError(f"from_dlpack: the object lives on DLPack device {obj.__dlpack_device__()}; the "
                          f"{backend.name} backend takes device type {want} (copy it there first)")
    stream = current_stream()
    kwargs = {"stream": stream.handle.handle if stream is not None else 1} if backend.name == "cuda" else {}
    try:
        capsule = obj.__dlpack__(max_version=VERSION, **kwargs)
    except TypeError:  # a producer older than DLPack 1.0 (no max_version)
        capsule = obj.__dlpack__(**kwargs)
    name = _capsule_name(capsule)
    struct = DLManagedTensorVersioned if name == _NAME_V else DLManagedTensor
    address = _capsule_pointer(capsule, name)
    managed = struct.from_address(address)
    if struct is DLManagedTensorVersioned:  # refused before taking it: the capsule still deletes it
        if managed.version.major != VERSION[0]:
            raise BufferError(f"from_dlpack: DLPack {managed.version.major}.{managed.version.minor} tensor; "
                              f"gpublas reads version {VERSION[0]}")
        if managed.flags & FLAG_READ_ONLY:
            raise BufferError("from_dlpack: the producer marks this tensor read-only and gpublas arrays are "
                              "writable; copy it with gpublas.to_device")
    t = managed.dl_tensor
    guard = _DLPackGuard(address, struct)  # from here on the tensor is ours to delete
    _capsule_rename(capsule, _USED_V if struct is DLManagedTensorVersioned else _USED)
    if (t.device.device_type, t.device.device_id) != (want, _device_id(backend)):
        raise BufferError(f"from_dlpack: got a tensor on DLPack device {(t.device.device_type, t.device.device_id)}, "
                          f"the {backend.name} backend is on {(want, _device_id(backend))}")
    code = (t.dtype.code, t.dtype.bits)
    if code not in NP_TYPES or t.dtype.lanes != 1:
        name = f"{DL_CODE_NAMES.get(code[0], 'type code ' + str(code[0]))}{code[1]}"
        raise TypeError(f"from_dlpack: DLPack dtype {name} (code {code[0]}, {code[1]} bits, {t.dtype.lanes} "
                        f"lanes) is not one gpublas holds ({', '.join(map(str, DTYPES))}); convert it first")
    dtype = NP_TYPES[code]
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim)) if t.strides else None
    return _wrap((t.data or 0) + t.byte_offset, shape, dtype, strides, guard, "from_dlpack")


def cuda_array_interface(a):
    """The CUDA array interface (v3) of DeviceArray `a`, on the cuda backend."""
    if a.backend.name != "cuda":
        raise AttributeError("__cuda_array_interface__: the sim backend's memory is host memory, not CUDA "
                             "device memory; use __dlpack__ (np.from_dlpack) instead")
    typestr = dtypes.TABLE[a.dtype].typestr
    if typestr is None:
        raise AttributeError(f"__cuda_array_interface__: it has no type string for {a.dtype}; share a {a.dtype} "
                             "array through DLPack (torch.from_dlpack(a), kDLBfloat)")
    stream = current_stream()
    return {"shape": a.shape, "typestr": typestr, "data": (a.ptr, False), "version": 3,
            "strides": None if a.c_contiguous else a.strides,
            "stream": stream.handle.handle if stream is not None else 1}


def as_device_array(obj):
    """A DeviceArray sharing obj's memory: obj itself when it is one; else through obj's
    __cuda_array_interface__ (cuda backend) or __dlpack__; on sim an ndarray's host memory is
    device memory, so it is wrapped too. Raises TypeError for anything else (to_device copies)."""
    from ..runtime import backends

    if isinstance(obj, DeviceArray):
        return obj
    backend = backends.current()
    cai = getattr(obj, "__cuda_array_interface__", None) if backend.name == "cuda" else None
    if cai is not None:
        if cai.get("mask") is not None:
            raise TypeError("as_device_array: masked arrays (a 'mask' in the interface) are not supported")
        if cai.get("stream") is not None:
            backend.synchronize()
        return _wrap(cai["data"][0], tuple(cai["shape"]), cai["typestr"], cai.get("strides"), obj,
                     "as_device_array")
    if hasattr(obj, "__dlpack__"):
        return from_dlpack(obj)
    raise TypeError(f"as_device_array: a {type(obj).__name__} exposes neither __cuda_array_interface__ nor "
                    "__dlpack__; copy it with gpublas.to_device")


provide(cuda_array_interface=cuda_array_interface, to_dlpack=to_dlpack,  # DeviceArray's interfaces
        dlpack_device=dlpack_device)
