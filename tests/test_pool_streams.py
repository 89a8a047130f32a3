"""The pool is stream-aware: a freed block goes back only to allocations on its own stream, and a
block that launches used on other streams too waits until events recorded at free time complete.

The unit tests drive a MemoryPool against a bookkeeping stand-in (pointers are counters, events are
flags the test completes), which is how event completion is faked; the last test checks that real
launches on a stream record that stream with the block."""
import numpy as np
import pytest

import gpublas
from gpublas.runtime.backends.base import Backend
from gpublas.runtime.pool import MemoryPool


class Bookkeeping(Backend):
    """Device memory and events as counters and flags: what the pool asks of a backend."""
    name = "bookkeeping"

    def __init__(self):
        super().__init__()
        self.next_ptr, self.freed, self.recorded = 4096, [], []

    def mem_alloc(self, nbytes):
        self.next_ptr += 1 << 20
        return self.next_ptr

    def mem_free(self, ptr):
        self.freed.append(ptr)

    def event_create(self):
        return {"stream": None, "done": False}

    def event_record(self, event, stream=None):
        event["stream"] = stream
        self.recorded.append(event)

    def event_query(self, event):
        return event["done"]

    def event_synchronize(self, event):
        event["done"] = True


S, T = "stream S", "stream T"


def test_a_freed_block_is_reused_at_once_on_its_own_stream_only():
    dev = Bookkeeping()
    pool = MemoryPool(dev)
    a = pool.malloc(1000, S)
    ptr = a.ptr
    a.free()
    assert pool.malloc(1000, T).ptr != ptr  # T may still be ahead of S's last use
    assert pool.malloc(1000, None).ptr != ptr
    assert pool.malloc(1000, S).ptr == ptr  # same stream: work runs in order
    assert dev.recorded == []  # single-stream blocks cost no events


def test_a_block_used_on_another_stream_waits_for_its_events():
    dev = Bookkeeping()
    pool = MemoryPool(dev)
    a = pool.malloc(1000)  # allocated on the default stream,
    a.use_on(S)            # then a launch on S read it (a reduction's partials, say)
    a.use_on(S)
    ptr = a.ptr
    a.free()
    assert sorted(map(str, (e["stream"] for e in dev.recorded))) == ["None", S]  # one event per stream
    held = [pool.malloc(1000), pool.malloc(1000, T)]
    assert ptr not in [h.ptr for h in held]  # S may still be running
    dev.recorded[0]["done"] = True
    held.append(pool.malloc(1000, T))
    assert held[-1].ptr != ptr  # one stream done is not enough
    dev.recorded[1]["done"] = True
    held.append(pool.malloc(1000, T))
    assert held[-1].ptr == ptr  # both done: any stream may have it
    assert pool.stats()["bytes_in_use"] == 4 * 1024 and pool.stats()["device_allocations"] == 4


def test_free_cached_waits_for_pending_blocks_before_freeing():
    dev = Bookkeeping()
    pool = MemoryPool(dev)
    a, b = pool.malloc(100, S), pool.malloc(100)
    a.use_on(T)
    ptrs = {a.ptr, b.ptr}
    a.free()
    b.free()
    pool.free_cached()
    assert set(dev.freed) == ptrs and all(e["done"] for e in dev.recorded)
    assert pool.stats()["bytes_held"] == 0 and pool.malloc(100).ptr not in ptrs


def test_launch_on_a_stream_records_it_with_the_block():
    s = gpublas.Stream()
    x = gpublas.zeros((1000,), np.float32)
    assert x._mem.stream is None and x._mem.others is None
    gpublas.get_kernel("memory", "fill_real", np.float32)(4, 256, x, 2.0, 1000, stream=s)
    assert x._mem.others == [s.handle]
    with s:
        y = gpublas.empty((1000,), np.float32)
        assert y._mem.stream is s.handle
        y.fill(1.0)
    assert y._mem.others is None  # used only on the stream it was allocated on
    s.synchronize()
    np.testing.assert_array_equal(x.get(), np.full(1000, 2.0, np.float32))


def test_out_of_memory_during_a_capture_does_not_free_the_cache():
    # free_cached synchronizes (cuMemFree too), which would break a live capture: the allocation fails instead
    dev = Bookkeeping()
    pool = MemoryPool(dev)
    pool.malloc(1000, S).free()  # one cached block
    dev.device_info = lambda: {"total_memory": 1 << 30}

    def full(nbytes):
        raise MemoryError

    dev.mem_alloc = full
    pool.captures[T] = object()  # a capture is live on another stream
    with pytest.raises(gpublas.OutOfMemoryError):
        pool.malloc(4096, S)
    assert dev.freed == []
    del pool.captures[T]
    with pytest.raises(gpublas.OutOfMemoryError):
        pool.malloc(4096, S)
    assert len(dev.freed) == 1  # without a capture: the cache is given back before the second try
