"""The small-call path: a launch of a geometry seen before reuses its packed record header (sim) and packs only
the arguments; operators on two contiguous arrays of one dtype go straight to the flat kernel; BLAS-1 reductions
that return a number use a per-thread scratch and host buffer. Each shortcut must give what the full path gives,
whatever came before it: other arguments, another thread order, an error, another thread."""
import threading

import numpy as np
import pytest

import gpublas
from gpublas import GraphError, IllegalAddressError, LaunchError
from gpublas.core import scratch as scratch_module
from gpublas.runtime import backends
from gpublas.runtime.launch import load_source

sim = pytest.mark.skipif(gpublas.backend() != "sim", reason="the packed header and thread orders are the sim's")

VISITS = """extern "C" __global__ void visits(int* counter, int* seq) {
    seq[atomicAdd(counter, 1)] = threadIdx.x;
}
extern "C" __global__ void scaled(const float* x, float a, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}"""


def _kernel(name):
    return load_source(VISITS, None, "small_calls.cu").get(name)


def test_a_geometry_seen_before_takes_new_arguments_each_call():
    k = _kernel("scaled")
    rng = np.random.default_rng(0)
    for a, n in [(2.0, 40), (-0.5, 64), (3.0, 1), (0.0, 64)]:  # one geometry, other arrays and scalars
        x = rng.standard_normal(n).astype(np.float32)
        dx, dy = gpublas.to_device(x), gpublas.zeros(64, np.float32)
        k.launch(1, 64, dx, a, dy, n)
        np.testing.assert_array_equal(dy.get()[:n], np.float32(a) * x)
        assert (dy.get()[n:] == 0).all()
    assert k._plans[1, 64, 0][2] is not None or gpublas.backend() != "sim"  # the bound launch was taken


@sim
def test_a_bound_launch_follows_the_thread_order_set_after_it():
    backend = backends.current()
    k, before = _kernel("visits"), backend.order
    counter, seq = gpublas.zeros(1, np.int32), gpublas.zeros(48, np.int32)

    def order_seen(order):
        gpublas.sim_thread_order(order)
        counter.fill(0)
        k.launch(1, 48, counter, seq)
        return seq.get().tolist()

    try:
        assert order_seen("forward") == list(range(48))
        assert order_seen("reverse") == list(range(47, -1, -1))  # the header packed under forward is not reused
        a, b = order_seen("random"), order_seen("random")
        assert sorted(a) == sorted(b) == list(range(48)) and a != b  # a seed of its own per launch
        assert order_seen("forward") == list(range(48))
    finally:
        backend.order = before


def test_a_launch_after_a_failed_one_runs_with_its_own_arguments():
    k = _kernel("scaled")
    x, y = gpublas.to_device(np.arange(32, dtype=np.float32)), gpublas.zeros(32, np.float32)
    k.launch(1, 32, x, 1.0, y, 32)
    with pytest.raises(TypeError, match="argument 3"):
        k.launch(1, 32, x, 1.0, y, 1 << 40)  # int32 overflow: refused while packing
    with pytest.raises(TypeError, match="takes 4 arguments"):
        k.launch(1, 32, x, 1.0, y)
    k.launch(1, 32, x, 2.0, y, 32)
    np.testing.assert_array_equal(y.get(), 2 * np.arange(32, dtype=np.float32))


@sim
def test_a_launch_after_an_illegal_address_runs(monkeypatch):
    backend = backends.current()
    backend.pool.free_cached()
    monkeypatch.setattr(backend, "memcheck", True)
    k = _kernel("scaled")
    x, y = gpublas.to_device(np.ones(16, np.float32)), gpublas.zeros(16, np.float32)
    with pytest.raises(IllegalAddressError, match="kernel 'scaled'"):
        k.launch(4, 256, x, 1.0, y, 1 << 20)  # the caller lies about n
    k.launch(4, 256, x, 3.0, y, 16)
    np.testing.assert_array_equal(y.get(), np.full(16, 3.0, np.float32))
    backend.pool.free_cached()


def test_two_threads_launch_one_geometry_at_once():
    n, rounds, wrong = 1024, 200, []
    xs = [gpublas.to_device(np.full(n, t + 1.0, np.float32)) for t in range(2)]
    expect = [gpublas.dot(x, x) for x in xs]
    start = threading.Barrier(2)

    def work(t):
        y = gpublas.zeros(n, np.float32)
        start.wait()
        for i in range(rounds):
            gpublas.axpy(1.0, xs[t], y)  # the same geometry and kernel in both threads
            d = gpublas.dot(xs[t], xs[t])  # each thread's scratch
            if d != expect[t]:
                wrong.append((t, i, d))
        if not (y.get() == rounds * (t + 1.0)).all():
            wrong.append((t, "axpy", np.unique(y.get())[:4]))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong, wrong[:4]


