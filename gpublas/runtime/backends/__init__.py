"""Choosing the backend: GPUBLAS_BACKEND=cuda|sim, gpublas.use(name), else cuda where PyCUDA
imports and a device answers, and sim otherwise (with a one-line notice on stderr).

The active backend is one object that owns everything per device (memory pool, compiled modules,
kernels); use() swaps it. One object is made per name, so switching back finds its caches again.
Floors above that must see every backend as it is chosen (the profiler counts its copies) register a
callback with on_chosen(); this module imports none of them.
"""
import sys

from .. import config
from ..errors import ConfigError

_active = None
_made = {}  # name -> the backend object made for it
_on_chosen = []  # callbacks(backend) run each time a backend becomes the active one


def on_chosen(callback):
    """Calls `callback(backend)` each time current() or use() makes a backend the active one (the
    profiler registers itself so that a profile opened earlier counts the new backend's copies)."""
    _on_chosen.append(callback)


def _make(name):
    b = _made.get(name)
    if b is None:
        if name == "sim":
            from .sim import SimBackend
            b = SimBackend()
        elif name == "cuda":
            from .cuda import CudaBackend
            b = CudaBackend()
        else:
            raise ValueError(f"unknown backend '{name}': use 'cuda' or 'sim'")
        _made[name] = b
    return b


def _default():
    wanted = config.choice("GPUBLAS_BACKEND", ("cuda", "sim"), None)
    if wanted == "cuda":
        try:
            return _make(wanted)
        except Exception as e:  # the one line README promises, not a traceback through the backend
            raise ConfigError(f"GPUBLAS_BACKEND=cuda: the cuda backend cannot start ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}); unset it to use the sim backend") from None
    if wanted:
        return _make(wanted)
    try:
        return _make("cuda")
    except Exception as e:  # no PyCUDA, no driver, no device, no nvcc, or a toolkit the driver cannot load
        print(f"gpublas: cuda backend unavailable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
              "using the CPU simulator backend 'sim'", file=sys.stderr)
        return _make("sim")


def _chosen(b):
    for callback in _on_chosen:
        callback(b)


def current():
    """The active backend object, chosen on first use."""
    global _active
    if _active is None:
        _active = _default()
        _chosen(_active)
    return _active


def use(name):
    """Makes `name` ('cuda' or 'sim') the active backend. Arrays made under another backend keep
    working with their own memory but cannot be mixed with the new one's."""
    global _active
    _active = _make(name)
    _chosen(_active)
    return _active


def backend():
    """The name of the active backend: 'cuda' or 'sim'."""
    return current().name


def device_info():
    """{'name', 'compute_capability' ('cpu' on sim), 'multiprocessors', 'total_memory', 'backend'}."""
    return current().device_info()


def memory_stats():
    """The active backend's pool: {'bytes_in_use', 'bytes_held', 'bytes_cached', 'bytes_graphs' (the part
    of bytes_in_use that live graphs reserve, gpublas.graph), 'device_allocations', 'allocations',
    'peak_bytes_in_use' (the most bytes in use since the start or reset_peak_memory_stats(): PyTorch's
    max_memory_allocated)}."""
    return current().pool.stats()


def reset_peak_memory_stats():
    """Starts memory_stats()['peak_bytes_in_use'] again from the bytes in use now."""
    current().pool.reset_peak()


def free_cached():
    """Returns the active backend's cached blocks to the device (arrays in use are untouched)."""
    current().pool.free_cached()
