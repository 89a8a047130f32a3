"""cuda_src/common.cuh's helpers on the device: FastDivmod (host-computed multiplier, __umulhi and a shift on
the device) and div_mod's 32- and 64-bit paths agree with integer division; load_run_as converts 16-bit runs
as load_as converts each element; load_runs_transposed reads 8 or 16 runs as the rows of their transpose;
block_reduce (the simulator's form) gives the bits of the GPU's shuffle tree."""
import os

import numpy as np
import pytest

import gpublas
from gpublas.runtime.launch import fast_divisor, load_source

SRC = """#include "common.cuh"
extern "C" __global__ void divmod_check(const long long* n, long long* q, long long* r, int count,
                                        unsigned long long d_packed) {
    const FastDivmod d(d_packed);
    GRID_STRIDE_LOOP(long long, i, count) {
        if (small_index(n[i])) {
            unsigned rem;
            q[i] = div_mod((unsigned)n[i], d, rem);
            r[i] = rem;
        } else {
            long long rem;
            q[i] = div_mod(n[i], d, rem);
            r[i] = rem;
        }
    }
}
"""
DIVISORS = [1, 2, 3, 7, 10, 32, 641, 65537, 3 * 2**20 + 1, 2**30, 2**31 - 1]


@pytest.mark.parametrize("d", DIVISORS)
def test_fast_divmod_matches_integer_division(d, rng):
    n = np.concatenate([np.arange(0, 300), [d - 1, d, d + 1, 2 * d - 1, 2**31 - 2, 2**31 - 1, 2**31, 2**40 + 5],
                        rng.integers(0, 2**31, 2000)]).astype(np.int64)
    n = n[n >= 0]
    k = load_source(SRC, None, "divmod_check.cu").get("divmod_check")
    dn, q, r = gpublas.to_device(n), gpublas.empty(n.shape, np.int64), gpublas.empty(n.shape, np.int64)
    k(8, 256, dn, q, r, n.size, fast_divisor(d))
    np.testing.assert_array_equal(q.get(), n // d)
    np.testing.assert_array_equal(r.get(), n % d)


LOG2_SRC = """#include "common.cuh"
extern "C" __global__ void ceil_log2_check(const unsigned* d, int* out, int n) {
    GRID_STRIDE_LOOP(int, i, n) out[i] = ceil_log2(d[i]);
}
"""


@pytest.mark.parametrize("form", ["own", "gpu"])
def test_ceil_log2(form):
    # 'gpu' (the simulator only): built with CEIL_LOG2_CLZ, the device's __clz instead of the host's __builtin_clz
    if form == "gpu" and gpublas.backend() != "sim":
        pytest.skip("the GPU's form is what the cuda backend runs anyway")
    d = np.unique(np.concatenate([np.arange(1, 70), [2**k + e for k in range(2, 31) for e in (-1, 0, 1)],
                                  [2**31 - 1]])).astype(np.uint32)
    defines = {"CEIL_LOG2_CLZ": 1} if form == "gpu" else None
    k = load_source(LOG2_SRC, defines, "ceil_log2_check.cu").get("ceil_log2_check")
    out = gpublas.empty(d.shape, np.int32)
    k(2, 128, gpublas.to_device(d), out, d.size)
    np.testing.assert_array_equal(out.get(), [(int(v) - 1).bit_length() for v in d])


def test_fast_divisor_packs_and_checks_range():
    assert fast_divisor(0) == 0 and fast_divisor(1) == 1
    assert fast_divisor(7) & 0xFFFFFFFF == 7 and fast_divisor(2**31 - 1) < 2**64
    with pytest.raises(ValueError, match="outside"):
        fast_divisor(2**31)


def test_constants_come_from_the_sources():
    from gpublas.core import reduction
    from gpublas.runtime import source
    from nn import kernels
    assert kernels.ACT == {"identity": 0, "relu": 1, "tanh": 2, "sigmoid": 3, "gelu": 4, "gelu_tanh": 5, None: 0}
    assert (reduction.SUM, reduction.MAX, reduction.MIN) == (0, 1, 2)
    with pytest.raises(LookupError, match="NO_SUCH_"):
        source.int_defines("common.cuh", "NO_SUCH_")


def test_grid_1d():
    from gpublas.runtime import launch
    per_block = launch.BLOCK * (launch.SIM_ELEMENTS_PER_THREAD if launch.simulated() else 1)
    assert launch.grid_1d(0) == 0 and launch.grid_1d(1) == 1
    assert launch.grid_1d(per_block) == 1 and launch.grid_1d(per_block + 1) == 2
    assert launch.grid_1d(10**12) == launch.GRID_STRIDE_BLOCKS and launch.grid_1d(10**6, cap=7) == 7


RUN_SRC = """#include "common.cuh"
// Thread t converts elements [t * 13, t * 13 + 13) of x (the last thread fewer) with load_run_as, as runs of 8
// (the compile-time form) and the rest (the runtime form), and each element alone with load_as.
extern "C" __global__ void runs_check(const real* x, float* run, float* one, int n) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x, lo = t * 13;
    if (lo >= n) return;
    const int len = n - lo < 13 ? n - lo : 13;
    if (len >= 8) {
        float v[8];
        load_run_as(x + lo, v);
        for (int j = 0; j < 8; ++j) run[lo + j] = v[j];
        load_run_as(x + lo + 8, run + lo + 8, len - 8);
    } else {
        load_run_as(x + lo, run + lo, len);
    }
    for (int j = 0; j < len; ++j) one[lo + j] = load_as(x[lo + j]);
}
"""


@pytest.mark.parametrize("dtype", [np.dtype(gpublas.float16), np.dtype(gpublas.bfloat16)], ids=str)
def test_load_run_as_converts_16_bit_runs_as_load_as_does(dtype):
    # every one of the 65,536 bit patterns (NaNs, infinities, subnormals), at unaligned offsets: the simulator's
    # vector conversions (F16C, AVX2) give the bits of its element-by-element ones, NaNs included (float16's
    # canonical 0x7fffffff, bfloat16's payload kept), and both the value NumPy gives
    x = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    c_type = "__half" if dtype == np.float16 else "__nv_bfloat16"
    k = load_source(RUN_SRC, {"real": c_type}, "runs_check.cu").get("runs_check")
    for offset in (0, 3):  # 16-byte aligned runs, and runs 6 bytes off
        dx = gpublas.to_device(np.concatenate([np.zeros(offset, dtype), x]))[offset:]
        run, one = gpublas.empty(x.shape, np.float32), gpublas.empty(x.shape, np.float32)
        k(gpublas.runtime.launch.ceil_div(x.size, 13 * 128), 128, dx, run, one, np.int32(x.size))
        got, alone = run.get().view(np.uint32), one.get().view(np.uint32)
        np.testing.assert_array_equal(got, alone)
        want = x.astype(np.float32)
        nan = np.isnan(want)
        np.testing.assert_array_equal(got[~nan], want.view(np.uint32)[~nan])
        assert np.all(np.isnan(run.get()[nan])) and nan.sum() == (2046 if dtype == np.float16 else 254)


TRANSPOSED_SRC = """#include "common.cuh"
// out (n x RUNS) = the RUNS runs x + at[r] of n elements each as the rows of their transpose.
extern "C" __global__ void transposed_check(const real* x, const long long* at_in, int n, compute_t<real>* out) {
    long long at[RUNS];
    for (int r = 0; r < RUNS; ++r) at[r] = at_in[r];
    load_runs_transposed(x, at, n, reinterpret_cast<compute_t<real> (*)[RUNS]>(out));
}
"""


@pytest.mark.parametrize("runs", [8, 16])
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64), np.dtype(gpublas.float16),
                                   np.dtype(gpublas.bfloat16)], ids=str)
