// attention_tiles.cuh: what nn/cuda/attention.cu (float, double) and attention_half.cu (the tensor cores)
// share: the head dim padded to ATT_DP (a multiple of 16) and the (B, H, T, D) rows' copy into shared memory.
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
template <int ROWS>
__device__ __forceinline__ void att_load_rows(real* s, const real* g, long long ld, int rows_left, int D) {
    constexpr int CH = ATT_DP / ATT_VW;
    for (int e = threadIdx.x; e < ROWS * CH; e += ATT_THREADS) {
        const int r = e / CH, c = e % CH * ATT_VW;
        const bool ok = r < rows_left && c < D;
        __pipeline_memcpy_async(s + r * ATT_PITCH + c, ok ? g + r * ld + c : g, 16, ok ? 0 : 16);
    }
}
