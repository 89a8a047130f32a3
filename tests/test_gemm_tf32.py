"""The TF32 tensor-core path: cuda_src/mma.cuh's mma_tf32_m16n8k8 and ldmatrix_x4 against the PTX ISA's
fragment layout (on the simulator: gpublas/runtime/sim/mma_sync.h's emulation; on a GPU: the hardware), and
gemm_tf32_large (gemm_tf32.cu) against NumPy in every orientation, under two simulator thread orders.

TF32 keeps 10 of float's 23 mantissa bits: the tensor core reads the top 19 bits of each input (the rest
are truncated). The references below truncate the inputs the same way, so the comparisons are tight, and
each test also checks that the result is NOT the full-FP32 one, which proves the emulation really rounds."""
import numpy as np
import pytest

import gpublas
from gpublas.runtime.launch import load_source

TRANS = [(False, False), (False, True), (True, False), (True, True)]

MMA_SRC = r"""
#include "mma.cuh"
// One warp: D (16 x 8) += A (16 x 8) B (8 x 8), all row-major, through the PTX ISA's fragment layout.
extern "C" __global__ void mma_one(const float* A, const float* B, float* D) {
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    const unsigned a[4] = {__float_as_uint(A[g * 8 + t]), __float_as_uint(A[(g + 8) * 8 + t]),
                           __float_as_uint(A[g * 8 + t + 4]), __float_as_uint(A[(g + 8) * 8 + t + 4])};
    const unsigned b[2] = {__float_as_uint(B[t * 8 + g]), __float_as_uint(B[(t + 4) * 8 + g])};
    float d[4] = {D[g * 8 + 2 * t], D[g * 8 + 2 * t + 1], D[(g + 8) * 8 + 2 * t], D[(g + 8) * 8 + 2 * t + 1]};
    mma_tf32_m16n8k8(d, a, b);
    D[g * 8 + 2 * t] = d[0]; D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2]; D[(g + 8) * 8 + 2 * t + 1] = d[3];
}
// One warp: S (32 rows of 4 words) into shared memory; lane l names row 5 l % 32; R[l][j] = what it got.
extern "C" __global__ void ldmatrix_one(const float* S, float* R) {
    __shared__ __align__(16) float s[32 * 4];
    for (int i = threadIdx.x; i < 32 * 4; i += 32) s[i] = S[i];
    __syncthreads();
    unsigned r[4];
    ldmatrix_x4(r, s + 4 * (threadIdx.x * 5 % 32));
    for (int j = 0; j < 4; ++j) R[threadIdx.x * 4 + j] = __uint_as_float(r[j]);
}
"""