def test_load_runs_transposed_reads_each_run_as_a_column(rng, dtype, runs):
    # the simulator's vector shuffles (8 values of 8 runs at a time, float's 16 runs at once with AVX-512, the rest
    # one by one; 16-bit runs converted 32 at a time first): n below, at and across those steps; runs at odd
    # offsets, some of them the same run and some overlapping. float and double keep every bit (random patterns,
    # NaN payloads included)
    c_type = {np.float32: "float", np.float64: "double", np.float16: "__half"}.get(dtype.type, "__nv_bfloat16")
    k = load_source(TRANSPOSED_SRC, {"real": c_type, "RUNS": runs}, "transposed_check.cu").get("transposed_check")
    at = np.array([0, 71, 3, 3, 150, 151, 233, 5, 9, 240, 150, 64, 1, 2, 100, 17][:runs], np.int64)
    if dtype.itemsize == 2:
        x = rng.standard_normal(320).astype(np.float32)
        dx = gpublas.to_device(x).astype(dtype)
        x = dx.get().astype(np.float32)
    else:
        x = rng.integers(0, 2 ** 63, 320, dtype=np.uint64).astype(f"u{dtype.itemsize}").view(dtype)
        dx = gpublas.to_device(x)
    out_type = np.float32 if dtype.itemsize == 2 else dtype
    for n in (1, 7, 8, 9, 31, 32, 33, 70):
        out = gpublas.empty((n, runs), out_type)
        k(1, 1, dx, gpublas.to_device(at), np.int32(n), out)
        want = x[at[None, :] + np.arange(n)[:, None]]
        np.testing.assert_array_equal(out.get().view(f"u{want.itemsize}"), want.view(f"u{want.itemsize}"),
                                      err_msg=f"n = {n}")


