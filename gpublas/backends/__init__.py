"""Choosing the backend: GPUBLAS_BACKEND=cuda|sim, gpublas.use(name), else cuda where PyCUDA
imports and a device answers, and sim otherwise (with a one-line notice on stderr)."""
import os
import sys

_active = None


def _make(name):
    if name == "sim":
        from .sim import SimBackend
        return SimBackend()
    if name == "cuda":
        from .cuda import CudaBackend
        return CudaBackend()
    raise ValueError(f"unknown backend '{name}': use 'cuda' or 'sim'")


def _default():
    wanted = os.environ.get("GPUBLAS_BACKEND", "").strip().lower()
    if wanted:
        return _make(wanted)
    try:
        return _make("cuda")
    except Exception as e:  # no PyCUDA, no driver, or no device
        print(f"gpublas: no CUDA device ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
              "using the CPU simulator backend 'sim'", file=sys.stderr)
        return _make("sim")


def current():
    """The active backend object, chosen on first use."""
    global _active
    if _active is None:
        _active = _default()
    return _active


def use(name):
    """Makes `name` ('cuda' or 'sim') the active backend. Arrays made under another backend keep
    working with their own memory but cannot be mixed with the new one's."""
    global _active
    if _active is None or _active.name != name:
        _active = _make(name)
        from .. import launch
        launch.forget_modules()
    return _active


def backend():
    """The name of the active backend: 'cuda' or 'sim'."""
    return current().name


def device_info():
    """{'name', 'compute_capability' ('cpu' on sim), 'multiprocessors', 'total_memory', 'backend'}."""
    return current().device_info()
