"""The 16-bit GEMMs: float16 and bfloat16 inputs, float accumulation, on the tensor cores (cuda_src/gemm_half.cu)
and on gemm.cu's barrier-free gemm_direct / gemm_naive (the simulator's automatic choice).

The first tests pin the hardware contract as the PTX ISA states it, written here independently of the
kernels: mma.m16n8k16's A/B/D fragment layouts, ldmatrix .trans, and wgmma m64n256k16's A registers with B
read K-major through a 64-byte-swizzle descriptor (on the simulator: gpublas/runtime/sim/mma_sync.h's emulation;
on a GPU the hardware). Then gemm / gemm_batched / matmul against float64 NumPy in every orientation, on
shapes 1, primes and non-tile multiples, K = 0, views with leading dimensions, batches, beta = 0 over NaN,
float32 or 16-bit C, under two simulator thread orders. Products of 16-bit values are exact in float, so
the references take the 16-bit inputs exactly; the tolerance is the bound of float additions in any order,
(K + 2) 2^-23 |alpha| |A| |B| (+ |beta C|), plus one rounding of C when it is 16-bit."""
import numpy as np
import pytest

import gpublas
from gpublas.blas import gemm_plan
from gpublas.runtime.launch import load_source
from test_gemm_wgmma import swizzle64

HALVES = [np.dtype(gpublas.float16), np.dtype(gpublas.bfloat16)]
IDS = ["float16", "bfloat16"]
TRANS = [(False, False), (False, True), (True, False), (True, True)]
UNIT = {np.dtype(gpublas.float16): 2.0 ** -11, np.dtype(gpublas.bfloat16): 2.0 ** -8}  # unit roundoff