REDUCE_SRC = """#include "common.cuh"
// Block b reduces its threads' values x[b * n + t] (n threads, 1-, 2- or 3-D) with block_reduce into out[2b],
// and with the GPU's tree written out (warp shuffles, warp results through shared memory) into out[2b + 1].
template <class Op>
__device__ void both_ways(const real* x, real* out, Op op, real identity) {
    __shared__ real warp_part[32];
    const int tid = block_thread_id(), lane = tid & 31, warp = tid >> 5;
    const real v = x[blockIdx.x * (blockDim.x * blockDim.y * blockDim.z) + tid];
    const real r = block_reduce(v, op, identity);
    if (tid == 0) out[2 * blockIdx.x] = r;
    real w = warp_reduce(v, op, warp_lanes());
    if (lane == 0) warp_part[warp] = w;
    __syncthreads();
    w = lane < block_warps() ? warp_part[lane] : identity;
    if (warp == 0) w = warp_reduce(w, op, warp_lanes());
    if (tid == 0) out[2 * blockIdx.x + 1] = w;
}
extern "C" __global__ void block_reduce_check(const real* x, real* out, int op) {
    if (op == 0) both_ways(x, out, SumOp<real>(), (real)0);
    else both_ways(x, out, MaxOp<real>(), -(real)INFINITY);
}
"""


@pytest.mark.parametrize("form", ["own", "gpu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_block_reduce_gives_the_bits_of_the_shuffle_tree(dtype, rng, sim_order, form):
    # the simulator's block_reduce (thread 0 walks the tree) against the GPU's code run on it: sums of values
    # spread over 20 orders of magnitude (any other pairing shows), max with NaNs and signed zeros; blocks with a
    # partial last warp, 2-D and 3-D blocks; with loop fission and on fibers. form 'gpu' (the simulator only):
    # block_reduce itself built in the GPU's form (BLOCK_REDUCE_SERIAL=0: shuffles, a warp's part in shared memory)
    if form == "gpu" and gpublas.backend() != "sim":
        pytest.skip("the GPU's form is what the cuda backend runs anyway")
    defines = {"real": "float" if dtype == np.float32 else "double"}
    if form == "gpu":
        defines["BLOCK_REDUCE_SERIAL"] = 0
    k = load_source(REDUCE_SRC, defines, "block_reduce_check.cu")
    k = k.get("block_reduce_check")
    backend, sim = gpublas.runtime.backends.current(), gpublas.backend() == "sim"
    for block in [1, 32, 40, 256, 1000, (16, 8), (8, 5, 3)]:
        n, blocks = int(np.prod(block)), 3
        x = (rng.standard_normal(n * blocks) * 10.0 ** rng.integers(-10, 10, n * blocks)).astype(dtype)
        m = np.where(rng.random(n * blocks) < 0.5, -0.0, 0.0).astype(dtype)
        m[n + n // 2] = np.nan  # block 1 has a NaN
        for op, data in ((0, x), (1, m), (1, x), (1, -np.abs(x))):
            for fission in ((False, True) if sim else (None,)):
                out = gpublas.empty((2 * blocks,), dtype)
                try:
                    if sim:
                        backend.fission = fission
                    k(blocks, block, gpublas.to_device(data), out, np.int32(op))
                finally:
                    if sim:
                        backend.fission = os.environ.get("GPUBLAS_SIM_FISSION", "1") not in ("", "0")
                got = out.get().view(np.uint32 if dtype == np.float32 else np.uint64)
                np.testing.assert_array_equal(got[0::2], got[1::2], err_msg=f"block {block}, op {op}")
                rows = data.reshape(blocks, n)
                if op == 0:  # each thread's value counted once: a partial warp's missing lanes add nothing
                    err = np.abs(out.get()[0::2] - rows.astype(np.float64).sum(axis=1))
                    bound = n * np.finfo(dtype).eps * np.abs(rows).astype(np.float64).sum(axis=1)
                    assert np.all(err <= bound), (block, err, bound)
                else:  # a max of negative values shows a GPU's garbage from missing lanes; NaN wins
                    np.testing.assert_array_equal(out.get()[0::2], rows.max(axis=1), err_msg=f"block {block}")
