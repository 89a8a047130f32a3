"""copy.deepcopy and pickle of nn's objects (Modules, Parameters, optimizers), as PyTorch's work.

Device memory cannot be pickled, so a DeviceArray in an object's state travels as host bytes: a
Parameter's `.data` and `.grad` as host copies of their own elements; a Module's other arrays (its
buffers, forward caches, workspaces) once per device allocation, with each array's offset, shape and
strides, so that arrays which were views of one allocation (an LSTM's per-step views of its
workspace) come back as views of one new allocation. Containers (dict, list, tuple) and nn's own helper
objects (the workspace) are walked. The
copy lands on the current backend. An optimizer's flat groups are rebuilt over the copied parameters
(nn/optim.py), so a model and its optimizer copied together (deepcopy((model, opt)), one pickle)
stay joined: the copy's parameters are views of the copy's flat buffers.
"""
from collections import OrderedDict

import numpy as np

import gpublas
from gpublas.runtime import device_checks


class _Allocation:
    """One device allocation's bytes, on the host."""

    def __init__(self, data):
        self.data = data


class _Saved:
    """A DeviceArray as (its allocation's bytes, offset, shape, strides, dtype)."""

    def __init__(self, alloc, offset, shape, strides, dtype):
        self.alloc, self.offset, self.shape, self.strides, self.dtype = alloc, offset, shape, strides, dtype


class _Object:
    """One of nn's own helper objects (an LSTM's workspace) with its attributes packed."""

    def __init__(self, cls, state):
        self.cls, self.state = cls, state


def _helper(value):
    """True for an instance of a plain class of nn's (not a Module or Parameter: those pack themselves)."""
    cls = type(value)
    return (cls.__module__.startswith("nn.") and hasattr(value, "__dict__") and "__getstate__" not in vars(cls)
            and not any("__getstate__" in vars(c) for c in cls.__mro__[1:-1]))


def pack(value, memo):
    """`value` with every DeviceArray in it (through dicts, lists and tuples) replaced by a _Saved;
    `memo` ({}: one per object) keeps one _Allocation per device allocation."""
    if isinstance(value, gpublas.DeviceArray):
        mem = value._mem
        if mem.freed:  # a cache its layer freed: nothing to keep
            return None
        alloc = memo.get(id(mem))
        if alloc is None:
            host = np.empty(mem.nbytes, np.uint8)
            value.backend.dtoh(host.ctypes.data, mem.ptr, mem.nbytes)
            device_checks.raise_pending()
            alloc = memo[id(mem)] = _Allocation(host)
        return _Saved(alloc, value._offset, value.shape, value.strides, value.dtype)
    if isinstance(value, (dict, OrderedDict)):
        return type(value)((k, pack(v, memo)) for k, v in value.items())
    if _helper(value):
        return _Object(type(value), pack(dict(value.__dict__), memo))
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(pack(v, memo) for v in value)
    return value


def unpack(value, memo):
    """pack's inverse: each _Allocation uploaded once, each _Saved a DeviceArray over it."""
    if isinstance(value, _Saved):
        mem = memo.get(id(value.alloc))
        if mem is None:
            mem = memo[id(value.alloc)] = gpublas.to_device(value.alloc.data)._mem
        return gpublas.DeviceArray(value.shape, value.dtype, _mem=mem, _offset=value.offset, _strides=value.strides)
    if isinstance(value, (dict, OrderedDict)):
        return type(value)((k, unpack(v, memo)) for k, v in value.items())
    if isinstance(value, _Object):
        obj = value.cls.__new__(value.cls)
        obj.__dict__.update(unpack(value.state, memo))
        return obj
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(unpack(v, memo) for v in value)
    return value


def host(a):
    """A DeviceArray's elements as a host ndarray (None stays None)."""
    return None if a is None else a.get()


def device(a):
    return None if a is None else gpublas.to_device(a)
