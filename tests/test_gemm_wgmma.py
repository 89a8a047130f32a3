"""Hopper's warpgroup MMA (wgmma, cuda_src/mma.cuh) and gemm_tf32_wgmma (gemm_tf32.cu) against NumPy.

The first test pins the hardware contract as the PTX ISA states it, written here independently of the
kernels: A's register layout (mma.m16n8k8's, per warp), B's "K-major, 64-byte swizzle" shared-memory
layout (address bits 4-5 XOR bits 7-8, 8-row groups 512 bytes apart) reached through a matrix descriptor,
and D's register layout. On the simulator it checks gpublas/runtime/sim/mma_sync.h's emulation; on an H100 the
hardware itself, so a GPU run tells which side is wrong if a GEMM below fails there."""
import shutil

import numpy as np
import pytest

import gpublas
from gpublas.blas import gemm_plan
from gpublas.runtime import backends
from gpublas.runtime.backends.cuda import nvcc_arch_flags
from gpublas.runtime.launch import load_source
from test_gemm_tf32 import _check_tf32, _operand

pytestmark = pytest.mark.skipif(gpublas.backend() == "cuda" and backends.current().cc != 90,
                                reason="wgmma needs compute capability 9.0 (sm_90a)")

WGMMA_SRC = r"""
#include "mma.cuh"
// One warpgroup: D (64 x 256) = A (64 x 16) B (16 x 256) as two k-steps of 8. A and D row-major in global
// memory, in and out of registers by the PTX ISA's layouts; Bsw: B^T (256 rows of 16 floats) already
// placed in its 64-byte-swizzled order by the test, copied as is to 1024-byte-aligned shared memory.
extern "C" __global__ void wgmma_one(const float* A, const float* Bsw, float* D) {
    extern __shared__ __align__(16) float raw[];
    const unsigned window = shared_address(raw);
    float* s = raw + (((window + 1023) & ~1023u) - window) / 4;
    for (int i = threadIdx.x; i < 256 * 16; i += 128) s[i] = Bsw[i];
    fence_proxy_async_shared();  // ordinary stores, read by wgmma through the async proxy
    __syncthreads();
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, r0 = 16 * w + g;
    float d[128];
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    wgmma_fence(d);
    for (int ks = 0; ks < 2; ++ks) {
        const int k = 8 * ks + t;
        const unsigned a[4] = {__float_as_uint(A[r0 * 16 + k]), __float_as_uint(A[(r0 + 8) * 16 + k]),
                               __float_as_uint(A[r0 * 16 + k + 4]), __float_as_uint(A[(r0 + 8) * 16 + k + 4])};
        wgmma_m64n256k8_tf32_rs(d, a, wgmma_desc_sw64(shared_address(s) + 32 * ks));
        wgmma_commit();
        wgmma_wait<0>(d);
    }
    for (int i = 0; i < 128; ++i) D[(r0 + 8 * ((i >> 1) & 1)) * 256 + 8 * (i >> 2) + 2 * t + (i & 1)] = d[i];
}
"""


