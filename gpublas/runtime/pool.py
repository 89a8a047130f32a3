"""The caching device-memory pool (the default allocator), as CuPy's: freed blocks are kept by
size and handed out again, so a training loop allocates from the device only in its first step.

Stream-aware, as CuPy's and PyTorch's caching allocators are: a block belongs to the stream that
was current when it was allocated, and a freed block is handed out again at once only to an
allocation on that same stream (work on one stream runs in order, so the next user runs after the
last one). A block that a launch used on another stream as well (`Allocation.use_on`, called by
launch.Kernel) gets an event recorded on each of its streams when it is freed, and is reused only
once every one of those events has completed; until then it waits in `_pending`.

Sizes are rounded up to 512 bytes. When the device is full the pool releases its cached blocks and
tries once more before raising OutOfMemoryError with the bytes asked for and the bytes in use.

Graphs (gpublas.graph): while a stream captures, allocations on it come from that graph's GraphPool
(`captures` maps the stream to it), and a block the graph's work uses is `hold`-ed: freeing its
array then defers the release until the graph lets go of it (`unhold`).
"""
import threading

from .errors import FreedArrayError, OutOfMemoryError

ROUND = 512


class Allocation:
    """A block of device memory. `free()` hands it back to the pool; afterwards `ptr` raises.
    `stream` is the backend stream handle it was allocated on (None: the default stream); `others`
    the other streams launches used it on (None when there were none)."""

    __slots__ = ("_ptr", "nbytes", "pool", "freed", "stream", "others")

    def __init__(self, ptr, nbytes, pool, stream=None):
        self._ptr, self.nbytes, self.pool, self.freed = ptr, nbytes, pool, False
        self.stream, self.others = stream, None

    @property
    def ptr(self):
        if self.freed:
            raise FreedArrayError("this device memory was freed; the array (or a view of it) "
                                  "can no longer be used")
        return self._ptr

    def use_on(self, stream):
        """Notes that work on `stream` (a backend handle) uses this block."""
        if stream is not self.stream:
            if self.others is None:
                self.others = [stream]
            elif stream not in self.others:
                self.others.append(stream)

    def free(self):
        if not self.freed:
            self.freed = True
            if self.pool is not None:
                self.pool._release(self)

    def __del__(self):
        if not self.freed:  # free(), without its frame: every temporary array ends here
            self.freed = True
            if self.pool is not None:
                try:
                    self.pool._release(self)
                except Exception:  # interpreter shutdown: the backend may be gone
                    pass