def test_reductions_on_the_scratch_match_the_allocating_path():
    rng = np.random.default_rng(1)
    for n in (1, 7, 1024, 40_000):
        h = rng.standard_normal(n).astype(np.float32)
        x, y = gpublas.to_device(h), gpublas.to_device(h[::-1].copy())
        s = gpublas.Stream()  # another stream: memory of their own
        on_stream = (gpublas.dot(x, y, stream=s), gpublas.nrm2(x, stream=s), gpublas.iamax(x, stream=s),
                     gpublas.asum(x, stream=s))
        s.synchronize()
        assert (gpublas.dot(x, y), gpublas.nrm2(x), gpublas.iamax(x), gpublas.asum(x)) == on_stream
        out = gpublas.zeros(1, np.float32)
        assert gpublas.dot(x, y, out=out) is out and out.get()[0] == np.float32(on_stream[0])
        assert on_stream[2] == int(np.argmax(np.abs(h)))


def test_each_thread_has_its_own_scratch():
    gpublas.dot(gpublas.ones(4), gpublas.ones(4))
    mine, theirs = scratch_module.scratch(), []
    th = threading.Thread(target=lambda: theirs.append(scratch_module.scratch()))
    th.start()
    th.join()
    assert mine is scratch_module.scratch() and theirs[0] is not mine and theirs[0].base != mine.base


def test_a_reduction_in_a_capture_is_still_refused():
    x = gpublas.ones(64)
    with pytest.raises(GraphError, match=r"gpublas.dot\(\) returning a Python float"):
        with gpublas.graph():
            gpublas.dot(x, x)
    assert gpublas.dot(x, x) == 64.0  # and the next call reads its own result


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.float16, np.uint8, np.bool_])
@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_operators_on_two_arrays_of_one_dtype_as_numpy(op, dtype):
    rng = np.random.default_rng(2)
    a, b = (rng.integers(1, 9, (3, 5)).astype(dtype) for _ in range(2))
    if op == "-" and dtype == np.bool_:
        pytest.skip("NumPy refuses bool - bool")
    want = eval(f"a {op} b")
    for _ in range(2):  # the first call learns the dtype's rule, the second takes the shortcut where it applies
        da, db = gpublas.to_device(a), gpublas.to_device(b)
        got = eval(f"da {op} db")
        assert got.dtype == want.dtype and got.shape == want.shape and got.strides == want.strides
        np.testing.assert_allclose(got.get(), want, rtol=1e-3)
        assert got.base is None and got.ptr not in (da.ptr, db.ptr)
    view = gpublas.to_device(np.ascontiguousarray(np.concatenate([a, b], axis=1)))[:, ::2]  # not contiguous
    np.testing.assert_allclose(eval(f"view {op} view").get(), eval(f"view.get() {op} view.get()"), rtol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
@pytest.mark.parametrize("expr", ["d * 2.0", "d * 3", "d - 0.5", "d / 4", "d ** 2.0", "d + 2**40", "d // 2.0"])
def test_an_array_and_a_python_number_as_numpy(expr, dtype):
    h = np.random.default_rng(3).integers(1, 9, (4, 6)).astype(dtype)
    try:
        want = eval(expr, {"d": h})
    except OverflowError:  # int32 + 2**40: NumPy 2 refuses, and so does gpublas, every time
        for _ in range(2):
            with pytest.raises(OverflowError):
                eval(expr, {"d": gpublas.to_device(h)})
        return
    for _ in range(2):  # learnt at the first call, then the shortcut for float32 and float64
        got = eval(expr, {"d": gpublas.to_device(h)})
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.get(), want, rtol=1e-3)
    np.testing.assert_allclose(gpublas.exp(gpublas.to_device(h)).get(), np.exp(h), rtol=2e-3)


def test_operator_results_leave_the_pool_as_they_found_it():
    x, y = gpublas.ones(1024), gpublas.ones(1024)
    x + y
    before = gpublas.memory_stats()["bytes_in_use"]
    for _ in range(100):
        z = x + y
    del z
    assert gpublas.memory_stats()["bytes_in_use"] == before


def test_a_freed_array_is_refused_at_launch():
    x, y = gpublas.ones(256), gpublas.ones(256)
    gpublas.axpy(1.0, x, y)
    x.free()
    with pytest.raises(gpublas.FreedArrayError):
        gpublas.axpy(1.0, x, y)
    with pytest.raises(LaunchError, match="non-contiguous"):
        _kernel("scaled").launch(1, 32, gpublas.ones((4, 8))[:, ::2], 1.0, y, 16)