SRC = r"""
#include "mma.cuh"
__device__ unsigned pair(unsigned short lo, unsigned short hi) { return unsigned(lo) | unsigned(hi) << 16; }

// One warp: D (16 x 8, float) += A (16 x 16) B (16 x 8), all row-major, through the PTX ISA's fragment layout.
template <bool BF16>
__device__ void mma16_one(const unsigned short* A, const unsigned short* B, float* D) {
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    const unsigned a[4] = {pair(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                           pair(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                           pair(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                           pair(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
    const unsigned b[2] = {pair(B[2 * t * 8 + g], B[(2 * t + 1) * 8 + g]),
                           pair(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
    float d[4] = {D[g * 8 + 2 * t], D[g * 8 + 2 * t + 1], D[(g + 8) * 8 + 2 * t], D[(g + 8) * 8 + 2 * t + 1]};
    mma_m16n8k16<BF16>(d, a, b);
    D[g * 8 + 2 * t] = d[0]; D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2]; D[(g + 8) * 8 + 2 * t + 1] = d[3];
}
extern "C" __global__ void mma16_bfloat16(const unsigned short* A, const unsigned short* B, float* D) { mma16_one<true>(A, B, D); }
extern "C" __global__ void mma16_float16(const unsigned short* A, const unsigned short* B, float* D) { mma16_one<false>(A, B, D); }

// One warp: S (32 rows of 8 16-bit values) into shared memory; lane l names row 5 l % 32; R[l][j] = what it got.
extern "C" __global__ void ldmatrix_trans_one(const unsigned short* S, unsigned* R) {
    __shared__ __align__(16) unsigned short s[32 * 8];
    for (int i = threadIdx.x; i < 32 * 8; i += 32) s[i] = S[i];
    __syncthreads();
    unsigned r[4];
    ldmatrix_x4_trans(r, s + 8 * (threadIdx.x * 5 % 32));
    for (int j = 0; j < 4; ++j) R[threadIdx.x * 4 + j] = r[j];
}

// One warpgroup: D (64 x 256) = A (64 x 32) B (32 x 256) as two k-steps of 16. A and D row-major in global
// memory, in and out of registers by the PTX ISA's layouts; Bsw: 16 KB of shared memory as the test placed
// B in it, copied as is to 1024-byte-aligned shared memory: K-major (MN false: B^T, 256 rows of 32 values,
// in the 64-byte-swizzled order) or MN-major (MN: 1024-byte atoms of 8 K rows x 64 N values in the
// 128-byte-swizzled order, atoms lbo bytes apart along N and sbo along K).
template <bool BF16, bool MN>
__device__ void wgmma16_one(const unsigned short* A, const unsigned short* Bsw, float* D, int lbo, int sbo) {
    extern __shared__ __align__(16) unsigned short raw16[];
    const unsigned window = shared_address(raw16);
    unsigned short* s = raw16 + (((window + 1023) & ~1023u) - window) / 2;
    for (int i = threadIdx.x; i < 256 * 32; i += 128) s[i] = Bsw[i];
    fence_proxy_async_shared();  // ordinary stores, read by wgmma through the async proxy
    __syncthreads();
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, r0 = 16 * w + g;
    float d[128];
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    wgmma_fence(d);
    for (int ks = 0; ks < 2; ++ks) {
        const int k = 16 * ks + 2 * t;
        const unsigned a[4] = {pair(A[r0 * 32 + k], A[r0 * 32 + k + 1]), pair(A[(r0 + 8) * 32 + k], A[(r0 + 8) * 32 + k + 1]),
                               pair(A[r0 * 32 + k + 8], A[r0 * 32 + k + 9]),
                               pair(A[(r0 + 8) * 32 + k + 8], A[(r0 + 8) * 32 + k + 9])};
        if (MN)  // k-step ks: K rows 16 ks .., two 8-row groups on
            wgmma_m64n256k16_rs<BF16, true>(d, a, wgmma_desc_sw128_mn(shared_address(s) + 2 * sbo * ks, lbo, sbo));
        else
            wgmma_m64n256k16_rs<BF16>(d, a, wgmma_desc_sw64(shared_address(s) + 32 * ks));
        wgmma_commit();
        wgmma_wait<0>(d);
    }
    for (int i = 0; i < 128; ++i) D[(r0 + 8 * ((i >> 1) & 1)) * 256 + 8 * (i >> 2) + 2 * t + (i & 1)] = d[i];
}
#define WGMMA16_PARAMS const unsigned short* A, const unsigned short* B, float* D, int lbo, int sbo
extern "C" __global__ void wgmma16_bfloat16(WGMMA16_PARAMS) { wgmma16_one<true, false>(A, B, D, lbo, sbo); }
extern "C" __global__ void wgmma16_float16(WGMMA16_PARAMS) { wgmma16_one<false, false>(A, B, D, lbo, sbo); }
extern "C" __global__ void wgmma16_mn_bfloat16(WGMMA16_PARAMS) { wgmma16_one<true, true>(A, B, D, lbo, sbo); }
extern "C" __global__ void wgmma16_mn_float16(WGMMA16_PARAMS) { wgmma16_one<false, true>(A, B, D, lbo, sbo); }
"""


def _module():
    return load_source(SRC, None, "mma16_check.cu")


def _bound(a, b, k, alpha=1.0, beta_c=0.0):
    """The error bound of float additions in any order over K products: (K + 2) 2^-23 (|alpha||A||B| + |beta C|)."""
    mag = abs(alpha) * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)) + np.abs(beta_c)
    return (k + 2) * 2.0 ** -23 * mag + np.finfo(np.float32).tiny


def _check(got, a, b, k, out, alpha=1.0, beta=0.0, c=None):
    """got (of dtype `out`) is alpha op(A) op(B) + beta C of the 16-bit a, b (op applied), float accumulation."""
    got = got.get() if hasattr(got, "get") else got
    assert got.dtype == out, (got.dtype, out)
    beta_c = beta * c.astype(np.float64) if c is not None else 0.0
    want = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta_c
    tol = _bound(a, b, k, alpha, beta_c)
    if out in UNIT:
        tol = tol + UNIT[out] * np.abs(want) + 2.0 ** -24  # one rounding into 16 bits (subnormals included)
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= tol), f"max error {err.max():.3g}, bound there {tol.flat[np.argmax(err - tol)]:.3g}"


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_mma_m16n8k16_fragment_layouts(rng, sim_order, dtype):
    a = rng.standard_normal((16, 16)).astype(dtype)
    b = rng.standard_normal((16, 8)).astype(dtype)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = gpublas.to_device(c)
    _module().get(f"mma16_{dtype.name}")(1, 32, gpublas.to_device(a), gpublas.to_device(b), d)
    _check(d.get(), a, b, 16, np.dtype(np.float32), beta=1.0, c=c)