class MemoryPool:
    def __init__(self, backend):
        self.backend = backend
        self.closed = False
        self._lock = threading.RLock()  # re-entrant: a garbage collection inside malloc may free a block
        self._cached = {}   # (rounded size, stream handle) -> [ptr]: reusable at once on that stream
        self._pending = []  # [(rounded size, ptr, [events])]: reusable on any stream once all completed
        self.in_use = 0      # bytes handed out and not yet freed
        self.peak = 0        # the most in_use has been since the pool began or reset_peak()
        self.held = 0        # bytes held from the device (in use + cached + pending)
        self.device_allocations = 0
        self.requests = 0
        self.graph_bytes = 0  # bytes of in_use reserved by graphs' pools
        self.captures = {}   # stream handle -> the GraphPool of the graph capturing on it
        self._held = {}      # ptr -> how many graphs' work uses the block
        self._deferred = {}  # ptr -> its Allocation, freed while held: released at the last unhold

    def malloc(self, nbytes, stream=None):
        """A block of at least `nbytes` for work on `stream` (a backend handle; None: default)."""
        if self.captures:
            graph_pool = self.captures.get(stream)
            if graph_pool is not None:
                return graph_pool.malloc(nbytes, stream)
        self.requests += 1
        if nbytes == 0:
            return Allocation(0, 0, None, stream)
        return self._malloc(-(-nbytes // ROUND) * ROUND, stream)

    def _malloc(self, size, stream):
        lock = self._lock
        lock.acquire()  # not `with`: an RLock's context manager costs 0.4 us more than these two calls
        try:
            free_list = self._cached.get((size, stream))
            ptr = free_list.pop() if free_list else self._completed(size)
            if ptr is None:
                ptr = self._device_alloc(size)
            self.in_use += size
            if self.in_use > self.peak:
                self.peak = self.in_use
        finally:
            lock.release()
        return Allocation(ptr, size, self, stream)

    def _completed(self, size):
        """A pending block of `size` whose streams have all finished with it, or None."""
        query = self.backend.event_query
        for i, (s, ptr, events) in enumerate(self._pending):
            if s == size and all(query(e) for e in events):
                del self._pending[i]
                return ptr
        return None

    def _device_alloc(self, size):
        for attempt in range(2):
            try:
                ptr = self.backend.mem_alloc(size)
            except MemoryError:
                # free_cached synchronizes (cuMemFree does too), which breaks a live capture: not then
                if attempt == 0 and self.held > self.in_use and not self.captures:
                    self.free_cached()
                    continue
                total = self.backend.device_info().get("total_memory")
                raise OutOfMemoryError(size, self.in_use, total) from None
            self.held += size
            self.device_allocations += 1
            return ptr

    def device_block(self, alloc):
        """The device pool's Allocation behind `alloc`: itself (GraphPool maps its own blocks)."""
        return alloc

    def hold(self, alloc):
        """A graph's work uses `alloc`'s block: freeing it waits for `unhold`."""
        with self._lock:
            self._held[alloc._ptr] = self._held.get(alloc._ptr, 0) + 1

    def unhold(self, alloc, streams=()):
        """A graph let go of `alloc`'s block; its replays ran on `streams` (the release waits for them)."""
        with self._lock:
            left = self._held[alloc._ptr] - 1
            if left:
                self._held[alloc._ptr] = left
                return
            del self._held[alloc._ptr]
            for stream in streams:
                alloc.use_on(stream)
            deferred = self._deferred.pop(alloc._ptr, None)
            if deferred is not None:
                self._release(deferred)

    def _release(self, alloc):
        lock = self._lock
        lock.acquire()  # as in _malloc: every temporary array's end passes here
        try:
            if self.closed:
                return
            if self._held and alloc._ptr in self._held:  # a graph still replays work on it
                self._deferred[alloc._ptr] = alloc
                return
            self.in_use -= alloc.nbytes
            if alloc.others is None:
                free_list = self._cached.get((alloc.nbytes, alloc.stream))
                if free_list is None:
                    self._cached[alloc.nbytes, alloc.stream] = [alloc._ptr]
                else:
                    free_list.append(alloc._ptr)
                return
            events = []
            for stream in [alloc.stream, *alloc.others]:
                event = self.backend.event_create()
                self.backend.event_record(event, stream)
                events.append(event)
            self._pending.append((alloc.nbytes, alloc._ptr, events))
        finally:
            lock.release()

    def free_cached(self):
        """Returns every cached (unused) block to the device, waiting for the streams still using
        a pending one."""
        with self._lock:
            for (size, _), ptrs in self._cached.items():
                for ptr in ptrs:
                    self.backend.mem_free(ptr)
                    self.held -= size
            self._cached.clear()
            for size, ptr, events in self._pending:
                for event in events:
                    self.backend.event_synchronize(event)
                self.backend.mem_free(ptr)
                self.held -= size
            self._pending.clear()

    def close(self):
        self.free_cached()
        self.closed = True

    def stats(self):
        return {"bytes_in_use": self.in_use, "bytes_held": self.held, "bytes_cached": self.held - self.in_use,
                "bytes_graphs": self.graph_bytes, "device_allocations": self.device_allocations,
                "allocations": self.requests, "peak_bytes_in_use": self.peak}

    def reset_peak(self):
        """Starts peak_bytes_in_use again from the bytes in use now (PyTorch's reset_peak_memory_stats)."""
        self.peak = self.in_use


class GraphPool:
    """The memory a graph's captured work allocates (PyTorch's private graph pools): blocks taken from
    the device pool at capture and kept by the graph, so every replay finds its arrays at the
    addresses the capture recorded. A block freed inside the capture is reused only by later
    allocations of the same capture (its work runs in order on one stream). close() (the graph is
    freed) returns the blocks no array holds; one an array still holds returns when it is freed."""

    def __init__(self, main):
        self.main, self.backend = main, main.backend
        self.closed = False
        self._blocks = {}  # ptr -> the device pool's Allocation reserved for it
        self._free = {}    # rounded size -> [ptr] freed inside the capture
        self._out = set()  # ptrs handed out and not freed
        self._streams = ()  # the streams replays ran on, once closed

    @property
    def reserved(self):
        return sum(b.nbytes for b in self._blocks.values())

    def malloc(self, nbytes, stream):
        self.main.requests += 1
        if nbytes == 0:
            return Allocation(0, 0, None, stream)
        size = -(-nbytes // ROUND) * ROUND
        free = self._free.get(size)
        if free:
            ptr = free.pop()
        else:
            block = self.main._malloc(size, None)  # nothing runs on it until a replay; close() orders the release
            ptr = block._ptr
            self._blocks[ptr] = block
            with self.main._lock:
                self.main.graph_bytes += size
        self._out.add(ptr)
        return Allocation(ptr, size, self, stream)

    def device_block(self, alloc):
        """The device pool's Allocation reserved for `alloc`'s block: a graph whose work uses an array
        of another graph holds that (so it outlives both the array and the other graph)."""
        return self._blocks[alloc._ptr]

    def _release(self, alloc):
        self._out.discard(alloc._ptr)
        if self.closed:
            self._give_back(alloc._ptr)
        else:
            self._free.setdefault(alloc.nbytes, []).append(alloc._ptr)

    def close(self, streams=()):
        """Returns every block no array holds to the device pool (after the work on `streams`)."""
        self.closed, self._streams = True, tuple(streams)
        for ptr in [p for p in self._blocks if p not in self._out]:
            self._give_back(ptr)
        self._free.clear()

    def _give_back(self, ptr):
        block = self._blocks.pop(ptr)
        with self.main._lock:
            self.main.graph_bytes -= block.nbytes
        for stream in self._streams:
            block.use_on(stream)
        block.free()