def swizzle64(bt):
    """bt (rows x 16 floats, K contiguous) in the order the 64-byte swizzle reads it: the 16-byte chunk c
    of row r (byte address 64 r + 16 c from a 512-byte-aligned start) sits at chunk c ^ ((r // 2) % 4)."""
    rows = bt.shape[0]
    out = np.empty_like(bt)
    for r in range(rows):
        for c in range(4):
            p = c ^ (r // 2 % 4)
            out[r, 4 * p:4 * p + 4] = bt[r, 4 * c:4 * c + 4]
    return out


def test_wgmma_layouts_descriptor_and_swizzle(rng):
    a = rng.standard_normal((64, 16)).astype(np.float32)
    b = rng.standard_normal((16, 256)).astype(np.float32)
    d = gpublas.zeros((64, 256), np.float32)
    k = load_source(WGMMA_SRC, None, "wgmma_check.cu").get("wgmma_one")
    k(1, 128, gpublas.to_device(a), gpublas.to_device(swizzle64(np.ascontiguousarray(b.T))), d,
      shared=256 * 16 * 4 + 1024)
    _check_tf32(d.get(), a, b, np.zeros((64, 256)), 16)


WGMMA_TRANS = [(False, False), (False, True), (True, True)]  # tn: no K-contiguous operand


@pytest.mark.parametrize("trans_a,trans_b", WGMMA_TRANS)
@pytest.mark.parametrize("m,n,k,offset", [(128, 256, 40, 0), (256, 128, 32, 0), (130, 300, 19, 0),
                                          (37, 70, 33, 1), (1, 1, 1, 0), (257, 5, 17, 0)])
def test_wgmma_gemm_matches_numpy(rng, sim_order, trans_a, trans_b, m, n, k, offset):
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    oa, ob = (a.T if trans_a else a), (b.T if trans_b else b)
    got = gpublas.gemm(_operand(a, offset), _operand(b, offset), _operand(c, offset), alpha=0.5, beta=2.0,
                       trans_a=trans_a, trans_b=trans_b, kernel="wgmma").get()
    _check_tf32(got, oa, ob, c, k, alpha=0.5, beta=2.0, distinct=k >= 8)


@pytest.mark.parametrize("trans_a,trans_b", WGMMA_TRANS)
def test_wgmma_on_views_with_odd_leading_dimensions_and_empty_shapes(rng, trans_a, trans_b):
    # lda, ldb, ldc = K + 1 etc. (not multiples of 4: the one-element copies), and M, N or K of 0
    m, n, k = 67, 131, 29
    ha = rng.standard_normal((k, m + 1) if trans_a else (m, k + 1)).astype(np.float32)
    hb = rng.standard_normal((n, k + 3) if trans_b else (k, n + 3)).astype(np.float32)
    a = gpublas.to_device(ha)[:, :m] if trans_a else gpublas.to_device(ha)[:, :k]
    b = gpublas.to_device(hb)[:, :k] if trans_b else gpublas.to_device(hb)[:, :n]
    c = gpublas.to_device(np.zeros((m, n + 5), np.float32))[:, 1:1 + n]
    gpublas.gemm(a, b, c, trans_a=trans_a, trans_b=trans_b, kernel="wgmma")
    oa = a.get().T if trans_a else a.get()
    ob = b.get().T if trans_b else b.get()
    _check_tf32(c.get(), oa, ob, 0.0, k)
    for mm, nn, kk in ((0, 5, 7), (5, 0, 7), (5, 7, 0)):
        x = gpublas.to_device(np.ones((kk, mm) if trans_a else (mm, kk), np.float32))
        y = gpublas.to_device(np.ones((nn, kk) if trans_b else (kk, nn), np.float32))
        z = gpublas.to_device(np.full((mm, nn), 3.0, np.float32))
        got = gpublas.gemm(x, y, z, beta=0.5, trans_a=trans_a, trans_b=trans_b, kernel="wgmma").get()
        np.testing.assert_array_equal(got, np.full((mm, nn), 1.5, np.float32))  # K = 0: C = beta C


def test_wgmma_batched_and_beta_zero_never_reads_c(rng):
    a = rng.standard_normal((3, 256, 24)).astype(np.float32)
    b = rng.standard_normal((3, 24, 128)).astype(np.float32)
    for cols in (128, 127):  # interior blocks (vector stores) and edge ones
        c = gpublas.to_device(np.full((3, 256, cols), np.nan, np.float32))
        bb = np.ascontiguousarray(b[:, :, :cols])
        got = gpublas.gemm_batched(gpublas.to_device(a), gpublas.to_device(bb), c, beta=0.0, kernel="wgmma").get()
        for i in range(3):
            _check_tf32(got[i], a[i], bb[i], 0.0, 24)


def test_wgmma_refuses_what_it_cannot_take():
    x = gpublas.to_device(np.ones((8, 8), np.float32))
    with pytest.raises(ValueError, match="K contiguous"):
        gpublas.gemm(x, x, trans_a=True, kernel="wgmma")
    y = gpublas.to_device(np.ones((8, 8)))
    with pytest.raises(ValueError, match="float32"):
        gpublas.gemm(y, y, kernel="wgmma")


@pytest.mark.parametrize("where", [("sm_90", 90), ("compute_90", 90), ("sm_80", 80)])
def test_wgmma_is_refused_where_the_build_lacks_sm_90a(monkeypatch, where):
    # built without sm_90a's features (GPUBLAS_CUDA_ARCH=sm_90, a PTX build, nvcc < 12, another device) the
    # wgmma kernels' bodies are empty: the planner refuses them instead of returning C untouched
    monkeypatch.setattr(gemm_plan, "target", lambda: where)
    x = gpublas.to_device(np.ones((8, 8), np.float32))
    with pytest.raises(ValueError, match=f"sm_90a.*{where[0]}"):
        gpublas.gemm(x, x, kernel="wgmma")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_a_compute_capability_9_0_device_gets_sm_90a_cubins():
    # the wgmma kernels exist only in sm_90a code; other devices keep their plain architecture
    assert nvcc_arch_flags(90) == (["-arch=sm_90a"], ".cubin")
    assert nvcc_arch_flags(80) == (["-arch=sm_80"], ".cubin")
    assert nvcc_arch_flags(90, "sm_90") == (["-arch=sm_90"], ".cubin")  # GPUBLAS_CUDA_ARCH still rules
