"""gpublas.graph on the cuda backend (the driver's stream capture): replays equal eager bit for bit,
the memory and error rules hold there too (skipped without PyCUDA and a GPU); and the driver calls
behind it, against a recording stand-in for libcuda (runs everywhere)."""
import numpy as np
import pytest

import gpublas


@pytest.fixture
def cuda():
    before = gpublas.backend()
    gpublas.use("cuda")
    yield
    gpublas.synchronize()
    gpublas.use(before)


def _step(a, b, x):
    c = gpublas.gemm(a, b)
    h = gpublas.tanh(c) * 2.0 + 1.0
    d = gpublas.empty(1)
    gpublas.dot(x, x, out=d)
    return c, h, h.sum(axis=0), d


@pytest.mark.cuda
def test_replay_equals_eager_bit_for_bit(cuda, rng):
    shapes = [(37, 19), (19, 23), (101,)]
    inputs = [gpublas.empty(s) for s in shapes]
    pinned = [gpublas.pinned_empty(s) for s in shapes]
    batches = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(3)]
    eager = []
    for batch in batches:
        for a, b in zip(inputs, batch):
            a.set(b)
        eager.append([r.get() for r in _step(*inputs)])
    with gpublas.graph() as g:
        for a, p in zip(inputs, pinned):
            a.set(p)  # a pinned copy, recorded: the replay reads the pinned buffers' new contents
        results = _step(*inputs)
    assert gpublas.memory_stats()["bytes_graphs"] > 0
    for batch, expected in zip(batches, eager):
        for p, b in zip(pinned, batch):
            p[...] = b
        g.replay()
        gpublas.synchronize()
        for r, e in zip(results, expected):
            assert r.get().tobytes() == e.tobytes()
    g.free()


@pytest.mark.cuda
def test_graph_errors_and_other_threads_on_cuda(cuda):
    import threading
    x = gpublas.full(64, 1.0)
    x += 1.0
    seen = []
    with gpublas.graph() as g:
        x += 1.0
        with pytest.raises(gpublas.GraphError, match="synchronize"):
            gpublas.synchronize()
        with pytest.raises(gpublas.GraphError, match="get"):
            x.get()
        t = threading.Thread(target=lambda: seen.append(float((gpublas.full(4, 2.0) * 3.0).sum())))
        t.start()
        t.join()
    assert seen == [24.0]
    assert float(x.sum()) == 128.0  # nothing captured ran
    g.replay()
    g.replay()
    assert float(x.sum()) == 256.0


class _FakeLibcuda:
    """libcuda's capture calls, recorded (runs without a GPU: checks the order and the handles)."""

    def __init__(self, fail=None):
        self.calls, self.fail = [], fail

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, *[getattr(a, "_obj", a) for a in args]))
            if name == self.fail:
                return 900  # CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
            if name in ("cuStreamEndCapture", "cuGraphInstantiateWithFlags"):
                args[1 if name == "cuStreamEndCapture" else 0]._obj.value = 0x1000 + len(self.calls)
            if name == "cuGetErrorName":
                args[1]._obj.value = b"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
            return 0
        self.__dict__[name] = call
        return call


@pytest.mark.parametrize("fail", [None, "cuGraphInstantiateWithFlags"])
def test_driver_calls_capture_instantiate_launch_destroy(fail):
    from types import SimpleNamespace

    from gpublas.runtime.backends import cuda_graph
    lib = _FakeLibcuda(fail)
    d = cuda_graph.Driver(lib)
    stream = SimpleNamespace(handle=77)
    d.begin(stream)
    if fail:
        with pytest.raises(gpublas.GraphError, match="cuGraphInstantiate failed: CUDA_ERROR_STREAM_CAPTURE"):
            d.end(stream)
        assert [c[0] for c in lib.calls][-2:] == ["cuGetErrorName", "cuGraphDestroy"]  # the graph is not leaked
        return
    exe = d.end(stream)
    d.launch(exe, None)
    d.launch(exe, stream)
    d.destroy(exe)
    names = [c[0] for c in lib.calls]
    assert names == ["cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags", "cuGraphDestroy",
                     "cuGraphLaunch", "cuGraphLaunch", "cuGraphExecDestroy"]
    assert lib.calls[0][1:] == (77, cuda_graph.CAPTURE_MODE_RELAXED)
    assert lib.calls[4][1:] == (exe, None) and lib.calls[5][1:] == (exe, 77)


def test_a_graph_alive_at_exit_is_not_destroyed_after_close():
    # close() (atexit) popped the context: destroying a graph then would push it again and abort the process
    from types import SimpleNamespace

    cuda = pytest.importorskip("gpublas.runtime.backends.cuda")
    closed = SimpleNamespace(_closed=True, contexts=None)  # contexts.enter() would fail: never reached
    assert cuda.CudaBackend.graph_destroy(closed, 0x1000) is None


def test_launch_blocking_beside_a_capture_waits_for_its_own_stream():
    # GPUBLAS_LAUNCH_BLOCKING: a context synchronize would break another thread's capture (shared/gpu/AUDIT.md #2)
    from types import SimpleNamespace

    from gpublas.runtime.backends import cuda_graph
    calls = []
    stream = SimpleNamespace(synchronize=lambda: calls.append("stream"))
    event = SimpleNamespace(record=lambda s: SimpleNamespace(synchronize=lambda: calls.append(("event on", s))))
    backend = SimpleNamespace(_capturing=set(), drv=SimpleNamespace(Event=lambda: event))
    cuda_graph.sync_beside_captures(backend, stream, lambda: calls.append("context"))
    backend._capturing.add("another thread's stream")
    cuda_graph.sync_beside_captures(backend, stream, lambda: calls.append("context"))
    cuda_graph.sync_beside_captures(backend, None, lambda: calls.append("context"))
    assert calls == ["context", "stream", ("event on", None)]
