"""The sim backend's loop fission (gpublas/runtime/backends/sim_fission.py, gpublas/runtime/sim/fission.h): which
barrier kernels it rewrites, that a rewritten kernel gives the fibers' bits (both thread orders),
and that races, divergent barriers and bad accesses are still caught when it runs."""
import os
import subprocess
import threading

import numpy as np
import pytest

import gpublas
from gpublas.runtime import source
from gpublas.runtime.backends import sim, sim_analysis, sim_cparse, sim_fission
from gpublas.runtime.launch import load_source

pytestmark = pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="a sim feature")

# Barrier kernels that keep their fibers, and why (everything else must be rewritten).
KEPT_ON_FIBERS = {"gemm_wmma": "preprocessor line", "gemm_v2_": "parameter list", "gemm_tf32_": "parameter list",
                  "gemm_half_": "explicit template arguments",
                  "attention_half_": "preprocessor line",  # the mma.sync emulation exchanges across a warp's fibers
                  # the simulator builds att_sim_forward / att_sim_backward in their place (ATT_SIM_ROWS: one thread a
                  # block, no barrier); the GPU's tiles it runs only in tests, on fibers
                  "attention_forward": "preprocessor line", "attention_backward": "preprocessor line"}
# a key ending in "_" names a prefix, any other key one kernel


def _report(path):
    text = path.read_text()
    full, defines = source.with_includes(text), {"real": "float"}
    return sim_fission.transform(source.strip_comments(sim_cparse.translate(text)), list(source.kernel_signatures(text, defines)),
                                 sim_analysis.kernels_needing_fibers(full, defines),
                                 sim_analysis.taken_branches(source.strip_comments(full), defines), path.name)[1]


def test_every_barrier_kernel_of_the_project_is_fissioned():
    roots = [source.src_dir(), source.src_dir().parent / "nn" / "cuda"]
    reports = {k: r for root in roots for p in sorted(root.glob("*.cu")) for k, r in _report(p).items()}
    assert {"gemm_tiled", "gemm_regblock", "reduce_rows", "softmax_rows", "transpose_tiled", "dot_partial",
            "embedding_backward"} <= set(reports)
    for kernel, why in reports.items():
        kept = [reason for key, reason in KEPT_ON_FIBERS.items()
                if kernel == key or (key.endswith("_") and kernel.startswith(key))]
        if kept:
            assert why is not None and kept[0] in why, (kernel, why)
        else:
            assert why is None, (kernel, why)


@pytest.mark.parametrize("root", [None, "nn"])
def test_every_fissioned_source_compiles(root):
    """The rewrite must also compile: a family whose fissioned source g++ refuses falls back to fibers with a
    warning only (correct, several times slower), which is how iamax_partial ran on fibers unnoticed."""
    folder = source.src_dir().parent / "nn" / "cuda" if root else None
    for family in source.families(folder):
        m = load_source(source.read(family, folder), {"real": "float"}, str(source.path(family, folder)))
        refused = {k: why for k, why in m.handle.fission.items() if why and "did not compile" in why}
        assert not refused, f"{family}.cu: {refused}"


