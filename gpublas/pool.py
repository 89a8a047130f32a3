"""The caching device-memory pool (the default allocator), as CuPy's: freed blocks are kept by
size and handed out again, so a training loop allocates from the device only in its first step.

Sizes are rounded up to 512 bytes. When the device is full the pool releases its cached blocks and
tries once more before raising OutOfMemoryError with the bytes asked for and the bytes in use.
"""
import collections

from .errors import FreedArrayError, OutOfMemoryError

ROUND = 512


class Allocation:
    """A block of device memory. `free()` hands it back to the pool; afterwards `ptr` raises."""

    __slots__ = ("_ptr", "nbytes", "pool", "freed")

    def __init__(self, ptr, nbytes, pool):
        self._ptr, self.nbytes, self.pool, self.freed = ptr, nbytes, pool, False

    @property
    def ptr(self):
        if self.freed:
            raise FreedArrayError("this device memory was freed; the array (or a view of it) "
                                  "can no longer be used")
        return self._ptr

    def free(self):
        if not self.freed:
            self.freed = True
            if self.pool is not None:
                self.pool._release(self._ptr, self.nbytes)

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown: the backend may be gone
            pass


class MemoryPool:
    def __init__(self, backend):
        self.backend = backend
        self.closed = False
        self._cached = collections.defaultdict(list)  # rounded size -> [ptr]
        self.in_use = 0      # bytes handed out and not yet freed
        self.held = 0        # bytes held from the device (in use + cached)
        self.device_allocations = 0
        self.requests = 0

    def malloc(self, nbytes):
        self.requests += 1
        if nbytes == 0:
            return Allocation(0, 0, None)
        size = -(-nbytes // ROUND) * ROUND
        free_list = self._cached.get(size)
        if free_list:
            ptr = free_list.pop()
        else:
            ptr = self._device_alloc(size)
        self.in_use += size
        return Allocation(ptr, size, self)

    def _device_alloc(self, size):
        for attempt in range(2):
            try:
                ptr = self.backend.mem_alloc(size)
            except MemoryError:
                if attempt == 0 and self.held > self.in_use:
                    self.free_cached()
                    continue
                total = self.backend.device_info().get("total_memory")
                raise OutOfMemoryError(size, self.in_use, total) from None
            self.held += size
            self.device_allocations += 1
            return ptr

    def _release(self, ptr, size):
        if self.closed:
            return
        self.in_use -= size
        self._cached[size].append(ptr)

    def free_cached(self):
        """Returns every cached (unused) block to the device."""
        for size, ptrs in self._cached.items():
            for ptr in ptrs:
                self.backend.mem_free(ptr)
                self.held -= size
        self._cached.clear()

    def close(self):
        self.free_cached()
        self.closed = True

    def stats(self):
        return {"bytes_in_use": self.in_use, "bytes_held": self.held, "bytes_cached": self.held - self.in_use,
                "device_allocations": self.device_allocations, "allocations": self.requests}
