// attention_tiles.cuh: what nn/cuda/attention.cu (float, double) and attention_half.cu (the tensor cores)
// share: the head dim padded to ATT_DP (a multiple of 16), the (B, H, T, D) rows' copy into shared memory and
// the backward's operands moved to a block's rows.
// The includer defines ATT_THREADS (the block's threads) and `real` first.
#pragma once

#include <cuda_pipeline.h>

#include "common.cuh"

#ifndef ATT_DP
#define ATT_DP 64  // the head dim padded to a multiple of 16
#endif

constexpr int ATT_VW = 16 / sizeof(real);  // elements of one 16-byte copy
// a row of D in shared memory: 16 bytes of padding, so that the 8 rows an ldmatrix (or a column of threads)
// reads fall in distinct banks
constexpr int ATT_PITCH = ATT_DP + ATT_VW;

// rows [0, ROWS) x [0, ATT_DP) of the tile at g (row stride ld; rows_left rows and D columns exist) into
// s (row pitch ATT_PITCH), zeros outside: 16-byte cp.async copies, thread t taking chunks t, t + THREADS ...
// The simulator, which has no cp.async to keep busy, copies whole rows instead (thread t: rows t,
// t + THREADS ...): a plain loop per row, where the 16-byte copies' index arithmetic and alignment checks
// had cost as much as the tile's products at D = 128.
template <int ROWS>
__device__ __forceinline__ void att_load_rows(real* s, const real* g, long long ld, int rows_left, int D) {
#if defined(__CUDA_ARCH_SIM__) && !defined(ATT_CP_ASYNC)  // ATT_CP_ASYNC: the GPU's copies on the simulator (tests)
    for (int r = threadIdx.x; r < ROWS; r += ATT_THREADS) {
        real* row = s + r * ATT_PITCH;
        const int n = r < rows_left ? D : 0;
        memcpy(row, g + r * ld, n * sizeof(real));
        for (int d = n; d < ATT_DP; ++d) row[d] = convert<real>(0.0f);
    }
    return;
#endif
    constexpr int CH = ATT_DP / ATT_VW;
    for (int e = threadIdx.x; e < ROWS * CH; e += ATT_THREADS) {
        const int r = e / CH, c = e % CH * ATT_VW;
        const bool ok = r < rows_left && c < D;
        __pipeline_memcpy_async(s + r * ATT_PITCH + c, ok ? g + r * ld + c : g, 16, ok ? 0 : 16);
    }
}

// attention_backward's and attention_half_backward's operands moved to their block's rows: q and dy to query 0,
// k and v to key k0 of head (b, h) = blockIdx.y ((B, H, T, D) with strides over b, h, t), lse, delta and the dq
// accumulator (contiguous (B, H, Tq) and (B, H, Tq, D), in the compute type C) to that head's rows.
template <typename C>
__device__ __forceinline__ void att_backward_rows(const real* __restrict__& q, const real* __restrict__& k,
                                                  const real* __restrict__& v, const real* __restrict__& dy,
                                                  const C* __restrict__& lse, const C* __restrict__& delta,
                                                  C* __restrict__& dq_acc, int H, int Tq, int D, int k0, long long q_sb,
                                                  long long q_sh, long long k_sb, long long k_sh, long long k_st,
                                                  long long v_sb, long long v_sh, long long v_st, long long dy_sb,
                                                  long long dy_sh) {
    const int b = blockIdx.y / H, h = blockIdx.y % H;
    q += b * q_sb + h * q_sh;
    k += b * k_sb + h * k_sh + k0 * k_st;
    v += b * v_sb + h * v_sh + k0 * v_st;
    dy += b * dy_sb + h * dy_sh;
    lse += (long long)blockIdx.y * Tq;
    delta += (long long)blockIdx.y * Tq;
    dq_acc += (long long)blockIdx.y * Tq * D;
}
