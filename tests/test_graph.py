"""gpublas.graph: capture once, replay many times; bit for bit as eager, every GraphError, memory."""
import os
import threading

import numpy as np
import pytest
from interrupt import interrupt_child

import gpublas
from gpublas.runtime import launch


def _eager_and_replayed(step, inputs, batches):
    """Runs `step(*inputs)` eagerly per batch (contents set into `inputs`) and as one captured
    graph replayed per batch; returns both result lists (host arrays)."""
    eager = []
    for batch in batches:
        for a, b in zip(inputs, batch):
            a.set(b)
        eager.append([r.get() for r in step(*inputs)])
    with gpublas.graph() as g:
        results = step(*inputs)
    replayed = []
    for batch in batches:
        for a, b in zip(inputs, batch):
            a.set(b)
        g.replay()
        replayed.append([r.get() for r in results])
    g.free()
    return eager, replayed


def _assert_bitwise(eager, replayed):
    for e, r in zip(eager, replayed):
        for a, b in zip(e, r):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes()


def _batches(rng, shapes, count=3, dtype=np.float32):
    return [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(count)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blas_replays_equal_eager_bit_for_bit(rng, sim_order, dtype):
    def step(a, b, x):
        c = gpublas.gemm(a, b, alpha=0.5)
        y = gpublas.gemv(a, x)
        d = gpublas.empty(1, dtype)
        gpublas.dot(x, x, out=d)
        gpublas.axpy(2.0, x, y[:7])  # into a view
        return c, y, d

    shapes = [(13, 7), (7, 5), (7,)]
    inputs = [gpublas.empty(s, dtype) for s in shapes]
    eager, replayed = _eager_and_replayed(step, inputs, _batches(rng, shapes, dtype=dtype))
    _assert_bitwise(eager, replayed)
    assert not np.array_equal(eager[0][0], eager[1][0])  # new contents gave new results


def test_elementwise_and_reductions_replay_equal_eager(rng, sim_order):
    def step(x, w):
        h = gpublas.tanh(x @ w) * 2.0 - x[:, :1]
        s = h.sum(axis=0)
        m = gpublas.softmax(h)
        return h, s, m, gpublas.max(h), gpublas.logsumexp(h)

    shapes = [(31, 5), (5, 5)]
    inputs = [gpublas.empty(s) for s in shapes]
    eager, replayed = _eager_and_replayed(step, inputs, _batches(rng, shapes, count=4))
    _assert_bitwise(eager, replayed)


def test_nothing_captured_runs_until_a_replay():
    x = gpublas.full(17, 3.0)
    y = gpublas.zeros(17)
    y += x  # the kernels compiled before the capture
    y.fill(0)
    with gpublas.graph() as g:
        y += x  # a launch
        z = x.copy()  # a device-to-device copy into the graph's pool
        x.fill(0)  # a memset
    assert np.all(y.get() == 0) and np.all(x.get() == 3.0)  # nothing ran
    g.replay()
    assert np.all(y.get() == 3.0) and np.all(z.get() == 3.0) and np.all(x.get() == 0)
    x.fill(1.0)
    g.replay()  # in order: y += x (1), z = x (1), x = 0
    assert np.all(y.get() == 4.0) and np.all(z.get() == 1.0) and np.all(x.get() == 0)
    assert g.launches == 1 and g.replays == 2


def test_pinned_copies_are_recorded():
    host_in, host_out = gpublas.pinned_empty(8), gpublas.pinned_empty(8)
    x = gpublas.zeros(8)
    (x * 2.0).get(out=host_out)  # compiled before the capture
    with gpublas.graph() as g:
        x.set(host_in)
        (x * 2.0).get(out=host_out)
    for k in range(3):
        host_in[:] = np.arange(8) + k
        g.replay()
        np.testing.assert_array_equal(host_out, 2.0 * (np.arange(8) + k))


# -- what a graph cannot hold ---------------------------------------------------------------------
COUNTER = iter(range(10**6))


def _fresh_source():
    return f"extern \"C\" __global__ void k{next(COUNTER)}(float* x) {{ x[0] = 1.0f; }}"


@pytest.mark.parametrize("what, call", [
    ("DeviceArray.get()", lambda x, h: x.get()),
    ("float() of a DeviceArray", lambda x, h: float(x[0])),
    ("int() of a DeviceArray", lambda x, h: int(x[0])),
    ("bool() of a DeviceArray", lambda x, h: bool(x[0])),
    ("gpublas.dot() returning a Python float", lambda x, h: gpublas.dot(x, x)),
    ("gpublas.nrm2() returning a Python float", lambda x, h: gpublas.nrm2(x)),
    ("pageable host memory", lambda x, h: x.set(h)),
    ("pageable host memory", lambda x, h: x.get(out=h)),
    ("gpublas.synchronize()", lambda x, h: gpublas.synchronize()),
    ("Stream.synchronize()", lambda x, h: gpublas.Stream().synchronize()),
    ("Event.synchronize()", lambda x, h: gpublas.Event().record().synchronize()),
    ("compiling", lambda x, h: launch.load_source(_fresh_source(), None, "fresh.cu")),
    ("a capture inside a capture", lambda x, h: gpublas.graph().__enter__()),
])
def test_graph_error_names_the_call(what, call):
    x = gpublas.full(4, 1.0)
    host = np.zeros(4, np.float32)
    x.sum()  # compiled before the capture
    x += 0.0
    gpublas.dot(x, x)
    gpublas.nrm2(x)
    with pytest.raises(gpublas.GraphError, match=what.replace("(", r"\(").replace(")", r"\)")):
        with gpublas.graph():
            x.sum()
            call(x, host)
    assert isinstance(gpublas.GraphError("x"), gpublas.GpublasError)
    # the failed capture left nothing behind: eager work runs, another capture works
    assert gpublas.runtime.stream.capturing() is None and float(x.sum()) == 4.0
    with gpublas.graph() as g:
        x += 1.0
    g.replay()
    assert float(x.sum()) == 8.0


def test_an_error_inside_a_capture_is_raised_as_itself(monkeypatch):
    # on a GPU a failed CUDA call inside the block invalidates the capture, so ending it fails as well: the
    # block's own error is the one raised, and the graph's memory goes back all the same
    x = gpublas.zeros(8)
    x += 1.0
    before = gpublas.memory_stats()["bytes_graphs"]
    backend, real = gpublas.runtime.backends.current(), gpublas.runtime.backends.current().capture_end

    def invalidated(handle):
        backend.graph_destroy(real(handle))
        raise gpublas.GraphError("cuStreamEndCapture failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)")

    monkeypatch.setattr(backend, "capture_end", invalidated)
    with pytest.raises(ValueError, match="the block's own"):
        with gpublas.graph():
            y = x * 2.0
            raise ValueError("the block's own")
    monkeypatch.undo()
    del y
    assert gpublas.memory_stats()["bytes_graphs"] == before and gpublas.runtime.stream.capturing() is None
    x += 1.0
    assert np.all(x.get() == 2.0)


def test_replay_inside_a_capture_and_before_the_end_are_refused():
    x = gpublas.zeros(3)
    with gpublas.graph() as g:
        x += 1.0
        with pytest.raises(gpublas.GraphError, match="before its"):
            g.replay()
    with pytest.raises(gpublas.GraphError, match="does not nest"):
        with gpublas.graph():
            g.replay()
    g.free()
    with pytest.raises(gpublas.GraphError, match="freed"):
        g.replay()


# -- memory ---------------------------------------------------------------------------------------
def test_graph_memory_is_reserved_kept_and_released():
    gpublas.free_cached()
    x = gpublas.full(1000, 2.0)
    (x * 3.0).sum()  # warm: compiled
    before = gpublas.memory_stats()  # bytes_graphs: other graphs still alive in this process count too
    with gpublas.graph() as g:
        tmp = x * 3.0           # freed inside the capture: its block stays the graph's
        out = tmp.sum()
        del tmp
    reserved = gpublas.memory_stats()["bytes_graphs"] - before["bytes_graphs"]
    assert reserved >= 4000 + 4
    addresses = out.ptr
    fresh = [gpublas.empty(1000) for _ in range(4)]  # cannot land on the graph's blocks (a GPU's may be adjacent)
    blocks = [(ptr, b.nbytes) for ptr, b in g.pool._blocks.items()]
    assert sum(n for _, n in blocks) == reserved and any(ptr == out.ptr for ptr, _ in blocks)
    assert all(f.ptr + f._mem.nbytes <= ptr or ptr + n <= f.ptr for f in fresh for ptr, n in blocks)
    for k in range(3):
        x.fill(k)
        g.replay()
        assert out.ptr == addresses and float(out) == 3000.0 * k
    del out
    assert gpublas.memory_stats()["bytes_graphs"] == before["bytes_graphs"] + reserved  # replays still write there
    g.free()
    assert gpublas.memory_stats()["bytes_graphs"] == before["bytes_graphs"]
    assert gpublas.memory_stats()["bytes_in_use"] == before["bytes_in_use"] + sum(f._mem.nbytes for f in fresh)


def test_arrays_the_graph_uses_are_kept_alive():
    gpublas.free_cached()
    y = gpublas.zeros(64)
    x = gpublas.full(64, 1.0)
    y += x
    with gpublas.graph() as g:
        y += x
    in_use = gpublas.memory_stats()["bytes_in_use"]
    x.free()  # explicitly: the graph still reads it
    del x
    gpublas.free_cached()
    assert gpublas.memory_stats()["bytes_in_use"] == in_use
    g.replay()  # memcheck (conftest) would fault on unmapped memory
    assert np.all(y.get() == 2.0)
    g.free()
    assert gpublas.memory_stats()["bytes_in_use"] == in_use - 512


def test_a_graph_may_use_another_graphs_arrays():
    gpublas.free_cached()
    x = gpublas.full(64, 1.0)
    (x * 2.0) + 1.0  # warm: compiled
    in_use, graphs = gpublas.memory_stats()["bytes_in_use"], gpublas.memory_stats()["bytes_graphs"]
    with gpublas.graph() as first:
        y = x * 2.0             # from the first graph's pool
    with gpublas.graph() as second:
        z = y + 1.0             # the second graph reads it
    for k in range(3):
        x.fill(k)
        first.replay()
        second.replay()
        assert np.all(z.get() == 2.0 * k + 1.0)
    del y
    first.free()                # y's block: the second graph still reads it
    x.fill(5)
    second.replay()             # memcheck (conftest) would fault on released memory
    assert np.all(z.get() == 2.0 * 2 + 1.0)
    del z
    second.free()
    assert gpublas.memory_stats()["bytes_graphs"] == graphs
    assert gpublas.memory_stats()["bytes_in_use"] == in_use


# -- threads, Ctrl-C, profiler --------------------------------------------------------------------
def test_a_capture_does_not_swallow_another_threads_launches():
    a, b = gpublas.zeros(100), gpublas.zeros(100)
    a += 1.0
    (b + 1.0).get()
    inside, done, seen = threading.Event(), threading.Event(), []

    def other():
        inside.wait()
        b.fill(5.0)
        seen.append((b + 1.0).get())  # runs at once, read back at once: not recorded, not refused
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with gpublas.graph() as g:
        a += 1.0
        inside.set()
        done.wait(60)
    t.join()
    assert np.all(seen[0] == 6.0) and np.all(b.get() == 5.0) and np.all(a.get() == 1.0)
    assert g.launches == 1
    g.replay()
    assert np.all(a.get() == 2.0) and np.all(b.get() == 5.0)


def test_replay_is_one_call_from_python(monkeypatch):
    x = gpublas.zeros(10)
    x += 1.0
    with gpublas.graph() as g:
        for _ in range(50):
            x += 1.0
    monkeypatch.setattr(launch.Kernel, "__call__", lambda *a, **k: pytest.fail("a launch from Python"))
    g.replay()
    assert np.all(x.get() == 51.0)


def test_profiler_shows_a_replay_as_one_row_and_its_kernels():
    x = gpublas.full(100, 1.0)
    y = x * 2.0
    y.sum()  # every kernel loaded before the capture (a compile inside one is refused)
    with gpublas.graph() as g:
        y = x * 2.0 + 1.0
        s = y.sum()
    with gpublas.profile() as p:
        for _ in range(3):
            g.replay()
    rows = p.key_averages()
    graph_rows = [e for e in rows if e.kind == "graph"]
    assert [(e.name, e.count) for e in graph_rows] == [(g.name, 3)]
    if gpublas.backend() != "sim":  # on a GPU a replay is one cuGraphLaunch, its nodes not timed apart (CUPTI's)
        assert rows == graph_rows and float(s) == 300.0
        return
    kernels = [e for e in rows if e.kind == "kernel"]
    assert sum(e.count for e in kernels) == 3 * g.launches and all(e.count % 3 == 0 for e in kernels)
    assert graph_rows[0].total_ms >= 0.9 * sum(e.total_ms for e in kernels)
    assert p.totals()["transfers"] == 0 and float(s) == 300.0


INTERRUPT_CHILD = r"""
import signal, numpy as np, gpublas
signal.signal(signal.SIGINT, signal.default_int_handler)
a = gpublas.full((1024, 1024), 1.0)
c = gpublas.gemm(a, a, kernel="naive")
with gpublas.graph() as g:
    for _ in range(20):
        gpublas.gemm(a, a, c, kernel="naive")
print("start", flush=True)
try:
    g.replay()
    print("finished", flush=True)
except (KeyboardInterrupt, gpublas.LaunchError) as e:
    print("stopped", type(e).__name__, flush=True)
x = gpublas.full(5, 1.0)
print("after", float(x.sum()), flush=True)
"""


@pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda",
                    reason="the sim stops a replay between its ops; a GPU's cuGraphLaunch returns at once and its "
                           "kernels, once queued, run to the end")
