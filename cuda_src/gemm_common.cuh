// gemm_common.cuh: the epilogue every GEMM kernel (gemm.cu, gemm_v2.cu) shares.
#pragma once

// C[idx] = alpha * acc + beta * C[idx], without reading C when beta == 0 (NaN or Inf there must not leak).
__device__ __forceinline__ void store_c(real* __restrict__ c, long long idx, real alpha, real acc, real beta) {
    c[idx] = beta == (real)0 ? alpha * acc : alpha * acc + beta * c[idx];
}
