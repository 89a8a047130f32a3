"""The `sim` backend: CUDA C on the CPU.

Device memory is host memory (aligned, poisoned with NaN bytes when fresh so that reading memory
nobody wrote shows up), copies are memmoves, streams run in order (every call completes before it
returns), events read the host clock. Kernels are compiled by the host C++ compiler against
gpublas/runtime/sim/gpublas_sim.h (which includes the rest of gpublas/runtime/sim/*.h) into a shared library and
launched through ctypes; see those headers and docs/sim-backend.md for how threads and barriers are
simulated.
"""
import ctypes
import os
import itertools
import mmap
import threading
import time

import numpy as np

from .. import config
from ..errors import IllegalAddressError, LaunchError
from . import sim_analysis, sim_build, sim_graph, sim_launch
from .sim_build import _cpu_name
from .base import Backend
from .sim_launch import ORDERS

_libc = ctypes.CDLL(None)
_libc.aligned_alloc.restype = ctypes.c_void_p
_libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
# Allocations from 4 MiB on are 2 MiB-aligned and asked to live in transparent huge pages, as NumPy asks for its
# own (where the kernel's THP mode is "madvise"): a kernel streaming 16 MB through 4 KiB pages misses the TLB
# every page (2^22 float32 sum, one thread: 2.5 -> 1.2 ms)
_HUGE_FROM, _HUGE_ALIGN = 4 << 20, 2 << 20
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", 14)
_PAGE = mmap.PAGESIZE
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)
_ATTACH = threading.Lock()
_LOADING = threading.Lock()
# OpenMP's workers (blocks spread over the cores) sleep between launches instead of spinning: with the
# default policy a worker spins on its core for a while after every parallel launch, which a shared or
# small machine pays in CPU and in wall time (2-core box under load, digits 10 epochs: 61.6 s wall and
# 25.9 s CPU -> 13.4-15.9 s and 9.0-9.3 s). Read when the first simulated module loads libgomp, so the
# environment still wins; OMP_WAIT_POLICY=active restores spinning.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
_runtime = None  # guard.h's Runtime, shared by the host libraries of the process (signals are process-wide)
_runtime_lib = None  # sim/runtime.cpp's library: the block loop every module's entry points call
_runtime_build = []  # the thread building it beside the first module (_build_runtime_beside)



def _load(path, mode=os.RTLD_LOCAL):
    """Loads a host library of the simulator's own and attaches it to the process-wide Runtime (guard.h)."""
    global _runtime
    lib = ctypes.CDLL(str(path), mode=mode | os.RTLD_NOW)
    lib.gpublas_sim_attach.restype = ctypes.c_void_p
    lib.gpublas_sim_attach.argtypes = [ctypes.c_void_p]
    with _ATTACH:
        _runtime = lib.gpublas_sim_attach(_runtime)
    return lib


def runtime():
    """The runtime library (sim/runtime.cpp), built (once, cached) and loaded on first use with
    RTLD_GLOBAL: the modules loaded after it resolve their gpublas_sim_launch against it."""
    global _runtime_lib
    if _runtime_lib is None:
        if _runtime_build:
            _runtime_build[0].join()  # started beside the first module's compile
        path = sim_build.runtime_library()  # found in the cache now, or built here (its error raised)
        with _LOADING:
            if _runtime_lib is None:
                lib = _load(path, os.RTLD_GLOBAL)
                lib.gpublas_sim_error.restype = ctypes.c_char_p
                lib.gpublas_sim_fault.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
                _runtime_lib = lib
    return _runtime_lib


def _build_runtime_beside():
    """Starts building the runtime library on a thread of its own, once, so that it compiles beside
    the process's first module instead of after it (a failure is raised by runtime() later)."""
    with _LOADING:
        if _runtime_lib is None and not _runtime_build:
            _runtime_build.append(threading.Thread(target=_quietly, args=(sim_build.runtime_library,),
                                                   name="gpublas-sim-runtime"))
            _runtime_build[0].start()


def _quietly(fn):
    try:
        fn()
    except Exception:  # noqa: BLE001 - runtime() builds it again in the foreground and raises
        pass


def _load_module(path):
    """Loads a compiled module, the runtime library first."""
    runtime()
    return ctypes.CDLL(str(path), mode=os.RTLD_LOCAL | os.RTLD_NOW)


def host_library(text, source_name):
    """A C++ source of the simulator's own (sim/graph_replay.cpp) built and cached like a module
    (sim_build.build_host), loaded and attached like one."""
    runtime()  # first: it makes the Runtime the others share
    return _load(sim_build.build_host(text, source_name))


class SimModule:
    def __init__(self, lib, fibers, name, fission=None):
        self.lib, self.fibers, self.name = lib, fibers, name
        self.fission = fission or {}  # barrier kernel -> None (has a fissioned block function) or why not
        self.spread = {}  # kernel -> [16] once Kernel.spread_blocks was called (record.h's flag bit 4), else [0]
        self.bounds = None  # kernel -> its __launch_bounds__' threads (read from the source at the first kernel_limits)
        self.source = None  # (text, defines)