def test_every_fission_compiles_for_every_dtype(tmp_path):
    """Every family's rewritten source compiles for every dtype whose plain source compiles: a rewrite
    g++ refuses falls back to fibers with one line on stderr (reduce.cu in complex128 did: its warp
    exchange held 8 bytes). Front-end checks (-fsyntax-only: templates are instantiated, static_asserts
    fire) against a precompiled gpublas_sim.h, about 0.4 s of CPU each; -Wfatal-errors stops a check at
    its first error (a dtype a family is not built for, such as reduce.cu in int8, failed in 10 s of
    template errors, 0.1 s with it; the verdict is the same); a pass is memoized in the compile cache
    under everything the check reads, so a warm run only redoes what changed. One front end per family
    serves every dtype: what it writes depends on the names of the defines, not on their values (kernel
    names, #if branches taken), checked here on reduce.cu, so the 165 checks need 32 front ends."""
    from concurrent.futures import ThreadPoolExecutor

    from gpublas.runtime import compiler, dtypes
    from gpublas.runtime.backends import sim_build

    cxx, version = sim_build.host_compiler()
    flags = [f for f in sim_build.module_flags({}) if f != "-shared"]
    pch = tmp_path / sim_build.HEADER.name
    base = sim_build.compile_command(cxx, flags)
    digest = compiler.cache_key(sim_build.headers_digest(), source.headers_digest(), version, *base)
    base[base.index(str(sim_build.HEADER))] = str(pch)  # -include: g++ takes <it>.gch in its place
    built_pch, pch_lock = [], threading.Lock()

    def compiles(text, real, name):
        with pch_lock:  # built once, and only when a check is not memoized
            if not built_pch:
                header = [x for x in base if x not in ("-include", str(pch), "-x", "c++")]
                subprocess.run(header + ["-x", "c++-header", str(sim_build.HEADER), "-o", f"{pch}.gch"], check=True)
                built_pch.append(pch)
        src = tmp_path / name
        src.write_text(text)
        p = subprocess.run(base + [f"-Dreal={real}", "-Winvalid-pch", "-fsyntax-only", "-Wfatal-errors", str(src)],
                           capture_output=True, text=True)
        return p.returncode == 0, p.stderr

    def front_end(root, family, real="float"):
        path = source.path(family, root)
        return sim_build.front_end(path.read_text(), {"real": real}, str(path))

    def check(job):
        root, family, dtype = job
        real, bodies = dtypes.TABLE[dtype].c, fronts[root, family][2]
        memo = f"fission-check-{family}-{compiler.cache_key(digest, real, bodies['fissioned'])}.json"
        known = (compiler.memo_load(memo) or {}).get("result")
        if known in ("fissioned", "not built"):
            return job, known, None
        ok, log = compiles(bodies["fissioned"], real, f"{family}-{dtype}.fission.cu")
        what = "fissioned" if ok else "falls back" if compiles(bodies["plain"], real, f"{family}-{dtype}.cu")[0] \
            else "not built"
        if what != "falls back":
            compiler.memo_store(memo, {"result": what})
        return job, what, log

    roots = [None, source.src_dir().parent / "nn" / "cuda"]
    fronts = {(root, f): front_end(root, f) for root in roots for f in source.families(root)}
    assert front_end(None, "reduce", "cdouble") == fronts[None, "reduce"]
    rewritten = [key for key, (_, report, _) in fronts.items() if None in report.values()]
    jobs = [(root, f, d) for root, f in rewritten for d in dtypes.TABLE]
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = list(pool.map(check, jobs))
    fallbacks = {f"{family}.cu {dtype}": "\n".join(log.splitlines()[:8]) for (_, family, dtype), what, log in results
                 if what == "falls back"}
    assert not fallbacks, "the rewrite does not compile (the kernels would run on fibers):\n" + "\n".join(
        f"{k}:\n{v}" for k, v in fallbacks.items())
    fissioned = {(family, str(dtype)) for (_, family, dtype), what, _ in results if what == "fissioned"}
    assert {("reduce", "complex128"), ("reduce", "float16"), ("blas1", "complex64"), ("embedding", "float32")} <= fissioned


@pytest.fixture
def both_ways():
    """run(f) -> f()'s host result with fibers and with fission, after checking they are the same bits."""
    backend = gpublas.runtime.backends.current()

    def run(f):
        out = []
        for fission in (False, True):
            backend.fission = fission
            r = f()
            out.append(np.asarray(r.get() if hasattr(r, "get") else r))
        backend.fission = True
        np.testing.assert_array_equal(out[0], out[1])
        return out[1]

    yield run
    backend.fission = os.environ.get("GPUBLAS_SIM_FISSION", "1") not in ("", "0")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fission_matches_fibers_bit_for_bit(both_ways, sim_order, rng, dtype):
    a = gpublas.to_device(rng.standard_normal((37, 29)).astype(dtype))
    b = gpublas.to_device(rng.standard_normal((29, 131)).astype(dtype))
    for kernel in ("tiled", "regblock"):
        for ta, tb in ((False, False), (True, False), (False, True)):
            x, y = (gpublas.to_device(a.get().T.copy()) if ta else a), (gpublas.to_device(b.get().T.copy()) if tb else b)
            got = both_ways(lambda: gpublas.gemm(x, y, trans_a=ta, trans_b=tb, kernel=kernel))
            np.testing.assert_allclose(got, a.get() @ b.get(), rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-4)
    m = gpublas.to_device(rng.standard_normal((7, 1000)).astype(dtype))
    for f in (lambda: m.sum(axis=1), lambda: m.max(axis=1), lambda: gpublas.argmax(m, axis=1),
              lambda: m.sum(axis=0), lambda: gpublas.softmax(m), lambda: gpublas.logsumexp(m),
              lambda: gpublas.sum(m), lambda: gpublas.argmin(m), lambda: gpublas.numpy_api.manipulation.transpose(m),
              lambda: m[m > 0.5]):  # the last: a block scan (scan_tiles_real)
        both_ways(f)
    v = gpublas.to_device(rng.standard_normal(3001).astype(dtype))
    tall = gpublas.to_device(rng.standard_normal((3001, 5)).astype(dtype))
    for f in (lambda: gpublas.dot(v, v), lambda: gpublas.nrm2(v), lambda: gpublas.iamax(v), lambda: gpublas.asum(v),
              lambda: gpublas.gemv(tall, v, trans=True)):
        both_ways(f)


