// gemv.cu: level-2 BLAS on a row-major M x N matrix A (leading dimension lda), `real` the element type
// (float, double, cfloat, cdouble). gemv's kernels take `conjugate`: A's elements are conjugated as they
// are read (trans 'C' on complex A; common.cuh's conj is the identity on real numbers).
//
// gemv_n_warp:      y = alpha * A @ x + beta * y (y has M elements). Block 256 threads = 8 warps, one warp
//                   per row: the 32 lanes walk the row with stride 32 (coalesced), then a shuffle
//                   reduction (common.cuh's warp_reduce) gives lane 0 the row's sum; lane 0 writes y[row].
//                   On the simulator (unless GEMV_GPU_FORM): a thread per run of rows, each row's sum in
//                   STRIDED_FOLD's lanes, no shuffle (the launcher gives it geometry_1d's threads there).
// gemv_t_partial:   first pass of y = alpha * A^T @ x + beta * y (y has N elements). Block 32x8: threadIdx.x
//                   runs along the columns (coalesced rows of A), threadIdx.y over the rows of this block's
//                   row chunk (blockIdx.y; rows_per_chunk rows) with stride 8. The 8 partial sums of a
//                   column are added through shared memory (one barrier) and thread y = 0 writes
//                   partial[chunk * N + col].
// gemv_t_finish:    second pass: 1-D blocks of 256, grid-stride over columns: y[col] = alpha * (sum over the
//                   chunks of partial[chunk * N + col]) + beta * y[col], in chunk order (deterministic).
// ger_real:         A += alpha * outer(x, y). Block 32x8, one thread per A[row, col], threadIdx.x along the
//                   columns; a grid-stride loop over rows (the grid's y size is capped).
// beta == 0 writes y without reading it. alpha == 0 is the launcher's job (scale y, or nothing for ger).
#include "common.cuh"

extern "C" __global__ void gemv_n_warp(int M, int N, real alpha, const real* __restrict__ A, int lda,
                                       const real* __restrict__ x, real beta, real* __restrict__ y, int conjugate) {
#if defined(__CUDA_ARCH_SIM__) && !defined(GEMV_GPU_FORM)
    // the simulator: a thread per run of rows (any launch shape), each row summed in common.cuh's
    // STRIDED_FOLD lanes: vector adds along the row, no shuffle rounds
    GRID_STRIDE_LOOP(int, row, M) {
        const real* __restrict__ a = A + (long long)row * lda;
        real s = 0;
        STRIDED_FOLD(int, j, 0, N, 0, 1, s, SumOp<real>(), (conjugate ? conj(a[j]) : a[j]) * x[j]);
        y[row] = beta == (real)0 ? alpha * s : alpha * s + beta * y[row];
    }
#else
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= M) return;  // the whole warp leaves together
    const real* __restrict__ a = A + (long long)row * lda;
    real s = 0;
    for (int j = lane; j < N; j += 32) s += (conjugate ? conj(a[j]) : a[j]) * x[j];
    s = warp_reduce(s, SumOp<real>());
    if (lane == 0) y[row] = beta == (real)0 ? alpha * s : alpha * s + beta * y[row];
#endif
}

extern "C" __global__ void gemv_t_partial(int M, int N, const real* __restrict__ A, int lda,
                                          const real* __restrict__ x, int rows_per_chunk, real* __restrict__ partial,
                                          int conjugate) {
    __shared__ real part[8][33];  // part[ty][tx]: the sum of rows ty, ty + 8, ... for one column
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int col = blockIdx.x * 32 + tx;
    const int r0 = blockIdx.y * rows_per_chunk;
    const int r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
    real s = 0;
    if (col < N)
        for (int r = r0 + ty; r < r1; r += 8) {
            const real v = A[(long long)r * lda + col];
            s += (conjugate ? conj(v) : v) * x[r];
        }
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && col < N) {
        real t = part[0][tx];
#pragma unroll
        for (int k = 1; k < 8; ++k) t += part[k][tx];
        partial[(long long)blockIdx.y * N + col] = t;
    }
}

extern "C" __global__ void gemv_t_finish(int N, int nchunks, const real* __restrict__ partial, real alpha,
                                         real beta, real* __restrict__ y) {
    for (int col = blockIdx.x * blockDim.x + threadIdx.x; col < N; col += gridDim.x * blockDim.x) {
        real s = 0;
        for (int c = 0; c < nchunks; ++c) s += partial[(long long)c * N + col];
        y[col] = beta == (real)0 ? alpha * s : alpha * s + beta * y[col];
    }
}

extern "C" __global__ void ger_real(int M, int N, real alpha, const real* __restrict__ x, const real* __restrict__ y,
                                    real* __restrict__ A, int lda) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= N) return;
    const real ay = alpha * y[col];
    for (int row = blockIdx.y * blockDim.y + threadIdx.y; row < M; row += gridDim.y * blockDim.y)
        A[(long long)row * lda + col] += x[row] * ay;
}
