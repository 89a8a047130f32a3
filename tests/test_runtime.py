"""The runtime layer: arrays and transfers, the pool, streams and events, pinned memory, compile
errors, launches and the simulator's barrier semantics."""
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import gpublas
from gpublas.runtime.backends.base import Backend
from gpublas.runtime.launch import load_source

DTYPES = [np.float32, np.float64, np.int32]
SHAPES = [(0,), (1,), (7,), (31, 3), (2, 0, 5), (13, 17), (4, 3, 2, 5)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip(dtype, shape, rng):
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    d = gpublas.to_device(x)
    assert d.shape == shape and d.dtype == dtype and d.size == x.size and d.nbytes == x.nbytes
    np.testing.assert_array_equal(d.get(), x)
    np.testing.assert_array_equal(d.copy().get(), x)


def test_non_contiguous_input_and_bad_dtype():
    x = np.arange(12, dtype=np.float32).reshape(3, 4).T
    np.testing.assert_array_equal(gpublas.to_device(x).get(), x)
    with pytest.raises(TypeError, match="float128"):
        gpublas.to_device(np.zeros(3, np.longdouble))


def test_constructors_and_fill():
    np.testing.assert_array_equal(gpublas.zeros((3, 5)).get(), np.zeros((3, 5), np.float32))
    np.testing.assert_array_equal(gpublas.full((4,), 2.5, np.float64).get(), np.full(4, 2.5))
    np.testing.assert_array_equal(gpublas.full((6,), -3, np.int32).get(), np.full(6, -3, np.int32))
    a = gpublas.empty((1000,), np.float32).fill(7.25)
    np.testing.assert_array_equal(a.get(), np.full(1000, 7.25, np.float32))
    z = gpublas.zeros_like(a)
    assert z.shape == a.shape and not z.get().any()
    assert gpublas.empty_like(a, np.float64).dtype == np.float64
    np.testing.assert_array_equal(gpublas.to_device(np.arange(5.0)).astype(np.int32).get(), np.arange(5))


def test_views_share_memory():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    d = gpublas.to_device(x)
    np.testing.assert_array_equal(d.reshape(6, 4).get(), x.reshape(6, 4))
    np.testing.assert_array_equal(d.reshape(-1, 3).get(), x.reshape(-1, 3))
    np.testing.assert_array_equal(d.ravel().get(), x.ravel())
    np.testing.assert_array_equal(d[1:3].get(), x[1:3])
    np.testing.assert_array_equal(d[-1].get(), x[-1])
    np.testing.assert_array_equal(d[2:2].get(), x[2:2])
    d[1].fill(0)  # writes through the view into the base
    x[1] = 0
    np.testing.assert_array_equal(d.get(), x)
    np.testing.assert_array_equal(d[[0, 2]].get(), x[[0, 2]])  # an integer array gathers into a copy
    with pytest.raises(IndexError, match="out of bounds"):
        d[4]
    with pytest.raises(ValueError, match="cannot reshape"):
        d.reshape(5, 5)
    assert "DeviceArray" in repr(d) and "float32" in repr(d)


def test_copy_from_copies_into_a_view_and_checks_operands():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = gpublas.zeros((3, 4))
    assert d[1].copy_from(gpublas.to_device(x[2])) is not None
    np.testing.assert_array_equal(d.get(), np.where(np.arange(3)[:, None] == 1, x[2], 0))
    gpublas.zeros((0,)).copy_from(gpublas.zeros((0,)))
    with pytest.raises(ValueError, match="same dtype and size"):
        d.copy_from(gpublas.zeros((3, 4), np.float64))
    with pytest.raises(ValueError, match="same dtype and size"):
        d[0].copy_from(gpublas.zeros((5,)))


def test_kernel_roots_other_than_cuda_src():
    from nn.kernels import KERNELS
    k = gpublas.get_kernel("activation", "act_forward", np.float32, root=KERNELS)
    assert k is gpublas.get_kernel("activation", "act_forward", np.float32, root=KERNELS)
    with pytest.raises(FileNotFoundError, match="no kernel family 'activation'"):
        gpublas.get_kernel("activation", "act_forward", np.float32)


def test_freed_array_raises_for_base_and_views():
    d = gpublas.to_device(np.ones(10, np.float32))
    v = d[2:5]
    d.free()
    for arr in (d, v):
        with pytest.raises(gpublas.FreedArrayError, match="freed"):
            arr.get()
    with pytest.raises(gpublas.FreedArrayError):
        gpublas.get_kernel("memory", "fill_real", np.float32)(1, 32, v, 1.0, 3)
    assert "freed" in repr(d)


def test_pool_reuses_blocks_and_reports_stats():
    gpublas.free_cached()
    before = gpublas.memory_stats()
    a = gpublas.empty((1000,), np.float32)
    ptr = a.ptr
    mid = gpublas.memory_stats()
    assert mid["bytes_in_use"] >= before["bytes_in_use"] + 4000
    del a
    after_free = gpublas.memory_stats()
    assert after_free["bytes_in_use"] == before["bytes_in_use"]
    assert after_free["bytes_cached"] >= 4000
    b = gpublas.empty((1000,), np.float32)
    assert b.ptr == ptr  # the cached block came back
    assert gpublas.memory_stats()["device_allocations"] == mid["device_allocations"]
    del b
    gpublas.free_cached()
    assert gpublas.memory_stats()["bytes_cached"] == 0


def test_out_of_memory_names_bytes():
    total = gpublas.device_info()["total_memory"]
    with pytest.raises(gpublas.OutOfMemoryError) as e:
        gpublas.empty((total // 4 + 1024,), np.float32)
    assert "asked for" in str(e.value) and "in use" in str(e.value)
    assert e.value.requested > total
    gpublas.empty((10,), np.float32)  # still usable afterwards


def test_stream_and_events_with_pinned_memory():
    n = 1 << 16
    host = gpublas.pinned_empty((n,), np.float32)
    assert gpublas.is_pinned(host) and gpublas.is_pinned(host[10:20])
    assert not gpublas.is_pinned(np.empty(n, np.float32))
    host[:] = np.arange(n, dtype=np.float32)
    s = gpublas.Stream()
    start, end = gpublas.Event(), gpublas.Event()
    start.record(s)
    d = gpublas.to_device(host, stream=s)
    out = gpublas.pinned_empty((n,), np.float32)
    d.get(stream=s, out=out)
    end.record(s)
    s.synchronize()
    np.testing.assert_array_equal(out, host)
    assert start.elapsed_ms(end) >= 0
    with s:
        assert gpublas.current_stream() is s
    assert gpublas.current_stream() is None


def test_async_copy_of_pageable_memory_warns():
    s = gpublas.Stream()
    x = np.ones(100, np.float32)
    with pytest.warns(gpublas.PageableMemoryWarning, match="pageable"):
        d = gpublas.to_device(x, stream=s)
    np.testing.assert_array_equal(d.get(), x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpublas.to_device(x)  # a blocking copy of pageable memory is fine


def test_compile_error_carries_log_and_line():
    src = textwrap.dedent("""\
        extern "C" __global__ void broken(float* x) {
            int i = threadIdx.x;
            x[i] = undefined_name * 2;
        }
        """)
    with pytest.raises(gpublas.CompileError) as e:
        load_source(src, None, "broken.cu")
    assert "undefined_name" in e.value.log
    assert e.value.line == 3 and e.value.filename.endswith("broken.cu")


def test_launch_checks_arguments():
    k = gpublas.get_kernel("memory", "fill_real", np.float32)
    a = gpublas.empty((10,), np.float32)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        k(1, 32, a, 1.0)
    with pytest.raises(gpublas.LaunchError, match="block"):
        k(1, 2048, a, 1.0, 10)
    with pytest.raises(TypeError, match="DeviceArray"):
        k(1, 32, np.zeros(10, np.float32), 1.0, 10)


RACE_SRC = """
// Block-wide reversal through shared memory. `racy` lacks the barrier between the write and the
// read, so what a thread reads depends on which threads ran before it.
extern "C" __global__ void reverse_ok(const float* x, float* y, int n) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    buf[t] = t < n ? x[t] : 0.f;
    __syncthreads();
    if (t < n) y[t] = buf[n - 1 - t];
}
extern "C" __global__ void reverse_racy(const float* x, float* y, int n) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    buf[t] = t < n ? x[t] : 0.f;
    if (t < n) y[t] = buf[n - 1 - t];
    __syncthreads();
}
extern "C" __global__ void warp_sum(const float* x, float* y) {
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    y[threadIdx.x] = v;
}
extern "C" __global__ void diverge(float* y) {
    if (threadIdx.x == 0) return;
    __syncthreads();
    y[threadIdx.x] = 1.f;
}
extern "C" __global__ void dyn_smem_reverse(const float* x, float* y, int n) {
    extern __shared__ float buf[];
    int t = threadIdx.x;
    buf[t] = x[t];
    __syncthreads();
    y[t] = buf[n - 1 - t];
}
"""


def _run(kernel, n=256, **kw):
    m = load_source(RACE_SRC, None, "race_check.cu")
    x = gpublas.to_device(np.arange(n, dtype=np.float32))
    y = gpublas.zeros((n,), np.float32)
    m.get(kernel)(1, n, x, y, n, **kw)
    return y.get()


@pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="thread order is a sim feature")
def test_missing_barrier_is_caught_by_thread_order():
    want = np.arange(256, dtype=np.float32)[::-1]
    results = {}
    for order in ("forward", "reverse"):
        gpublas.sim_thread_order(order)
        np.testing.assert_array_equal(_run("reverse_ok"), want)
        results[order] = _run("reverse_racy")
    gpublas.sim_thread_order("forward")
    assert not np.array_equal(results["forward"], results["reverse"])  # the race shows
    assert not np.array_equal(results["forward"], want) or not np.array_equal(results["reverse"], want)


def test_warp_shuffle_and_dynamic_shared_memory(sim_order):
    m = load_source(RACE_SRC, None, "race_check.cu")
    x = np.arange(64, dtype=np.float32)
    y = gpublas.zeros((64,), np.float32)
    m.get("warp_sum")(1, 64, gpublas.to_device(x), y)
    want = np.repeat([x[:32].sum(), x[32:].sum()], 32)
    np.testing.assert_array_equal(y.get(), want)
    np.testing.assert_array_equal(_run("dyn_smem_reverse", 128, shared=128 * 4),
                                  np.arange(128, dtype=np.float32)[::-1])


@pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="divergence is detected by the sim")
def test_divergent_barrier_raises_naming_the_kernel():
    m = load_source(RACE_SRC, None, "race_check.cu")
    with pytest.raises(gpublas.LaunchError, match="diverge.*__syncthreads"):
        m.get("diverge")(1, 64, gpublas.zeros((64,), np.float32))
    # the simulator recovers: the next launch works
    np.testing.assert_array_equal(_run("reverse_ok"), np.arange(256, dtype=np.float32)[::-1])


def test_backend_selection_and_device_info():
    info = gpublas.device_info()
    assert {"name", "compute_capability", "multiprocessors", "total_memory"} <= set(info)
    assert gpublas.backend() in ("sim", "cuda")
    with pytest.raises(ValueError, match="unknown backend"):
        gpublas.use("opencl")


def test_backend_object_owns_its_pool_and_kernel_caches():
    b = gpublas._current_backend()
    k = gpublas.get_kernel("memory", "fill_real", np.float32)
    assert any(v is k for v in b.kernels.values()) and b.modules
    a = gpublas.empty((100,), np.float32)
    assert a._mem.pool is b.pool and b.pool.stats() == gpublas.memory_stats()
    assert gpublas.use(b.name) is b  # use() swaps one object; the same name finds it again
    other = type(b).__new__(type(b))
    Backend.__init__(other)  # another device's state: nothing shared, nothing to forget from outside
    assert other.pool is not b.pool and other.pool.backend is other and not other.kernels and not other.modules


def test_default_backend_falls_back_to_sim_with_notice():
    env = {k: v for k, v in os.environ.items() if k != "GPUBLAS_BACKEND"}
    code = "import gpublas; print(gpublas.backend())"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    if p.stdout.strip() == "sim":
        assert "simulator" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    env["GPUBLAS_BACKEND"] = "sim"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.stdout.strip() == "sim" and p.stderr == ""


@pytest.mark.cuda
def test_cuda_backend_round_trip_and_clean_exit():
    code = textwrap.dedent("""
        import numpy as np, gpublas
        gpublas.use("cuda")
        x = np.arange(1000, dtype=np.float32)
        d = gpublas.to_device(x)
        d.fill(3.0)
        assert (d.get() == 3.0).all()
        print(gpublas.device_info()["name"])
        """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "context stack" not in p.stderr