WARP_SRC = r"""
// per_warp_loop: each warp runs as many shuffle rounds as its own index + 1 (a loop whose trip count
// differs between warps, uniform inside each), then a block-wide barrier.
extern "C" __global__ void per_warp_loop(float* y) {
    __shared__ float total[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float v = (float)threadIdx.x;
    for (int r = 0; r <= warp; ++r) v += __shfl_xor_sync(0xffffffffu, v, 1 << r);
    if (lane == 0) total[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < (int)(blockDim.x / 32) ? total[lane] : 0.f;
        const unsigned b = __ballot_sync(0xffffffffu, s > 100.f);
        s += __shfl_down_sync(0xffffffffu, s, 1);
        y[threadIdx.x] = s + (float)__popc(b);
    } else {
        y[threadIdx.x] = v;
    }
}
// half_sync: a __syncthreads() only half the block reaches (a bug): the launch must fail.
extern "C" __global__ void half_sync(float* y) {
    if (threadIdx.x < 16) __syncthreads();
    y[threadIdx.x] = 1.f;
}
// half_warp_shuffle: a full-mask shuffle only part of a warp reaches (a bug): the launch must fail.
extern "C" __global__ void half_warp_shuffle(float* y) {
    float v = 1.f;
    if (threadIdx.x < 8) v = __shfl_down_sync(0xffffffffu, v, 1);
    y[threadIdx.x] = v;
}
// while_barrier: a barrier inside `while`, which the rewrite refuses: it runs on fibers.
extern "C" __global__ void while_barrier(float* y, int n) {
    __shared__ float s[64];
    int i = 0;
    while (i < n) { s[threadIdx.x] = (float)i; __syncthreads(); y[threadIdx.x] += s[63 - threadIdx.x]; __syncthreads(); ++i; }
}
"""


def test_warp_intrinsics_in_thread_dependent_loops_and_branches(both_ways, sim_order):
    m = load_source(WARP_SRC, None, "fission_warps.cu")
    assert m.handle.fission["per_warp_loop"] is None
    for n in (128, 96, 32):
        y = both_ways(lambda: _launch(m, "per_warp_loop", n))
        np.testing.assert_array_equal(y, _per_warp_loop(n))