def test_ctrl_c_stops_a_long_replay():
    lines, latency = interrupt_child(INTERRUPT_CHILD)
    assert "stopped KeyboardInterrupt" in lines, lines
    assert "after 5.0" in lines, lines
    assert latency < 2.0, f"{latency * 1e3:.0f} ms from SIGINT to the replay stopping"


OOB_SRC = 'extern "C" __global__ void oob_in_graph(float* x, int n) { x[n + threadIdx.x * 1024] = 1.0f; }'


@pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda",
                    reason="the sim's memcheck stops the replay at the write; a GPU may not fault there (the pool's "
                           "memory is mapped past the array), and a fault is asynchronous and loses the context "
                           "(test_cuda_backend checks a kernel's fault in a child process)")
def test_a_failing_launch_in_a_replay_raises_its_own_error():
    k = launch.load_source(OOB_SRC, None, "oob_graph.cu").get("oob_in_graph")
    x = gpublas.zeros(16)
    x += 1.0
    with gpublas.graph() as g:
        x += 1.0
        k(1, 32, x, 16)
    with pytest.raises(gpublas.IllegalAddressError, match="oob_in_graph"):
        g.replay()


RACE_SRC = 'extern "C" __global__ void last_writer(int* x) { x[0] = threadIdx.x; }'  # a race: the order decides


@pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="thread orders are the sim's")
def test_replay_runs_in_the_thread_order_set_at_replay():
    k = launch.load_source(RACE_SRC, None, "race_graph.cu").get("last_writer")
    x = gpublas.zeros(1, np.int32)
    gpublas.sim_thread_order("forward")
    try:
        with gpublas.graph() as g:
            k(1, 32, x)
        g.replay()
        assert int(x.get()[0]) == 31
        gpublas.sim_thread_order("reverse")
        g.replay()
        assert int(x.get()[0]) == 0
    finally:
        gpublas.sim_thread_order(os.environ.get("GPUBLAS_SIM_ORDER", "forward"))


def test_profiler_rows_for_a_replays_copies_and_memsets():
    x = gpublas.full(256, 1.0)
    y = x.copy()
    with gpublas.graph() as g:
        y = x.copy()  # a device-to-device copy
        x.fill(0)     # a memset
    with gpublas.profile() as p:
        g.replay()
        g.replay()
    rows = {(e.kind, e.name): e for e in p.key_averages()}
    if gpublas.backend() != "sim":  # a GPU's replay is one timed row (see the test above)
        assert list(rows) == [("graph", g.name)] and rows[("graph", g.name)].count == 2 and np.all(y.get() == 0)
        return
    assert rows[("dtod", "[memcpy DtoD]")].count == 2 and rows[("dtod", "[memcpy DtoD]")].bytes == 2 * 1024
    assert rows[("memset", "[memset]")].count == 2 and rows[("memset", "[memset]")].bytes == 2 * 1024
    assert rows[("graph", g.name)].count == 2 and g.launches == 0
    assert p.totals()["transfers"] == 4 and np.all(y.get() == 0)  # the second replay copied the zeros
