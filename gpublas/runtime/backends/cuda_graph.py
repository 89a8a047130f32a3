"""Graphs on the `cuda` backend: the driver's stream capture, called through ctypes.

PyCUDA (up to 2026.1) wraps no graph API, so the four driver calls a graph needs are made on
libcuda directly, with PyCUDA's stream handles (Stream.handle, a CUstream) in the context PyCUDA
made current: cuStreamBeginCapture_v2 when `with gpublas.graph()` opens, cuStreamEndCapture and
cuGraphInstantiateWithFlags (once) when it closes, cuGraphLaunch per replay, cuGraphExecDestroy
when the graph is freed. The capture mode is RELAXED, so the pool may still cuMemAlloc inside a
capture (PyTorch's allocator switches to relaxed around its cudaMalloc for the same reason); what
would break a capture (a synchronize, a read-back, a pageable copy) gpublas refuses in Python first.
"""
import ctypes
import functools
import sys

from ..errors import GraphError

CAPTURE_MODE_RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED
NON_BLOCKING = 1          # CU_STREAM_NON_BLOCKING: a capture stream with no implicit tie to stream 0


class Driver:
    """The libcuda entry points of stream capture, each checked."""

    def __init__(self, lib):
        self.lib = lib
        p, vp = ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p
        for name, argtypes in [("cuStreamBeginCapture_v2", [vp, ctypes.c_int]), ("cuStreamEndCapture", [vp, p]),
                               ("cuGraphInstantiateWithFlags", [p, vp, ctypes.c_ulonglong]),
                               ("cuGraphLaunch", [vp, vp]), ("cuGraphExecDestroy", [vp]), ("cuGraphDestroy", [vp]),
                               ("cuGetErrorName", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])]:
            f = getattr(lib, name)
            f.argtypes, f.restype = argtypes, ctypes.c_int

    def _check(self, status, what):
        if status:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(status, ctypes.byref(name))
            raise GraphError(f"{what} failed: {(name.value or b'CUDA error').decode()} ({status})")

    def begin(self, stream):
        self._check(self.lib.cuStreamBeginCapture_v2(stream.handle, CAPTURE_MODE_RELAXED), "cuStreamBeginCapture")

    def end(self, stream):
        """Ends the capture on `stream` and instantiates it: the executable graph (a handle)."""
        graph, exe = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self.lib.cuStreamEndCapture(stream.handle, ctypes.byref(graph)), "cuStreamEndCapture")
        try:
            self._check(self.lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, 0), "cuGraphInstantiate")
        finally:
            self.lib.cuGraphDestroy(graph)  # the executable keeps what it needs
        return exe.value

    def launch(self, exe, stream):
        self._check(self.lib.cuGraphLaunch(exe, stream.handle if stream is not None else None), "cuGraphLaunch")

    def destroy(self, exe):
        self.lib.cuGraphExecDestroy(exe)


def sync_beside_captures(backend, stream, sync):
    """GPUBLAS_LAUNCH_BLOCKING's wait after a launch on `stream` (not capturing): `sync` (the whole context),
    unless a stream of another thread is capturing a graph, which a context synchronize would break: then
    the launch's own stream, or an event recorded on stream 0."""
    if not backend._capturing:
        sync()
    elif stream is not None:
        stream.synchronize()
    else:
        backend.drv.Event().record(None).synchronize()


@functools.lru_cache(maxsize=None)
def driver():
    """The Driver over this process's libcuda (the one PyCUDA loaded)."""
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so", "libcuda.dylib"]
    for name in names:
        try:
            return Driver(ctypes.CDLL(name))
        except (OSError, AttributeError):
            continue
    raise GraphError("graphs on the cuda backend need the driver's stream capture (libcuda with "
                     "cuStreamBeginCapture_v2 and cuGraphInstantiateWithFlags, CUDA 11.4 or newer)")
