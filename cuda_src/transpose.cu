// transpose.cu: out = a^T for a row-major (rows, cols) array of `real` (-Dreal=float or double).
//
// transpose_tiled: block 32x8, one 32x32 tile per block and step (blockIdx.x over column tiles,
//                  blockIdx.y strides over row tiles, so any number of rows fits gridDim.y <= 65,535).
//                  Each thread loads 4 elements of the tile (threadIdx.x along a row of
//                  `a`, so reads coalesce), the block meets at a barrier, then each thread stores 4
//                  (threadIdx.x along a row of `out`, so writes coalesce). The tile row is padded to
//                  33 elements: a column of the tile falls in 32 different banks (no conflicts).
//                  Edge tiles are bounds-checked, so no size needs to be a multiple of 32.
// swap01:          grid-stride loop, one thread per output element: y[b, a, k] = x[a, b, k] for x (A, B, K)
//                  (nn: NCHW <-> (C, N, HW) around Conv2d's GEMMs, batch-first <-> time-major for LSTM).
//                  A and K come as FastDivmod divisors; below 2^31 elements the index math is 32-bit.
//                  The simulator: one run of about a thousand elements a thread (flat_geometry) copied in
//                  segments of one (b, a) row of K: digits CNN's dy (32, 16, 64) 185 -> 16 us.
//
// The simulator compiles swap01 (nn's layers) apart from transpose_tiled (gpublas.transpose): 0.4 s of g++
// CPU instead of the family's 1.2 s (gpublas/runtime/source.py's sim_units).
// sim unit: swap01
#include "common.cuh"

#define TILE 32
#define TILE_ROWS 8

extern "C" __global__ void transpose_tiled(const real* __restrict__ a, real* __restrict__ out, int rows, int cols) {
    __shared__ real tile[TILE][TILE + 1];
    const int col0 = blockIdx.x * TILE;
    for (long long row0 = (long long)blockIdx.y * TILE; row0 < rows; row0 += (long long)gridDim.y * TILE) {
        int c = col0 + threadIdx.x;
        for (int j = threadIdx.y; j < TILE; j += TILE_ROWS) {
            const long long r = row0 + j;
            if (r < rows && c < cols) tile[j][threadIdx.x] = a[r * cols + c];
        }
        __syncthreads();
        const long long rc = row0 + threadIdx.x;  // a column of out is a row of a
        for (int j = threadIdx.y; j < TILE; j += TILE_ROWS) {
            const int r = col0 + j;  // a row of out is a column of a
            if (r < cols && rc < rows) out[(long long)r * rows + rc] = tile[threadIdx.x][j];
        }
        __syncthreads();  // the tile is refilled by the next step
    }
}

template <class I>
__device__ __forceinline__ void swap01_loop(const real* __restrict__ x, real* __restrict__ y, I total,
                                            const FastDivmod& A, I B, const FastDivmod& K) {
#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
    // the simulator: the thread's run of y in segments of one (b, a) row of K elements, each a contiguous copy
    // of x's row (a, b); two divisions a run, not an element
    long long at, end;
    if (!sim_thread_run((long long)total, at, end)) return;
    I k, a;
    I b = div_mod(div_mod((I)at, K, k), A, a);
    while (at < end) {
        const long long len = end - at < (long long)(K.d - (int)k) ? end - at : (long long)(K.d - (int)k);
        const real* src = x + ((I)a * B + b) * (I)K.d + k;
        real* dst = y + at;
        for (long long t = 0; t < len; ++t) dst[t] = src[t];
        at += len;
        k = 0;
        if (++a == (I)A.d) { a = 0; ++b; }
    }
#else
    GRID_STRIDE_LOOP(I, e, total) {
        I k, a;
        const I b = div_mod(div_mod(e, K, k), A, a);
        y[e] = x[((I)a * B + b) * (I)K.d + k];
    }
#endif
}

extern "C" __global__ void swap01(const real* __restrict__ x, real* __restrict__ y, unsigned long long A_,
                                  long long B, unsigned long long K_) {
    const FastDivmod A(A_), K(K_);
    const long long total = (long long)A.d * B * K.d;
    if (small_index(total)) swap01_loop<unsigned>(x, y, (unsigned)total, A, (unsigned)B, K);
    else swap01_loop<long long>(x, y, total, A, B, K);
}