def test_ldmatrix_trans_hands_each_lane_a_column_pair(rng, sim_order):
    s = rng.integers(0, 2 ** 16, 32 * 8, dtype=np.uint16)
    r = gpublas.zeros((32 * 4,), np.int32)
    _module().get("ldmatrix_trans_one")(1, 32, gpublas.to_device(s.view(gpublas.float16)), r)
    rows = s.reshape(32, 8).astype(np.uint32)
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    # PTX ISA: with .trans, lane 4g + t gets element g of rows 2t (low half) and 2t + 1 of each matrix j
    want = np.stack([rows[(8 * j + 2 * t) * 5 % 32, g] | rows[(8 * j + 2 * t + 1) * 5 % 32, g] << 16
                     for j in range(4)], axis=1)
    np.testing.assert_array_equal(r.get().view(np.uint32).reshape(32, 4), want)


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_wgmma_m64n256k16_layouts_descriptor_and_swizzle(rng, dtype):
    a = rng.standard_normal((64, 32)).astype(dtype)
    b = rng.standard_normal((32, 256)).astype(dtype)
    bt = np.ascontiguousarray(b.T)  # 256 rows of 32 values: 64 bytes, swizzled by 16-byte chunks as floats
    bsw = swizzle64(bt.view(np.float32)).view(dtype)
    d = gpublas.zeros((64, 256), np.float32)
    _module().get(f"wgmma16_{dtype.name}")(1, 128, gpublas.to_device(a), gpublas.to_device(bsw), d, np.int32(0),
                                           np.int32(0), shared=256 * 32 * 2 + 1024)
    _check(d.get(), a, b, 32, np.dtype(np.float32))


