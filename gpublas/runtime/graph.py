"""Graphs: device work captured once and replayed without Python per launch (CUDA graphs; CuPy's
and PyTorch's stream capture).

    x = gpublas.to_device(first_batch)    # a static input: every replay reads it where it is
    step(x)                                # once eagerly: every kernel compiled, the pool warm
    with gpublas.graph() as g:             # nothing issued in here runs: it is recorded
        loss = step(x)                     # loss comes from the graph's pool, same address each replay
    for batch in batches:
        x.set(batch)                       # new contents, same memory
        g.replay()                         # the recorded launches and copies, in order
        print(float(loss))

What a capture records: every kernel launch, memset, device-to-device copy and pinned-memory copy
this thread issues on the capturing stream (the graph's own stream, current inside the `with`, or
the `stream` given). What a graph cannot hold raises GraphError at the call that issued it: a host
read-back (get() into new host memory, float(a), a BLAS-1 result returned as a Python float), a
copy from or to pageable host memory, a synchronize, a kernel compile (run the work once before
capturing), a capture inside a capture, a replay inside a capture. Work issued by other threads, or
on other streams, runs as usual.

Memory (pool.GraphPool): arrays allocated inside a capture come from the graph's own pool and keep
their addresses for every replay; arrays freed inside it are released when the graph is; arrays
its work uses are kept alive by it (freeing one explicitly waits for the graph).
memory_stats()['bytes_graphs'] counts what live graphs reserve; Graph.free() (or dropping the
last reference) returns it.
"""
import itertools

from . import backends, device_checks, profiler, stream as streams
from .errors import GraphError
from .pool import GraphPool
from .stream import Stream, capturing, current_stream, refuse_in_capture

_numbers = itertools.count(1)


class Graph:
    """Work captured by `with gpublas.graph() as g:`; g.replay() runs it again."""

    def __init__(self, stream=None):
        self.backend = backends.current()
        self.stream = stream if stream is not None else Stream(self.backend.capture_stream_create())
        self.pool = GraphPool(self.backend.pool)
        self.number = next(_numbers)
        self.launches = 0      # kernel launches recorded
        self.replays = 0
        self.freed = False
        self._recorded = None  # what the backend's capture_end returned, once captured
        self._uses = {}        # id(Allocation) -> device-pool Allocation the recorded work uses
        self._host = []        # pinned host arrays recorded copies read or write
        self._replayed_on = set()  # stream handles replays ran on (the release of memory waits for them)

    @property
    def name(self):
        return f"[graph #{self.number}: {self.launches} launches]"

    def __repr__(self):
        state = "freed" if self.freed else "captured" if self._recorded is not None else "capturing"
        return f"<gpublas.Graph #{self.number} {state}, {self.launches} launches, {self.replays} replays>"

    # -- capture ----------------------------------------------------------------------------------
    def __enter__(self):
        if capturing() is not None:
            raise GraphError("a capture inside a capture: this thread is already capturing a graph; "
                             "close the first `with gpublas.graph()` before opening another")
        if self._recorded is not None or self.freed:
            raise GraphError(f"{self!r} was captured already: make a new one with gpublas.graph()")
        if self.stream.graph is not None:
            raise GraphError(f"the stream given is capturing {self.stream.graph!r} already")
        handle = self.stream.handle
        self.backend.capture_begin(handle)
        self.stream.graph = self
        self.backend.pool.captures[handle] = self.pool
        streams._local.graph = self
        self.stream.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stream.__exit__(exc_type, exc, tb)
        streams._local.graph = None
        self.backend.pool.captures.pop(self.stream.handle, None)
        self.stream.graph = None
        if exc_type is None:
            self._recorded = self.backend.capture_end(self.stream.handle)
            return False
        # a half-recorded graph is never replayed: release it now. A failed CUDA call inside the capture has
        # invalidated it, so ending it fails too: the error raised is the block's own, the memory freed anyway
        try:
            self.backend.graph_destroy(self.backend.capture_end(self.stream.handle))
        except Exception:
            pass
        finally:
            self.free()
        return False

    def record(self, args, pointers):
        """A launch is being recorded (launch.Kernel): keeps the arrays among `args` alive."""
        self.launches += 1
        for a, p in zip(args, pointers):
            if p and hasattr(a, "_mem"):
                self.use(a._mem)

    def use(self, alloc):
        """The recorded work reads or writes `alloc`: it stays allocated until the graph is freed."""
        pool = alloc.pool
        if pool is not None and pool is not self.pool:
            alloc = pool.device_block(alloc)  # another graph's array: hold its block in the device pool
            if id(alloc) not in self._uses:
                self._uses[id(alloc)] = alloc
                alloc.pool.hold(alloc)

    def use_host(self, host):
        """A recorded copy reads or writes pinned host array `host`: the graph keeps it."""
        self._host.append(host)

    # -- replay -----------------------------------------------------------------------------------
    def replay(self, stream=None):
        """Runs the captured work again, in order, on `stream` (default: the current stream)."""
        if self._recorded is None:
            raise GraphError(f"{self!r} cannot replay: it was freed" if self.freed else
                             f"{self!r} cannot replay before its `with gpublas.graph()` block has ended")
        refuse_in_capture("Graph.replay()", "a graph does not nest inside another")
        stream = stream if stream is not None else current_stream()
        handle = None if stream is None else stream.handle
        self._replayed_on.add(handle)
        if profiler.sessions:
            profiler.replay(self.backend, self.name, self._recorded, handle)
        else:
            self.backend.graph_launch(self._recorded, handle)
        self.replays += 1
        device_checks.arm()  # its kernels may have recorded a bad index (gpublas.runtime.device_checks)

    # -- release ----------------------------------------------------------------------------------
    def free(self):
        """Releases the recorded work and the graph's memory: blocks of its pool no array holds go
        back to the device pool, and arrays it kept alive may be freed (after the streams its
        replays ran on)."""
        if self.freed:
            return
        self.freed = True
        if self._recorded is not None:
            recorded, self._recorded = self._recorded, None
            self.backend.graph_destroy(recorded)
        self.pool.close(self._replayed_on)
        uses, self._uses = self._uses, {}
        for alloc in uses.values():
            alloc.pool.unhold(alloc, self._replayed_on)
        self._host = []

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown: the backend may be gone
            pass


def graph(stream=None):
    """A Graph to capture into: `with gpublas.graph() as g: ...` records the work issued inside on
    `stream` (default: a new stream of the graph's own, current inside the block)."""
    return Graph(stream)
