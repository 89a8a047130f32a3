"""The narrow interface every backend implements. Nothing above it knows which backend runs.

Pointers are Python ints; `stream` is a backend stream handle or None (the default stream, and then
the call is blocking); a module is whatever `compile` returns and `prepare` accepts.

A backend object also owns the per-device state above it, as CuPy's Device owns its pool: its
memory pool (`pool`) and its kernel caches (`modules`, `kernels`, filled by gpublas.runtime.launch).
Making another backend current (backends.use) swaps this one object, so nothing is forgotten from
outside and nothing keyed by id() can outlive it.
"""
from ..errors import GraphError
from ..pool import MemoryPool


class Backend:
    name = "abstract"
    units = False  # True: compile takes `kernels`, a unit of a family (source.sim_units), and builds only those

    def __init__(self):
        self.pool = MemoryPool(self)  # this device's caching allocator
        self.modules = {}  # {(source text, defines, source name): launch.Module} compiled for it
        self.kernels = {}  # {(family, kernel, dtype, defines...): launch.Kernel}: the launch fast path

    # device
    def device_info(self):
        """{'name', 'compute_capability', 'multiprocessors', 'total_memory', 'backend'}."""
        raise NotImplementedError

    def synchronize(self):
        raise NotImplementedError

    # memory
    def mem_alloc(self, nbytes):
        """Returns a device pointer; raises MemoryError when the device has no room."""
        raise NotImplementedError

    def mem_free(self, ptr):
        raise NotImplementedError

    def host_view(self, ptr, nbytes):
        """A uint8 ndarray over the device memory at `ptr` when the host can address it directly
        (the simulator), else None."""
        return None

    def pinned_alloc(self, nbytes):
        """Returns a uint8 ndarray of at least `nbytes` that owns page-locked host memory."""
        raise NotImplementedError

    def mapped_alloc(self, nbytes):
        """(host ndarray of uint8, device pointer) over the same `nbytes` of memory, which kernels write
        and the host reads after a synchronization without a copy (gpublas.runtime.device_checks' record). Kept
        for the life of the process."""
        raise NotImplementedError

    # copies and memset (asynchronous when stream is not None)
    def htod(self, dst, src, nbytes, stream=None):
        """Copies `nbytes` from host address `src` to device pointer `dst`."""
        raise NotImplementedError

    def dtoh(self, dst, src, nbytes, stream=None):
        raise NotImplementedError

    def dtod(self, dst, src, nbytes, stream=None):
        raise NotImplementedError

    def memset_d8(self, dst, byte, nbytes, stream=None):
        raise NotImplementedError

    # streams and events
    def stream_create(self):
        raise NotImplementedError

    def stream_synchronize(self, stream):
        raise NotImplementedError

    def event_create(self):
        raise NotImplementedError

    def event_record(self, event, stream=None):
        raise NotImplementedError

    def event_synchronize(self, event):
        raise NotImplementedError

    def event_query(self, event):
        """True once the work recorded before `event` has completed (the pool asks, never waits)."""
        raise NotImplementedError

    def event_elapsed_ms(self, start, end):
        raise NotImplementedError

    # kernels
    def compile(self, source, defines, source_name):
        """Compiles CUDA C source (cached on disk) and returns a loaded module. A backend with `units`
        also takes kernels=[names]: a module of those kernels only."""
        raise NotImplementedError

    def kernel_limits(self, module, name):
        """What a launch of kernel `name` may ask for: {'max_threads': threads per block (fewer than
        1,024 where its registers run out), 'static_shared': bytes of its __shared__ variables,
        'max_shared_optin': static + dynamic shared bytes per block after an opt-in}. A backend that
        cannot tell reports a 1,024-thread block, no static shared memory and sm_90's 227 KB."""
        return {"max_threads": 1024, "static_shared": 0, "max_shared_optin": 227 * 1024}

    def set_max_dynamic_shared(self, module, name, nbytes):
        """Lets kernel `name` launch with `nbytes` of dynamic shared memory (above the default 48 KB)."""

    def set_spread_blocks(self, module, name):
        """Kernel `name`'s blocks each do much work: a simulator spreads even a small grid of them over
        its cores (a GPU runs every grid over its SMs: nothing to do)."""

    def prepare(self, module, name, argcodes):
        """Returns launch(grid, block, shared, stream, args) for kernel `name` whose parameters have
        the struct codes `argcodes` ('P' pointer, 'i' int, 'f' float, ...)."""
        raise NotImplementedError

    # graphs (gpublas.graph): while a stream captures, the launches and copies issued on it are
    # recorded, not run
    def capture_stream_create(self):
        """A stream for a graph's own capture (cuda: one not tied to the default stream)."""
        return self.stream_create()

    def capture_begin(self, stream):
        """Starts recording the work issued on `stream` (a handle, never the default stream)."""
        raise GraphError(f"the {self.name} backend cannot capture graphs")

    def capture_end(self, stream):
        """Stops recording on `stream`; returns the recorded work, ready for graph_launch."""
        raise GraphError(f"the {self.name} backend cannot capture graphs")

    def graph_launch(self, graph, stream=None, timed=False):
        """Runs the recorded work on `stream`. With `timed`, a backend that can time each op returns
        their milliseconds in order (the profiler's rows); else None."""
        raise GraphError(f"the {self.name} backend cannot replay graphs")

    def graph_destroy(self, graph):
        """Frees what capture_end made."""