def mn_major_sw128(b, lbo, sbo):
    """The 16-bit b (K x N, N contiguous) as wgmma reads it MN-major with the 128-byte swizzle (PTX ISA,
    canonical layout ((8, 8, m), (8, k)) : ((1, 8, LBO), (64, SBO)) in values, then Swizzle<3, 4, 3> on byte
    addresses): B[k, n] at byte lbo (n // 64) + sbo (k // 8) + 128 (k % 8) + 2 (n % 64), whose 16-byte chunk
    (bits 4-6) is XORed with bits 7-9. Returns the shared-memory image as 16-bit values."""
    kk, nn = np.meshgrid(np.arange(b.shape[0]), np.arange(b.shape[1]), indexing="ij")
    byte = lbo * (nn // 64) + sbo * (kk // 8) + 128 * (kk % 8) + 2 * (nn % 64)
    byte ^= ((byte >> 7) & 7) << 4
    out = np.zeros(byte.max() // 2 + 1, b.dtype)
    out[byte // 2] = b
    return out


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
@pytest.mark.parametrize("lbo,sbo", [(4096, 1024), (1024, 4096)])  # N atoms apart by 4 KB, K groups by 1 KB; and back
def test_wgmma_m64n256k16_reads_b_mn_major_through_the_128_byte_swizzle(rng, dtype, lbo, sbo):
    a = rng.standard_normal((64, 32)).astype(dtype)
    b = rng.standard_normal((32, 256)).astype(dtype)
    image = mn_major_sw128(b, lbo, sbo)
    assert image.size == 256 * 32  # 16 KB, every byte one of B's
    d = gpublas.zeros((64, 256), np.float32)
    _module().get(f"wgmma16_mn_{dtype.name}")(1, 128, gpublas.to_device(a), gpublas.to_device(image), d,
                                              np.int32(lbo), np.int32(sbo), shared=256 * 32 * 2 + 1024)
    _check(d.get(), a, b, 32, np.dtype(np.float32))


def _operand(x, offset):
    """x on the device, `offset` elements into its allocation (offset 1: no 16-byte alignment)."""
    flat = gpublas.to_device(np.concatenate([np.zeros(offset, x.dtype), x.ravel()]))
    return flat[offset:].reshape(x.shape)


KERNELS = ["mma", "direct", "wgmma"]  # every orientation on each (wgmma's tn reads B MN-major)


# a whole 128 x 256 block (pair stores), edges in M, N and K, odd shapes (one-element copies), unaligned views
@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
@pytest.mark.parametrize("m,n,k,offset", [(128, 256, 64, 0), (136, 264, 40, 0), (37, 70, 33, 0), (1, 1, 1, 0),
                                          (130, 300, 19, 1)])
def test_gemm_matches_numpy(rng, sim_order, dtype, trans_a, trans_b, m, n, k, offset):
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    oa, ob = (a.T if trans_a else a), (b.T if trans_b else b)
    for kernel in KERNELS:
        for out in (np.dtype(np.float32), dtype):
            c = rng.standard_normal((m, n)).astype(out)
            got = gpublas.gemm(_operand(a, offset), _operand(b, offset), _operand(c, offset), alpha=0.5, beta=2.0,
                               trans_a=trans_a, trans_b=trans_b, kernel=kernel)
            _check(got, oa, ob, k, out, 0.5, 2.0, c)
        got = gpublas.gemm(_operand(a, offset), _operand(b, offset), trans_a=trans_a, trans_b=trans_b, kernel=kernel)
        _check(got, oa, ob, k, dtype)  # the default output: the inputs' dtype


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_nan_and_inf_inputs_reach_c(rng, dtype, trans_a, trans_b):
    # the simulator converts 16-bit runs of A and B with vector instructions (gemm.cu's direct staging): a NaN
    # or an infinity in A must reach its row of C as NaN / inf, whatever the orientation and kernel; K = 70
    # spans three of direct's 32-deep staging chunks, the specials sit in the second and third
    m, n, k = 9, 20, 70
    a = rng.uniform(0.5, 1.0, (m, k)).astype(dtype)
    b = rng.uniform(0.5, 1.0, (k, n)).astype(dtype)
    a[2, 40], a[5, 69], a[7, 33] = np.nan, np.inf, -np.inf
    b[50, 3] = np.nan
    want = a.astype(np.float64) @ b.astype(np.float64)
    da = gpublas.to_device(np.ascontiguousarray(a.T) if trans_a else a)
    db = gpublas.to_device(np.ascontiguousarray(b.T) if trans_b else b)
    for kernel in ("direct", "naive", "mma", "wgmma"):
        got = gpublas.gemm(da, db, out_dtype=np.float32, trans_a=trans_a, trans_b=trans_b, kernel=kernel).get()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
        np.testing.assert_array_equal(np.isinf(got) & (got < 0), np.isinf(want) & (want < 0))
        ok = np.isfinite(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5)


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_fp32_accumulation_counts_past_16_bits(dtype):
    # ones 16 x 4096 @ 4096 x 8: 4096 exactly (a 16-bit accumulator would stop at 256 for bfloat16, 2048 for
    # float16), with a float32 C and with a 16-bit one (4096 is a 16-bit value)
    a = gpublas.to_device(np.ones((16, 4096), dtype))
    b = gpublas.to_device(np.ones((4096, 8), dtype))
    for kernel in ("mma", "wgmma", "direct", "naive"):
        got = gpublas.gemm(a, b, out_dtype=np.float32, kernel=kernel).get()
        assert got.dtype == np.float32 and np.all(got == 4096.0), np.unique(got)
        assert np.all(gpublas.gemm(a, b, kernel=kernel).get().astype(np.float32) == 4096.0)


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_beta_zero_never_reads_c_and_k_zero_scales_c(rng, dtype):
    a = rng.standard_normal((3, 128, 24)).astype(dtype)
    b = rng.standard_normal((3, 24, 256)).astype(dtype)
    for kernel in ("mma", "wgmma", "direct", "naive"):
        for cols in (256, 255):  # interior blocks (pair stores) and edge ones
            bb = np.ascontiguousarray(b[:, :, :cols])
            for out in (np.float32, dtype):
                c = gpublas.to_device(np.full((3, 128, cols), np.nan, out))
                got = gpublas.gemm_batched(gpublas.to_device(a), gpublas.to_device(bb), c, beta=0.0, kernel=kernel)
                for i in range(3):
                    _check(got.get()[i], a[i], bb[i], 24, np.dtype(out))
    for mm, nn, kk, alpha in ((0, 5, 7, 1.0), (5, 0, 7, 1.0), (5, 7, 0, 1.0), (5, 7, 3, 0.0)):
        x = gpublas.to_device(np.full((mm, kk), np.nan, dtype))  # alpha = 0 or K = 0 reads neither a nor b
        y = gpublas.to_device(np.full((kk, nn), np.nan, dtype))
        for out in (np.float32, dtype):
            for kernel in ("mma", "wgmma", "direct", "naive"):
                z = gpublas.to_device(np.full((mm, nn), 3.0, out))
                got = gpublas.gemm(x, y, z, alpha=alpha, beta=0.5, kernel=kernel).get()
                np.testing.assert_array_equal(got.astype(np.float32), np.full((mm, nn), 1.5, np.float32))


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_views_with_leading_dimensions_and_batches(rng, dtype, trans_a, trans_b):
    # lda, ldb, ldc not multiples of 8 (one-element copies) and a batched stack of views, c a column slice
    B, m, n, k = 2, 67, 131, 29
    ha = rng.standard_normal((B, k, m + 1) if trans_a else (B, m, k + 1)).astype(dtype)
    hb = rng.standard_normal((B, n, k + 3) if trans_b else (B, k, n + 3)).astype(dtype)
    a = gpublas.to_device(ha)[:, :, :m] if trans_a else gpublas.to_device(ha)[:, :, :k]
    b = gpublas.to_device(hb)[:, :, :k] if trans_b else gpublas.to_device(hb)[:, :, :n]
    for kernel in KERNELS:
        c = gpublas.to_device(np.full((B, m, n + 5), np.nan, np.float32))[:, :, 1:1 + n]
        gpublas.gemm_batched(a, b, c, trans_a=trans_a, trans_b=trans_b, kernel=kernel)
        for i in range(B):
            oa = a.get()[i].T if trans_a else a.get()[i]
            ob = b.get()[i].T if trans_b else b.get()[i]
            _check(c.get()[i], oa, ob, k, np.dtype(np.float32))


@pytest.mark.parametrize("dtype,kernel", [(HALVES[1], "mma"), (HALVES[0], "wgmma")], ids=["bfloat16-mma", "float16-wgmma"])
def test_split_k_sums_the_slices_of_a_long_k(rng, dtype, kernel, monkeypatch):
    """A long K over too few tiles to fill the device (128x128x65536 is one tile) runs as K slices
    (gemm_plan.half_splits; the simulator plans as for 8 SMs): the slices' float partial products, summed in
    slice order by gemm_half_splitk_reduce, are the product in every orientation, C float32 or 16-bit, with alpha
    and beta (beta = 0 over NaN: C never read); alpha = 0 with a split plan only scales C. The thresholds are
    lowered here (K >= 256, slices of >= 32) so that the emulated tensor cores run a short K."""
    assert gemm_plan.half_splits(128, 128, 65536, 1, (128, 256), 132) == 64      # the shape split-K is for
    assert gemm_plan.half_splits(4096, 4096, 4096, 1, (128, 256), 132) == 1      # enough tiles: none
    monkeypatch.setattr(gemm_plan, "HALF_SPLITK_MIN_STEPS", 8)
    monkeypatch.setattr(gemm_plan, "HALF_SLICE_STEPS", 1)
    gemm_plan._PLANS.clear()  # no plan made under the usual thresholds, and none left after (finally)
    gpublas.blas.blas3._RECIPES.clear()
    try:
        _split_k_cases(rng, dtype, kernel)
    finally:
        gemm_plan._PLANS.clear()
        gpublas.blas.blas3._RECIPES.clear()


def _split_k_cases(rng, dtype, kernel):
    m, n, k = 40, 72, 300  # 4 slices of 64 and a cut last one of 44
    p = gemm_plan.Problem(m, n, k, 1, False, False, (k, n, n), (0, 0, 0), np.dtype(dtype), True, np.dtype(np.float32))
    plan = gemm_plan.plan(kernel, p)
    assert (plan.splits, plan.kslice) == (5, 64)
    for (ta, tb), out, beta in zip(TRANS, [np.float32, dtype, np.float32, dtype], [0.0, 2.0, 2.0, 0.0]):
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        c = rng.standard_normal((m, n)).astype(out)
        dc = gpublas.to_device(c if beta else np.full((m, n), np.nan, out))
        gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), dc, alpha=0.5, beta=beta, trans_a=ta, trans_b=tb,
                     kernel=kernel)
        _check(dc, a.T if ta else a, b.T if tb else b, k, np.dtype(out), 0.5, beta, c if beta else None)
    dc = gpublas.to_device(c)
    gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), dc, alpha=0.0, beta=2.0, trans_a=ta, trans_b=tb,
                 kernel=kernel)
    np.testing.assert_array_equal(dc.get(), (2.0 * c.astype(np.float32)).astype(out))