class SimBackend(Backend):
    name = "sim"

    def __init__(self):
        super().__init__()
        default = min(8 << 30, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2)
        self.total_memory = config.integer("GPUBLAS_SIM_MEMORY", default, "bytes", minimum=1)
        self.launch_state = 0  # changes with what a launch header's flags hold (order, fission, spread)
        self.order = ORDERS[config.choice("GPUBLAS_SIM_ORDER", tuple(ORDERS), "forward")]
        self._seeds = itertools.count(config.integer("GPUBLAS_SIM_SEED", 0, "a seed") + 1)  # one per launch
        self.memcheck = config.flag("GPUBLAS_SIM_MEMCHECK", False)
        config.integer("GPUBLAS_SIM_STACK_KB", 64, "KiB", minimum=16)  # read by sim/fibers.h; checked here
        # barrier kernels run as loops over threads where the compile step could rewrite them
        # (backends/sim_fission.py); False keeps every block on fibers
        self.fission = config.flag("GPUBLAS_SIM_FISSION", True)
        self.allocated = 0
        self._blocks = {}  # ptr -> (bytes, mapping base or None, mapping length)
        self._lock = threading.Lock()

    def device_info(self):
        return {"name": f"gpublas CPU simulator on {_cpu_name()}", "compute_capability": "cpu",
                "multiprocessors": os.cpu_count(), "total_memory": self.total_memory, "backend": "sim"}

    def synchronize(self):
        pass

    # The thread order and fission switch go into every launch's flags: a change makes the bound launches
    # (prepare's bind) pack their headers again.
    @property
    def order(self):
        return self._order

    @order.setter
    def order(self, value):
        self._order = value
        self.launch_state += 1

    @property
    def fission(self):
        return self._fission

    @fission.setter
    def fission(self, value):
        self._fission = value
        self.launch_state += 1

    def set_order(self, order):
        """Thread order inside a block: 'forward', 'reverse' or 'random'."""
        if order not in ORDERS:
            raise ValueError(f"thread order {order!r}: expected {' or '.join(ORDERS)}")
        self.order = ORDERS[order]

    # memory: host memory standing in for the device's
    def mem_alloc(self, nbytes):
        with self._lock:
            if self.allocated + nbytes > self.total_memory:
                raise MemoryError(nbytes)
            self.allocated += nbytes
        ptr, base, length = self._guarded(nbytes) if self.memcheck else (self._plain(nbytes), None, 0)
        if not ptr:
            with self._lock:
                self.allocated -= nbytes
            raise MemoryError(nbytes)
        ctypes.memset(ptr, 0xFF, nbytes)  # NaN in every float type: uninitialized reads show
        self._blocks[ptr] = (nbytes, base, length)
        return ptr

    @staticmethod
    def _plain(nbytes):
        """An allocation from the C heap: 256-byte aligned, from _HUGE_FROM bytes in huge pages where the kernel
        gives them (madvise's failure is harmless: the block keeps 4 KiB pages)."""
        if nbytes < _HUGE_FROM:
            return _libc.aligned_alloc(256, (nbytes + 255) // 256 * 256)
        size = -(-nbytes // _PAGE) * _PAGE  # no rounding up to 2 MiB: the last part of one keeps small pages
        ptr = _libc.aligned_alloc(_HUGE_ALIGN, size)
        if ptr:
            _libc.madvise(ptr, size, _MADV_HUGEPAGE)
        return ptr

    @staticmethod
    def _guarded(nbytes):
        """Memcheck's allocation: the block ends where a PROT_NONE page begins (and one more page
        sits before its first page), so the first access past its end faults. 16-byte aligned."""
        span = -(-max(nbytes, 1) // _PAGE) * _PAGE
        length = span + 2 * _PAGE
        base = _libc.mmap(None, length, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
        if base in (None, ctypes.c_void_p(-1).value):
            return None, None, 0
        if _libc.mprotect(base + _PAGE, span, mmap.PROT_READ | mmap.PROT_WRITE) != 0:
            _libc.munmap(base, length)
            return None, None, 0
        return base + _PAGE + span - (-(-nbytes // 16) * 16), base, length

    def mem_free(self, ptr):
        nbytes, base, length = self._blocks.pop(ptr)
        if base is None:
            _libc.free(ptr)
        else:
            _libc.munmap(base, length)  # a later access through a stale pointer faults too
        with self._lock:
            self.allocated -= nbytes

    def describe_address(self, addr):
        """Where `addr` lies relative to the live allocations, for a memcheck message."""
        if addr < 65536:
            return f"a null pointer (plus {addr} bytes): outside any allocation"
        blocks = sorted((p, n) for p, (n, _, _) in list(self._blocks.items()))
        for p, n in blocks:
            if p <= addr < p + n:
                return f"inside the {n}-byte allocation at {p:#x} (offset {addr - p})"
        after = [(addr - (p + n), p, n) for p, n in blocks if p + n <= addr]
        before = [(p - addr, p, n) for p, n in blocks if addr < p]
        near = min(after + before, default=None)
        if near is None:
            return "outside any live allocation (there are none)"
        gap, p, n = near
        where = ("right after the end of" if gap == 0 else f"{gap} bytes after the end of") if p + n <= addr \
            else f"{gap} bytes before the start of"
        return f"outside any live allocation: {where} the {n}-byte allocation at {p:#x}"

    def host_view(self, ptr, nbytes):
        return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(ptr)) if nbytes else np.empty(0, np.uint8)

    def pinned_alloc(self, nbytes):
        return np.empty(max(nbytes, 1), np.uint8)  # host memory is all the simulator has

    def mapped_alloc(self, nbytes):
        host = np.zeros(max(nbytes, 1), np.uint8)
        return host, host.ctypes.data

    # copies run at once, unless their stream captures a graph (sim_graph.py records them)
    def htod(self, dst, src, nbytes, stream=None):
        if stream is not None and stream.capture is not None:
            return stream.capture.copy("htod", dst, src, nbytes)
        ctypes.memmove(dst, src, nbytes)

    def dtoh(self, dst, src, nbytes, stream=None):
        if stream is not None and stream.capture is not None:
            return stream.capture.copy("dtoh", dst, src, nbytes)
        ctypes.memmove(dst, src, nbytes)

    def dtod(self, dst, src, nbytes, stream=None):
        if stream is not None and stream.capture is not None:
            return stream.capture.copy("dtod", dst, src, nbytes)
        ctypes.memmove(dst, src, nbytes)

    def memset_d8(self, dst, byte, nbytes, stream=None):
        if stream is not None and stream.capture is not None:
            return stream.capture.memset(dst, byte, nbytes)
        ctypes.memset(dst, byte, nbytes)

    # graphs: a capturing stream records its work; a replay runs the list in C (sim_graph.py)
    def capture_begin(self, stream):
        sim_graph.load_replay(host_library)  # compiled now: never inside the capture
        stream.capture = sim_graph.SimCapture()

    def capture_end(self, stream):
        capture, stream.capture = stream.capture, None
        return sim_graph.SimGraph(capture)

    def graph_launch(self, graph, stream=None, timed=False):
        return graph.run(self, lambda lib, name, status: _launch_failure(self, lib, name, status), timed)

    def graph_destroy(self, graph):
        pass

    # streams run in order; events read the clock when recorded
    def stream_create(self):
        return sim_graph.SimStream()

    def stream_synchronize(self, stream):
        pass

    def event_create(self):
        return [None]

    def event_record(self, event, stream=None):
        event[0] = time.perf_counter()

    def event_synchronize(self, event):
        pass

    def event_query(self, event):
        return True  # streams run in order: recorded work has completed

    def event_elapsed_ms(self, start, end):
        if start[0] is None or end[0] is None:
            raise LaunchError("elapsed time asked of an event that was never recorded")
        return (end[0] - start[0]) * 1e3

    # kernels
    units = True  # a family's kernels compile in the units its source names (source.sim_units)

    def compile(self, text, defines, source_name, kernels=None):
        _build_runtime_beside()
        path, barrier, report = sim_build.build_module(text, defines, source_name, kernels)
        module = SimModule(_load_module(path), barrier, source_name, report)
        module.source = (text, defines)
        return module

    def kernel_limits(self, module, name):
        """A GPU's limits where the source tells them: a block no larger than the kernel's __launch_bounds__ (its
        static shared memory is not known here: 0, so only the dynamic bytes count against the 48 KB default)."""
        limits = super().kernel_limits(module, name)
        if module.bounds is None:
            module.bounds = sim_analysis.launch_bounds(*module.source) if module.source else {}
        if name in module.bounds:
            limits["max_threads"] = min(limits["max_threads"], module.bounds[name])
        return limits

    def set_spread_blocks(self, module, name):
        spread = module.spread.setdefault(name, [0])  # read by the launch closure prepare made
        if not spread[0]:
            spread[0] = 16
            self.launch_state += 1  # bound launches pack their headers again

    def prepare(self, module, name, argcodes):
        return sim_launch.prepare(self, module, name, argcodes, _launch_failure)


def _launch_failure(backend, lib, kernel, status):
    """The exception for a launch that returned `status` (scheduler.h's launch)."""
    if status == -2:  # Python's SIGINT handler has a KeyboardInterrupt pending: it fires first
        return LaunchError(f"kernel '{kernel}': launch interrupted (SIGINT); blocks not yet started were skipped")
    rt, addr = runtime(), ctypes.c_void_p()  # the launch's error is the runtime's (lib: the kernel's module)
    message = rt.gpublas_sim_error().decode()
    if not rt.gpublas_sim_fault(ctypes.byref(addr)):
        return LaunchError(message)
    hint = "" if backend.memcheck else " (GPUBLAS_SIM_MEMCHECK=1 puts guard pages around every allocation)"
    return IllegalAddressError(f"{message}: {backend.describe_address(addr.value or 0)}{hint}")
