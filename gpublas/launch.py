"""Kernels: load a family from cuda_src/ (or any source), prepare its argument packing once, launch.

    k = get_kernel("memory", "fill_real", dtype=np.float32)
    k(grid=ceil_div(n, 256), block=256, args...)          # args: DeviceArrays, ints, floats
"""

import numpy as np

from . import backends, source
from .errors import LaunchError
from .stream import current_stream

MAX_THREADS_PER_BLOCK = 1024
REAL = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.int32): "int"}


def ceil_div(a, b):
    return -(-a // b)


def simulated():
    """True on the sim backend, where a thread (and each barrier it reaches) costs far more than an
    element: launchers there pick fewer threads per block or fewer blocks; the kernels are the same."""
    return backends.current().name == "sim"


def _dim3(v):
    if isinstance(v, (int, np.integer)):
        return (int(v), 1, 1)
    v = tuple(int(x) for x in v)
    return v + (1,) * (3 - len(v))


class Module:
    """A compiled source: its kernels by name, each prepared on first use."""

    def __init__(self, text, defines, source_name):
        self.backend = backends.current()
        self.signatures = source.kernel_signatures(text, defines)
        self.handle = self.backend.compile(text, defines, source_name)
        self.source_name = source_name
        self._kernels = {}

    def get(self, name):
        k = self._kernels.get(name)
        if k is None:
            if name not in self.signatures:
                raise LaunchError(f"no kernel '{name}' in {self.source_name}; it has "
                                  f"{', '.join(self.signatures) or 'none'}")
            k = self._kernels[name] = Kernel(self, name, self.signatures[name])
        return k


class Kernel:
    """One __global__ function with its argument packing prepared (PyCUDA's prepared call)."""

    def __init__(self, module, name, argcodes):
        self.name = name
        self.argcodes = argcodes
        self._launch = module.backend.prepare(module.handle, name, argcodes)
        self._pointer = tuple(c == "P" for c in argcodes)
        self._float = tuple(c in "fd" for c in argcodes)

    def __call__(self, grid, block, *args, shared=0, stream=None):
        grid, block = _dim3(grid), _dim3(block)
        if len(args) != len(self.argcodes):
            raise TypeError(f"kernel '{self.name}' takes {len(self.argcodes)} arguments "
                            f"({self.argcodes}), {len(args)} given")
        if block[0] * block[1] * block[2] > MAX_THREADS_PER_BLOCK or min(block) < 1:
            raise LaunchError(f"kernel '{self.name}': block {block} is not 1 to {MAX_THREADS_PER_BLOCK} threads")
        if min(grid) < 0:
            raise LaunchError(f"kernel '{self.name}': negative grid {grid}")
        if min(grid) == 0:
            return
        values = [_pointer(a, self.name) if p else a for a, p in zip(args, self._pointer)]
        if stream is None:
            stream = current_stream()
        self._launch(grid, block, shared, stream.handle if stream is not None else None, values)


def _pointer(a, kernel):
    """A pointer argument's value: a DeviceArray's address, an int, or None (NULL)."""
    try:
        return a.ptr
    except AttributeError:
        pass
    if a is None:
        return 0
    if isinstance(a, (int, np.integer)):
        return int(a)
    raise TypeError(f"kernel '{kernel}': a pointer argument needs a DeviceArray, got {type(a).__name__}")


def load_source(text, defines=None, source_name="<source>"):
    """Compiles `text` for the active backend (memoized in the backend object, cached on disk)."""
    modules = backends.current().modules
    key = (text, tuple(sorted((defines or {}).items())), source_name)
    m = modules.get(key)
    if m is None:
        m = modules[key] = Module(text, defines, source_name)
    return m


def get_kernel(family, name, dtype=None, *, root=None, **defines):
    """Kernel `name` of <root>/<family>.cu (root: a folder, default cuda_src/), compiled with `real`
    set to dtype's C type."""
    kernels = backends.current().kernels
    key = (family, name, dtype, root)  # the common case, built cheaply: launches hit it
    if defines:
        key += tuple(sorted(defines.items()))
    k = kernels.get(key)
    if k is None:
        k = kernels[key] = _load_kernel(family, name, dtype, root, defines)
    return k


def _load_kernel(family, name, dtype, root, defines):
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype not in REAL:
            raise TypeError(f"kernel '{name}': unsupported dtype {dtype}; expected float32, float64 or int32")
        defines["real"] = REAL[dtype]
    return load_source(source.read(family, root), defines, str(source.path(family, root))).get(name)