@pytest.mark.parametrize("dtype", HALVES, ids=IDS)
def test_matmul_and_auto_take_direct_on_sim_and_tensor_cores_on_a_gpu(rng, dtype):
    a = rng.standard_normal((4, 33, 20)).astype(dtype)
    b = rng.standard_normal((20, 9)).astype(dtype)
    v = rng.standard_normal(20).astype(dtype)
    da, db, dv = gpublas.to_device(a), gpublas.to_device(b), gpublas.to_device(v)
    got = (da @ db).get()
    assert got.shape == (4, 33, 9)
    for i in range(4):
        _check(got[i], a[i], b, 20, dtype)
    _check(gpublas.matmul(da[0], dv).get()[:, None], a[0], v[:, None], 20, dtype)  # a vector: one column
    p = gemm_plan.Problem(64, 64, 64, 1, False, False, (64, 64, 64), (0, 0, 0), dtype, True, dtype)
    where = gemm_plan.target()[0]
    assert gemm_plan.plan(None, p).name == ("direct" if where == "sim" else "wgmma" if where == "sm_90a" else "mma")
    assert gemm_plan.choose_kernel(64, 64, 64, sim=False, sms=132, dtype=dtype) == "mma"
    assert gemm_plan.choose_kernel(64, 64, 64, sim=False, sms=132, dtype=dtype, hopper=True) == "wgmma"
    assert gemm_plan.choose_kernel(64, 64, 64, sim=True, dtype=dtype) == "direct"  # barrier-free on sim
    assert gemm_plan.choose_kernel(1, 1, 4096, sim=True, dtype=dtype) == "naive"  # one output: naive's
    f32 = p._replace(out_dtype=np.dtype(np.float32))
    assert gemm_plan.plan("direct", f32).defines == (("out_real", "float"),) and not gemm_plan.plan("direct", p).defines