def _per_warp_loop(n):
    """per_warp_loop in NumPy, a warp's lanes in lockstep."""
    v = np.arange(n, dtype=np.float32)
    for w in range(n // 32):
        lanes = np.arange(32)
        for r in range(w + 1):
            v[32 * w:32 * w + 32] = v[32 * w:32 * w + 32] + v[32 * w + (lanes ^ (1 << r))]
    total = v[::32]
    s = np.array([total[lane] if lane < n // 32 else 0 for lane in range(32)], np.float32)
    ballot = np.count_nonzero(s > 100)
    s = s + np.append(s[1:], s[-1])  # lane 31's partner is out of range: it gets its own value
    return np.concatenate([s + np.float32(ballot), v[32:]])


def _launch(m, name, n, *args):
    y = gpublas.zeros((n,), np.float32)
    m.get(name)(1, n, y, *args)
    return y


def test_divergent_barriers_fail_the_launch_when_fissioned():
    m = load_source(WARP_SRC, None, "fission_warps.cu")
    assert m.handle.fission["half_sync"] is None and m.handle.fission["half_warp_shuffle"] is None
    with pytest.raises(gpublas.LaunchError, match=r"half_sync.*diverge at __syncthreads\(\): 16 of 64 threads") as e:
        _launch(m, "half_sync", 64)
    assert type(e.value) is gpublas.LaunchError  # not a memory fault on the way out of the block
    with pytest.raises(gpublas.LaunchError, match=r"half_warp_shuffle.*warp 0 .* diverge at a warp-level") as e:
        _launch(m, "half_warp_shuffle", 32)
    assert type(e.value) is gpublas.LaunchError
    np.testing.assert_array_equal(_launch(m, "per_warp_loop", 64).get(), _per_warp_loop(64))  # the next one works


def test_a_refused_shape_keeps_fibers_and_says_why(both_ways, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUBLAS_SIM_FISSION_DUMP", str(tmp_path))
    m = load_source(WARP_SRC + "\n// dumped\n", None, "fission_dump.cu")
    assert "while" in m.handle.fission["while_barrier"]
    y = both_ways(lambda: _launch(m, "while_barrier", 64, 3))
    np.testing.assert_array_equal(y, np.full(64, 0 + 1 + 2, np.float32))
    assert "gpublas_block_per_warp_loop" in (tmp_path / "fission_dump.cu.fission.cu").read_text()
    assert "while_barrier: fibers: a barrier inside while" in (tmp_path / "fission_dump.cu.fission.txt").read_text()


def test_race_and_memcheck_kernels_are_the_fissioned_ones():
    """tests/test_runtime.py's race check and tests/test_sim.py's memcheck of a barrier kernel run
    the fissioned block functions: what they catch is caught there."""
    from tests.test_runtime import RACE_SRC
    from tests.test_sim import OOB_SRC
    assert load_source(RACE_SRC, None, "race_check.cu").handle.fission == {
        "reverse_ok": None, "reverse_racy": None, "warp_sum": None, "diverge": None, "dyn_smem_reverse": None}
    assert load_source(OOB_SRC, None, "oob.cu").handle.fission == {"oob_tiled": None}


REF_SRC = r"""
// at_block: a pointer moved to the block's rows through a reference (the kernel's parameter, or a local whose
// first value is the same in every thread), then read after a barrier: each thread moves its own copy.
__device__ __forceinline__ void at_block(const float*& p, int& i, int rows) { p += blockIdx.x * rows; i += threadIdx.x; }
__device__ __forceinline__ float first_of(const float& x) { return x; }  // a const reference: nothing written
extern "C" __global__ void ref_args(const float* x, float* y, float bias) {
    __shared__ float s[64];
    int i = 0;
    at_block(x, i, (int)blockDim.x);
    s[threadIdx.x] = x[threadIdx.x] + first_of(bias);
    __syncthreads();
    y[blockIdx.x * blockDim.x + i] = s[blockDim.x - 1 - threadIdx.x] + x[i];
}
"""


def test_arguments_passed_by_reference_are_per_thread(both_ways, sim_order):
    """A kernel parameter or uniform local that a (non-barrier) __device__ function changes through a non-const
    reference is each thread's own: it once stayed one copy for the block, moved by every thread in turn."""
    m = load_source(REF_SRC, None, "fission_refs.cu")
    assert m.handle.fission["ref_args"] is None
    x = gpublas.to_device(np.arange(3 * 64, dtype=np.float32))

    def run():
        y = gpublas.zeros((3 * 64,), np.float32)
        m.get("ref_args")(3, 64, x, y, np.float32(0.5))
        return y
    xs = x.get().reshape(3, 64)
    np.testing.assert_array_equal(both_ways(run), (xs[:, ::-1] + 0.5 + xs).ravel())


def test_barrier_analysis_reads_the_branches_of_the_build():
    """kernels_needing_fibers reads the #if branches g++ will take (a build switch such as layernorm.cu's
    LN_GPU_FORM puts a warp's shuffles in or out); a condition it cannot evaluate keeps every branch."""
    text = """#if defined(__CUDA_ARCH_SIM__) && !defined(GPU_FORM)
__device__ int part(int v) { return v; }
#elif defined(OTHER)
__device__ int part(int v) { return __ballot_sync(FULL_MASK, v); }
#else
__device__ int part(int v) { return __shfl_xor_sync(FULL_MASK, v, 1); }
#endif
#if SOME_VALUE > 2
__device__ int maybe(int v) { return __shfl_sync(FULL_MASK, v, 0); }
#endif
extern "C" __global__ void k(int* x) { x[0] = part(x[0]); }
extern "C" __global__ void m(int* x) { x[0] = maybe(x[0]); }
"""
    need = lambda defines: sim_analysis.kernels_needing_fibers(text, defines) & {"k", "m"}  # noqa: E731
    assert need(None) == {"m"} and need({"GPU_FORM"}) == {"k", "m"} and need({"GPU_FORM", "OTHER"}) == {"k", "m"}