def tf32(x):
    """x with the low 13 mantissa bits cleared: what the tensor core reads of a float."""
    return (np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def tf32_rna(x):
    """x rounded to TF32, to nearest with ties away (cvt.rna.tf32.f32)."""
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _module():
    return load_source(MMA_SRC, None, "mma_check.cu")


def _check_tf32(got, a, b, c, k, alpha=1.0, beta=1.0, distinct=True):
    """got is alpha A B + beta C with TF32 inputs: on the simulator truncated (as documented) and accumulated
    in float in K order (tight: 1e-6 sqrt(K) relative); on a GPU truncated or rounded to nearest, and
    accumulated however the tensor cores do, so within the bound of any order of float additions:
    (K + 2) 2^-23 (|alpha| |A| |B| + |beta C|). distinct: the result is also not the FP32 product."""
    exact = beta * c + alpha * (a.astype(np.float64) @ b)
    refs = [beta * c + alpha * (tf32(a).astype(np.float64) @ tf32(b))]
    if gpublas.backend() == "sim":
        tol = 1e-6 * np.sqrt(k) * (1 + np.abs(exact))
    else:
        refs.append(beta * c + alpha * (tf32_rna(a).astype(np.float64) @ tf32_rna(b)))
        tol = (k + 2) * 2.0 ** -23 * (abs(alpha) * (np.abs(a).astype(np.float64) @ np.abs(b)) + np.abs(beta * c))
        tol = tol + np.finfo(np.float32).tiny
    assert any(np.all(np.abs(got - r) <= tol) for r in refs), np.abs(got - refs[0]).max()
    if distinct:
        assert np.mean(np.abs(got - exact) > tol) > 0.5, "the result is the FP32 one: inputs were not made TF32"


def test_mma_fragment_layout_and_tf32_inputs(rng, sim_order):
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = gpublas.to_device(c)
    _module().get("mma_one")(1, 32, gpublas.to_device(a), gpublas.to_device(b), d)
    _check_tf32(d.get(), a, b, c, 8)


def test_ldmatrix_hands_each_lane_its_words(rng, sim_order):
    s = rng.standard_normal(32 * 4).astype(np.float32)
    r = gpublas.zeros((32 * 4,), np.float32)
    _module().get("ldmatrix_one")(1, 32, gpublas.to_device(s), r)
    words = s.view(np.uint32).reshape(32, 4)
    lane = np.arange(32)
    want = np.stack([words[(8 * j + lane // 4) * 5 % 32, lane % 4] for j in range(4)], axis=1)
    np.testing.assert_array_equal(r.get().view(np.uint32).reshape(32, 4), want)


@pytest.mark.skipif(gpublas.backend() != "sim", reason="the simulator's check of a warp's lanes")
def test_mma_with_missing_lanes_is_a_launch_error():
    z = gpublas.zeros((16 * 8,), np.float32)
    with pytest.raises(gpublas.LaunchError, match="every lane must take part"):
        _module().get("mma_one")(1, 16, z, z, gpublas.zeros((16 * 8,), np.float32))


def _operand(x, offset):
    """x on the device, `offset` elements into its allocation (offset 1: no 16-byte alignment)."""
    flat = gpublas.to_device(np.concatenate([np.zeros(offset, np.float32), x.ravel()]))
    return flat[offset:].reshape(x.shape)


# one whole 128 x 256 block (vector epilogue), edges in M, N and K, and unaligned operands and C
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
@pytest.mark.parametrize("m,n,k,offset", [(128, 256, 40, 0), (130, 300, 19, 0), (37, 70, 33, 1), (128, 256, 16, 1)])
def test_tf32_gemm_matches_numpy(rng, sim_order, trans_a, trans_b, m, n, k, offset):
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    oa, ob = (a.T if trans_a else a), (b.T if trans_b else b)
    dc = _operand(c, offset)
    got = gpublas.gemm(_operand(a, offset), _operand(b, offset), dc, alpha=0.5, beta=2.0, trans_a=trans_a,
                       trans_b=trans_b, kernel="tf32").get()
    _check_tf32(got, oa, ob, c, k, alpha=0.5, beta=2.0)


def test_tf32_gemm_beta_zero_never_reads_c(rng):
    a = rng.standard_normal((128, 24)).astype(np.float32)
    b = rng.standard_normal((24, 256)).astype(np.float32)
    for shape_b in (b, b[:, :255]):  # an interior block (vector stores) and an edge one
        c = gpublas.to_device(np.full((128, shape_b.shape[1]), np.nan, np.float32))
        got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(np.ascontiguousarray(shape_b)), c, beta=0.0,
                           kernel="tf32")
        _check_tf32(got.get(), a, shape_b, 0.0, 24)


def test_tf32_truncates_exactly_where_fp32_differs():
    # 1 + 3 * 2^-12 is a float but not a TF32 value: truncated it is 1, so each dot product is exactly K
    k = 48
    a = np.full((130, k), 1 + 3 * 2.0 ** -12, np.float32)
    b = np.ones((k, 260), np.float32)
    got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), kernel="tf32").get()
    fp32 = float(np.float32(k * (1 + 3 * 2.0 ** -12)))
    assert np.all(got != fp32)
    allowed = {float(k)} if gpublas.backend() == "sim" else {float(k), float(k * (1 + 2.0 ** -10))}
    assert set(np.unique(got).tolist()) <= allowed, np.unique(got)