def test_dtype_rules_and_refusals():
    h = gpublas.to_device(np.ones((8, 8), gpublas.bfloat16))
    f = gpublas.to_device(np.ones((8, 8), np.float32))
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.gemm(h, f)
    with pytest.raises(ValueError, match="bfloat16 or float32 result, not float16"):
        gpublas.gemm(h, h, out_dtype=gpublas.float16)
    with pytest.raises(ValueError, match="float32 result, not float64"):
        gpublas.gemm(f, f, out_dtype=np.float64)
    with pytest.raises(ValueError, match="'tf32' computes in TF32"):
        gpublas.gemm(h, h, kernel="tf32")
    for kernel in ("v2_large", "regblock", "tiled"):
        with pytest.raises(ValueError, match=f"'{kernel}' takes float32 or float64; bfloat16.*'direct' or 'naive'"):
            gpublas.gemm(h, h, kernel=kernel)
    with pytest.raises(ValueError, match="'mma' multiplies float16 or bfloat16"):
        gpublas.gemm(f, f, kernel="mma")
    with pytest.raises(ValueError, match="K contiguous for float32.*use 'tf32'"):
        gpublas.gemm(f, f, trans_a=True, kernel="wgmma")  # 16-bit tn runs: test_gemm_matches_numpy


@pytest.mark.parametrize("where", [("sm_90", 90), ("compute_90", 90), ("sm_80", 80)])
def test_16_bit_wgmma_is_refused_where_the_build_lacks_sm_90a(monkeypatch, where):
    monkeypatch.setattr(gemm_plan, "target", lambda: where)
    x = gpublas.to_device(np.ones((8, 8), gpublas.float16))
    with pytest.raises(ValueError, match=f"sm_90a.*{where[0]}.*use 'mma'"):
        gpublas.gemm(x, x, kernel="wgmma")
    monkeypatch.setattr(gemm_plan, "target", lambda: ("sm_75", 75))
    with pytest.raises(ValueError, match="'mma' needs 16-bit tensor cores"):
        gpublas.gemm(x, x, kernel="mma")
