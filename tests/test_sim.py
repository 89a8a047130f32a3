"""The simulator itself (gpublas/runtime/sim/*.h, backends/sim.py): its compile cache key and headers, the
per-call argument record, memcheck, Ctrl-C during a launch."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from interrupt import interrupt_child

import gpublas
from gpublas.runtime import backends
from gpublas.runtime.backends import sim, sim_build
from gpublas.runtime.launch import load_source

pytestmark = pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="sim backend internals")


def test_cache_key_digests_every_sim_header(tmp_path, monkeypatch):
    copy = tmp_path / "sim"
    shutil.copytree(sim_build.HEADER.parent, copy)
    monkeypatch.setattr(sim_build, "HEADER", copy / "gpublas_sim.h")
    before = sim_build.headers_digest()
    names = sorted(p.name for p in copy.glob("*.h"))
    assert {"gpublas_sim.h", "dialect.h", "guard.h", "scheduler.h", "intrinsics.h", "wmma.h"} <= set(names)
    for name in names:  # a change to any header, not only the force-included one, changes the key
        p = copy / name
        text = p.read_text()
        p.write_text(text + "\n// changed\n")
        assert sim_build.headers_digest() != before, name
        p.write_text(text)
    assert sim_build.headers_digest() == before
    (copy / "new.h").write_text("#pragma once\n")  # a header added later counts too
    assert sim_build.headers_digest() != before


def test_gpublas_sim_h_includes_each_part():
    text = sim_build.HEADER.read_text()
    for part in ("dialect.h", "record.h", "fibers.h", "scheduler.h", "intrinsics.h", "wmma.h"):
        assert f'#include "{part}"' in text
        assert (sim_build.HEADER.parent / part).read_text().startswith(f"// {part}: ")



NOINLINE_SRC = r"""#include "common.cuh"
__device__ __noinline__ float twice(float v) { return 2.0f * v; }
extern "C" __global__ void noinline_check(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }
"""


def _preprocessed(*args):
    """The lines of `args` (the last a source) preprocessed as the sim compiles a module (its flags, the
    simulator headers' directory on the include path)."""
    cxx, _ = sim_build.host_compiler()
    cmd = [cxx, *[f for f in sim_build._CXXFLAGS if f not in ("-shared", "-fPIC")], *sim_build._machine_flags(),
           "-I", str(sim_build.HEADER.parent), *args[:-1], "-E", "-x", "c++", args[-1]]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()


def test_noinline_macro_comes_after_every_system_header(tmp_path):
    # libstdc++ spells GCC's attribute __noinline__ in some headers (bits/shared_ptr_base.h, GCC 12 on): a macro of
    # that name defined before one of them fails the build ("'noinline' was not declared", a GPU machine's g++).
    # Preprocessed as the sim builds a kernel: no system header is entered once the macro exists.
    src = tmp_path / "noinline.cu"
    src.write_text(NOINLINE_SRC)
    lines = _preprocessed("-I", str(gpublas.runtime.source.src_dir()), "-include", str(sim_build.HEADER), "-dD", str(src))
    at = next(i for i, ln in enumerate(lines) if ln.startswith("#define __noinline__ "))
    ours = (str(sim_build.HEADER.parent), str(gpublas.runtime.source.src_dir()), str(src), "<")
    entered = {ln.split('"')[1] for ln in lines[at:] if ln.startswith("# ") and '"' in ln}
    assert all(path.startswith(ours) for path in entered), sorted(p for p in entered if not p.startswith(ours))
    x = gpublas.full(32, 1.5, np.float32)
    load_source(NOINLINE_SRC, None, "noinline_check.cu").get("noinline_check")(1, 32, x)
    assert np.all(x.get() == 3.0)


def test_module_side_headers_leave_out_libstdcxx_containers():
    # What every module (and the precompiled header) parses: no <vector>, <string>, <mutex> or <algorithm>
    # (half of the precompiled header's build time and size, buffer.h); the runtime library's side has them.
    def entered(*defines):
        lines = _preprocessed(*defines, str(sim_build.HEADER))
        return {Path(ln.split('"')[1]).name for ln in lines if ln.startswith("# ") and '"' in ln}

    heavy = {"stl_vector.h", "basic_string.h", "std_mutex.h", "stl_algo.h"}
    assert entered() & heavy == set()
    assert entered("-DGPUBLAS_SIM_RUNTIME=1") >= {"basic_string.h", "std_mutex.h", "stl_algo.h"}  # the check sees them

MIXED_SRC = r"""
extern "C" __global__ void mixed(char flag, double* out, int n, short s, long long big, float f, unsigned char u) {
    if (threadIdx.x == 0 && flag) { out[0] = n; out[1] = s; out[2] = double(big); out[3] = f; out[4] = u; }
}
"""


def test_arguments_are_packed_at_their_c_offsets():
    # Mixed sizes and alignments: a layout mismatch between Python's record and the C parameters
    # would read shifted bytes.
    k = load_source(MIXED_SRC, None, "mixed.cu").get("mixed")
    out = gpublas.zeros(5, np.float64)
    k(1, 32, 1, out, -7, -3, 1 << 40, 2.5, 200)
    np.testing.assert_array_equal(out.get(), [-7, -3, 2.0 ** 40, 2.5, 200])


def test_argument_out_of_range_is_a_type_error_naming_it():
    k = load_source(MIXED_SRC, None, "mixed.cu").get("mixed")
    out = gpublas.zeros(5, np.float64)
    with pytest.raises(TypeError, match=r"kernel 'mixed': argument 2 \(int32\) cannot take 4294967296"):
        k(1, 32, 1, out, 1 << 32, 0, 0, 0.0, 0)
    with pytest.raises(TypeError, match=r"argument 5 \(float\) cannot take 'x'"):
        k(1, 32, 1, out, 0, 0, 0, "x", 0)


OOB_SRC = r"""
// oob_flat: one thread per element, bounds-checked against n only (the caller lies about n).
extern "C" __global__ void oob_flat(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 1.0f;
}
// oob_tiled: the same through shared memory and a barrier, so its threads run as fibers.
extern "C" __global__ void oob_tiled(const float* x, float* y, int n) {
    __shared__ float tile[64];
    int i = blockIdx.x * 64 + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = tile[63 - threadIdx.x];
}
"""


@pytest.fixture
def memcheck(monkeypatch):
    """GPUBLAS_SIM_MEMCHECK=1 for this test's allocations (fresh ones: cached blocks are dropped)."""
    backend = gpublas.runtime.backends.current()
    backend.pool.free_cached()
    monkeypatch.setattr(backend, "memcheck", True)
    yield backend
    backend.pool.free_cached()


def test_memcheck_names_kernel_block_and_thread(memcheck, monkeypatch):
    monkeypatch.setattr(memcheck, "order", sim.ORDERS["forward"])  # thread 128 is the first to fault
    k = load_source(OOB_SRC, None, "oob.cu").get("oob_flat")
    x = gpublas.zeros(4)  # one pool block of 512 bytes: 128 floats
    with pytest.raises(gpublas.IllegalAddressError, match=r"kernel 'oob_flat': illegal write to address 0x[0-9a-f]+ "
                       r"by block \(0, 0, 0\), thread \(128, 0, 0\): outside any live allocation: right after "
                       r"the end of the 512-byte allocation"):
        # 15 blocks of 256: under scheduler.h's 4096 threads for OpenMP, so the blocks run in order on
        # this thread (with more, another core's block 4 could fault first while block 0 is at thread 100)
        k(15, 256, x, 15 * 256)
    y = gpublas.zeros(200)  # the process goes on, and so do launches
    k(1, 256, y, 200)
    np.testing.assert_array_equal(y.get(), np.ones(200, np.float32))


def test_memcheck_catches_a_fiber_thread_reading_past_the_end(memcheck, sim_order):
    k = load_source(OOB_SRC, None, "oob.cu").get("oob_tiled")
    x, y = gpublas.zeros(128), gpublas.zeros(1000)
    with pytest.raises(gpublas.IllegalAddressError, match=r"kernel 'oob_tiled': illegal read of .* by block "
                       r"\(2, 0, 0\), thread \(\d+, 0, 0\): outside any live allocation"):
        k(4, 64, x, y, 256)
    k(2, 64, x, y, 128)
    np.testing.assert_array_equal(y.get()[:128], np.zeros(128, np.float32))


def test_memcheck_catches_use_after_free(memcheck):
    k = load_source(OOB_SRC, None, "oob.cu").get("oob_flat")
    x = gpublas.zeros(4096)
    ptr = x.ptr
    del x
    memcheck.pool.free_cached()  # the block goes back to the "device": its pages are unmapped
    with pytest.raises(gpublas.IllegalAddressError, match="illegal write"):
        k(1, 32, ptr, 32)


INTERRUPT_CHILD = r"""
import signal, sys, time
import gpublas
n = 1536
if sys.argv[1] == "custom":  # a handler that does not raise: the launch itself must fail
    signal.signal(signal.SIGINT, lambda *a: print("handler", flush=True))
else:  # Python's own, as a terminal session has it (a shell's background job inherits SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
a, b = gpublas.full((n, n), 1.0), gpublas.full((n, n), 1.0)
gpublas.gemm(gpublas.full((3, 3), 1.0), gpublas.full((3, 3), 1.0), kernel="naive")  # compile first
print("start", flush=True)
t = time.perf_counter()
try:
    gpublas.gemm(a, b, kernel="naive")
    print("finished", flush=True)
except (KeyboardInterrupt, gpublas.LaunchError) as e:
    print("stopped", type(e).__name__, flush=True)
c = gpublas.gemm(gpublas.full((5, 7), 1.0), gpublas.full((7, 3), 1.0), kernel="naive").get()
print("after", float(c.sum()), flush=True)
"""


@pytest.mark.parametrize("handler, expect", [("default", "KeyboardInterrupt"), ("custom", "LaunchError")])
def test_ctrl_c_stops_a_long_launch(handler, expect):
    # 1536^3 naive GEMM runs for tens of seconds on the simulator; SIGINT must stop it within a
    # block's time and leave the process able to launch again.
    lines, latency = interrupt_child(INTERRUPT_CHILD, handler)
    assert f"stopped {expect}" in lines, lines
    assert "after 105.0" in lines, lines
    assert latency < 1.0, f"{latency * 1e3:.0f} ms from SIGINT to the launch stopping"  # ~25 ms measured


@pytest.mark.parametrize("given, spin", [(None, "0"), ("active", "30000000000")])
def test_openmp_workers_sleep_between_launches_unless_told(given, spin):
    # libgomp prints the spin count it initialized with (OMP_DISPLAY_ENV) when the first module loads
    # it; left alone it would spin 300,000 times before sleeping after every parallel launch
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(OMP_DISPLAY_ENV="VERBOSE", GPUBLAS_BACKEND="sim", **({"OMP_WAIT_POLICY": given} if given else {}))
    code = "import gpublas; print(float(gpublas.full(3, 2.0).sum()))"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "6.0", p.stderr
    assert f"GOMP_SPINCOUNT = '{spin}'" in p.stderr, p.stderr


SPREAD_CHILD = r'''
import numpy as np, gpublas
from gpublas.runtime.launch import load_source
src = """extern "C" __global__ void meet(int* started, int* saw, long long spins) {
    if (threadIdx.x == 0) {  // count this block in, wait (a bounded spin) for the grid's others to start
        atomicAdd(started, 1);
        for (long long i = 0; i < spins && atomicAdd(started, 0) < (int)gridDim.x; ++i) {}
        saw[blockIdx.x] = atomicAdd(started, 0);  // how many blocks had started: 1 alone, 2 at once
    }
}"""
k = load_source(src, None, "meet.cu").get("meet")
started, saw = gpublas.zeros(1, np.int32), gpublas.zeros(2, np.int32)
k(2, 32, started, saw, 2_000_000)  # 64 threads: on the calling thread, block 0 first
print("small", saw.get().tolist())
started.fill(0)
assert k.spread_blocks() is k
k(2, 32, started, saw, 2_000_000_000)  # over two OpenMP threads: each block sees the other start
print("spread", saw.get().tolist())
started.fill(0)
k = load_source("// sim spread: meet\n" + src, None, "meet_spread.cu").get("meet")  # said by the source
k(2, 32, started, saw, 2_000_000_000)
print("declared", saw.get().tolist())
'''


def test_spread_blocks_runs_a_small_grid_over_the_cores():
    # Kernel.spread_blocks (record.h's flag bit 4): a grid under scheduler.h's 4,096 threads runs its blocks on
    # several OpenMP threads at once, as a sort's few heavy tiles want; without it, in order on the calling thread
    env = dict(os.environ, OMP_NUM_THREADS="2", GPUBLAS_BACKEND="sim")
    p = subprocess.run([sys.executable, "-c", SPREAD_CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[:3] == ["small [1, 2]", "spread [2, 2]", "declared [2, 2]"], p.stdout


def test_cache_key_tells_cpus_with_one_name_apart(tmp_path):
    # modules are built with -march=native: two CPUs a VM names alike but with other features must not
    # share a cached build
    def cpu(flags, model="1"):
        p = tmp_path / f"cpuinfo-{flags}-{model}"
        p.write_text(f"processor\t: 0\ncpu family\t: 25\nmodel\t\t: {model}\nmodel name\t: AMD EPYC\n"
                     f"stepping\t: 1\nflags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\nflags\t\t: other\n")
        return sim_build._cpu_id(str(p))
    assert cpu("avx2") == cpu("avx2")
    assert cpu("avx2") != cpu("avx2 avx512f")
    assert cpu("avx2") != cpu("avx2", model="17")


def test_math_functions_of_a_float_are_float_as_in_cuda():
    # CUDA overloads exp, tanh, sqrt ... for float in the global namespace; <cmath> alone would pick
    # the double functions for a float argument (slower, other roundings)
    src = """extern "C" __global__ void widths(const float* x, int* out) {
        out[0] = sizeof(exp(x[0])); out[1] = sizeof(tanh(x[0])); out[2] = sizeof(sqrt(x[0]));
        out[3] = sizeof(pow(x[0], 2.0f)); out[4] = sizeof(abs(x[0])); out[5] = sizeof(exp(1.0));
        out[6] = (int)(abs(-2.5f) * 2.0f);
    }"""
    k = load_source(src, source_name="widths.cu").get("widths")
    out = gpublas.zeros(7, np.int32)
    k(1, 1, gpublas.full(1, 0.5), out)
    assert out.get().tolist() == [4, 4, 4, 4, 4, 8, 5]


# where glibc's tanhf is 2 ulp off (found by comparing with tanhl); the simulator's own is within 1
GLIBC_TANHF_2ULP = [float.fromhex(h) for h in ("0x1.f72258p-7", "0x1.d8b496p-6", "0x1.f795e2p-6", "0x1.9dc93p-5",
                                                "0x1.bc754cp-5", "0x1.db060cp-5", "0x1.f98d9cp-5", "0x1.5c351cp-4")]


def test_tanhf_is_the_simulators_own_within_one_ulp():
    src = """extern "C" __global__ void tanhs(const float* x, float* out, int n) {
        for (int i = 0; i < n; ++i) {
            out[3 * i] = tanhf(x[i]); out[3 * i + 1] = tanh(x[i]); out[3 * i + 2] = std::tanh(x[i]);
        }
    }"""
    k = load_source(src, source_name="tanhs.cu").get("tanhs")
    bits = np.arange(0, 0x41A00000, 997, dtype=np.uint32)  # 0 to 20 by bit pattern: subnormals to saturation
    x = np.concatenate([bits.view(np.float32), np.float32(GLIBC_TANHF_2ULP)])
    x = np.concatenate([x, -x, np.float32([np.inf, -np.inf, 1e-30, -1e-30, 2 ** -12, -(2 ** -12)])])
    out = gpublas.empty(3 * x.size, np.float32)
    k(1, 1, gpublas.to_device(x), out, x.size)
    got = out.get().reshape(-1, 3)
    want = np.tanh(x.astype(np.float64)).astype(np.float32)
    ulp = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32)[:, None])  # same sign throughout
    assert ulp.max() <= 1, x[ulp.max(axis=1).argmax()]
    assert (got == got[:, :1]).all()  # tanh and std::tanh of a float are tanhf
    z = np.float32([0.0, -0.0, np.nan])
    out = gpublas.empty(9, np.float32)
    k(1, 1, gpublas.to_device(z), out, 3)
    zz = out.get().reshape(3, 3)
    assert (zz[:2] == 0).all() and np.signbit(zz[1]).all() and not np.signbit(zz[0]).any() and np.isnan(zz[2]).all()


def test_exp_of_a_float_is_expf_within_one_ulp_in_every_spelling():
    src = """extern "C" __global__ void exps(const float* x, float* out, int n) {
        for (int i = 0; i < n; ++i) {
            out[4 * i] = expf(x[i]); out[4 * i + 1] = exp(x[i]); out[4 * i + 2] = std::exp(x[i]);
            out[4 * i + 3] = __expf(x[i]);
        }
    }"""
    k = load_source(src, source_name="exps.cu").get("exps")
    bits = np.arange(0, 0x43000000, 1009, dtype=np.uint32)  # 0 to 128 by bit pattern, subnormals included
    x = np.concatenate([bits.view(np.float32), np.float32([88.72283, 88.72284, 89.0, 103.0, 104.0, 150.0])])
    x = np.concatenate([x, -x, np.float32([np.inf, -np.inf, np.nan, 1e30, -1e30, 201.0, -201.0])])
    out = gpublas.empty(4 * x.size, np.float32)
    k(1, 1, gpublas.to_device(x), out, x.size)
    got = out.get().reshape(-1, 4)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)  # the exact result rounded once
    finite = np.isfinite(want) & (want > 0)
    ulp = np.abs(got[finite].view(np.int32).astype(np.int64) - want[finite].view(np.int32)[:, None])
    assert ulp.max() <= 1, x[finite][ulp.max(axis=1).argmax()]
    np.testing.assert_array_equal(got[~finite], np.repeat(want[~finite][:, None], 4, axis=1))  # inf, 0, NaN
    np.testing.assert_array_equal(got, np.repeat(got[:, :1], 4, axis=1))  # every spelling is the same function
    assert (got[x < -104] == 0).all() and (got[(x > 88.7229) & ~np.isnan(x)] == np.inf).all()
    assert 0 < got[x == -103.0][0, 0] < np.finfo(np.float32).tiny  # a subnormal result, not 0


