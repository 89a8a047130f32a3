"""Graphs on the `sim` backend: recording a capturing stream's work, replaying it in one C call.

A sim stream handle is a SimStream; while gpublas.graph captures on it, `capture` is a SimCapture
and the backend's launch and copy methods append to it instead of running (backends/sim.py). At
the end of the capture the list becomes a SimGraph: a ctypes array of ops (each launch's entry
point and packed record, each copy's operands) that gpublas/runtime/sim/graph_replay.cpp's
gpublas_sim_replay runs in order, so a replay costs one call from Python whatever its length.
"""
import ctypes
import struct
import threading
from pathlib import Path

from ..errors import GraphError, LaunchError

REPLAY_SOURCE = Path(__file__).resolve().parent.parent / "sim" / "graph_replay.cpp"
RECORD_MAX = 4096  # graph_replay.cpp's RECORD_MAX
_DIMS = struct.Struct("@6I")  # a record's grid and block (record.h's LaunchHeader)
_COPY_NAMES = {"htod": "[memcpy HtoD]", "dtoh": "[memcpy DtoH]", "dtod": "[memcpy DtoD]", "memset": "[memset]"}
_lock = threading.Lock()
_replay = None  # gpublas_sim_replay, once compiled and loaded


class Op(ctypes.Structure):
    """graph_replay.cpp's ReplayOp."""
    _fields_ = [("entry", ctypes.c_void_p), ("record", ctypes.c_void_p), ("bytes", ctypes.c_uint64),
                ("dst", ctypes.c_void_p), ("src", ctypes.c_void_p), ("value", ctypes.c_int64)]


class SimStream:
    """A sim stream handle: its work runs as it is issued, unless `capture` records it."""
    __slots__ = ("capture",)

    def __init__(self):
        self.capture = None


class SimCapture:
    """The work recorded on one capturing stream, in issue order: ops for the C loop, and beside
    each what Python needs to name it (kernel name, module, grid and block; or the copy's kind)."""

    def __init__(self):
        self.ops, self.about, self.records = [], [], []

    def launch(self, entry, record, lib, name):
        if len(record) > RECORD_MAX:
            raise GraphError(f"kernel '{name}': its {len(record)}-byte argument record is over the {RECORD_MAX} "
                             "bytes a sim graph replays")
        self.records.append(record)  # the op points into it: kept as long as the graph
        address = ctypes.cast(ctypes.c_char_p(record), ctypes.c_void_p).value
        self.ops.append((entry, address, len(record), None, None, 0))
        dims = _DIMS.unpack_from(record)
        self.about.append(("kernel", name, dims[:3], dims[3:], 0, lib))

    def copy(self, kind, dst, src, nbytes):
        self.ops.append((None, None, nbytes, dst, src, 0))
        self.about.append((kind, _COPY_NAMES[kind], (), (), nbytes, None))

    def memset(self, dst, byte, nbytes):
        self.ops.append((None, None, nbytes, dst, None, byte))
        self.about.append(("memset", _COPY_NAMES["memset"], (), (), nbytes, None))


class SimGraph:
    """A captured list, ready to replay: `ops` is the ctypes array gpublas_sim_replay walks."""

    def __init__(self, capture):
        self.ops = (Op * len(capture.ops))(*capture.ops)
        self.about, self.records = capture.about, capture.records
        self.launches = sum(1 for a in self.about if a[0] == "kernel")

    def __len__(self):
        return len(self.about)

    def run(self, backend, failure, timed=False):
        """Replays every op; a launch that fails raises failure(lib, kernel name, status), the eager
        launch's own exception. With `timed`, returns [(kind, name, grid, block, bytes, host ms)]
        per op (kind 'kernel', 'htod', 'dtoh', 'dtod' or 'memset', as the profiler's rows)."""
        n = len(self.about)
        times = (ctypes.c_double * n)() if timed else None
        at = ctypes.c_int64(-1)
        status = _replay(self.ops, n, backend.order, next(backend._seeds) & 0xFFFFFFFF, times, ctypes.byref(at))
        if status:
            raise self._failure(failure, status, at.value)
        return [(*a[:5], ms) for a, ms in zip(self.about, times)] if timed else None

    def _failure(self, failure, status, i):
        kind, name, _, _, _, lib = self.about[i]
        if status == -2:
            return LaunchError(f"graph replay interrupted (SIGINT) at op {i} of {len(self)} ({kind} {name}); the "
                               "ops after it were skipped")
        return failure(lib, name, status)


def load_replay(build_lib):
    """Compiles (once, cached on disk) and loads graph_replay.cpp through `build_lib(text, name)`,
    the sim backend's own compile of a host library, which attaches it to the shared Runtime."""
    global _replay
    with _lock:
        if _replay is None:
            lib = build_lib(REPLAY_SOURCE.read_text(), str(REPLAY_SOURCE))
            fn = lib.gpublas_sim_replay
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.POINTER(Op), ctypes.c_int64, ctypes.c_uint, ctypes.c_uint,
                           ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int64)]
            _replay = fn
    return _replay