def test_fast_path_threads_get_their_index_in_each_order(sim_order):
    src = """extern "C" __global__ void visits(int* counter, int* seq, int* idx) {
        const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        seq[atomicAdd(counter, 1)] = t;
        idx[3 * t] = threadIdx.x; idx[3 * t + 1] = threadIdx.y; idx[3 * t + 2] = threadIdx.z;
    }"""
    k = load_source(src, source_name="visits.cu").get("visits")
    counter, seq, idx = gpublas.zeros(1, np.int32), gpublas.zeros(30, np.int32), gpublas.zeros(90, np.int32)
    k(1, (5, 3, 2), counter, seq, idx)
    t = np.arange(30)
    want = t if sim_order == "forward" else t[::-1]  # the thread order the simulator promises
    assert seq.get().tolist() == want.tolist()
    assert idx.get().reshape(30, 3).tolist() == [[i % 5, i // 5 % 3, i // 15] for i in t]


MASK_SRC = """
extern "C" __global__ void masked_shuffles(const int* x, int* out) {
    const int t = threadIdx.x;
    const int v = x[t];
    __syncthreads();  // a barrier kernel: fissioned, or on fibers
    out[t] = __shfl_xor_sync(0x0000ffffu, v, 16);              // lanes 0-15 read lanes 16-31: outside the mask
    out[64 + t] = __shfl_down_sync(0xffffffffu, v, 8);         // a full mask: lanes past the warp keep their own
}
"""


def test_a_shuffle_reads_no_lane_outside_its_mask():
    """A lane outside a shuffle's mask hands over all one bits (a GPU's value there is undefined), on fibers and
    fissioned alike; lanes past the block's threads keep the caller's value, as before."""
    if gpublas.backend() != "sim":
        pytest.skip("the simulator's model of masks")
    backend = gpublas.runtime.backends.current()
    k = gpublas.load_source(MASK_SRC, None, "masked_shuffles.cu").get("masked_shuffles")
    x = np.arange(100, 140, dtype=np.int32)
    for fission in (False, True):
        out = gpublas.zeros(128, np.int32)
        try:
            backend.fission = fission
            k(1, 40, gpublas.to_device(x), out)
        finally:
            backend.fission = os.environ.get("GPUBLAS_SIM_FISSION", "1") not in ("", "0")
        got = out.get()
        np.testing.assert_array_equal(got[:16], -1, err_msg=f"fission {fission}")  # lanes 16-31: not in the mask
        np.testing.assert_array_equal(got[16:32], x[:16])
        np.testing.assert_array_equal(got[32:40], x[32:40])  # warp 1 has 8 lanes: lanes 16-23 do not exist
        np.testing.assert_array_equal(got[64:104], np.r_[x[8:32], x[24:32], x[32:40]])


def test_large_allocations_are_huge_page_aligned(monkeypatch):
    """From 4 MiB on the sim's device memory is 2 MiB-aligned (and madvised into huge pages, as NumPy's: a 16 MB
    stream through 4 KiB pages ran at half NumPy's speed); smaller ones keep 256-byte alignment; both hold data."""
    backend = backends.current()
    monkeypatch.setattr(backend, "memcheck", False)  # memcheck's guarded blocks are its own
    for nbytes, align in ((1000, 256), ((4 << 20) + 4, 2 << 20)):
        ptr = backend.mem_alloc(nbytes)
        try:
            assert ptr % align == 0, (nbytes, hex(ptr))
            view = backend.host_view(ptr, nbytes)
            view[:] = 7
            assert int(view.sum()) == 7 * nbytes
        finally:
            backend.mem_free(ptr)
