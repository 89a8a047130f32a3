// gemv.cu: level-2 BLAS on a row-major M x N matrix A (leading dimension lda), `real` the element type
// (float, double, cfloat, cdouble). gemv's kernels take `conjugate`: A's elements are conjugated as they
// are read (trans 'C' on complex A; common.cuh's conj is the identity on real numbers).
//
// gemv_n_warp:      y = alpha * A @ x + beta * y (y has M elements). Block 256 threads = 8 warps, one warp
//                   per row: the 32 lanes walk the row with stride 32 (coalesced), then a shuffle
//                   reduction (common.cuh's warp_reduce) gives lane 0 the row's sum; lane 0 writes y[row].
//                   On the simulator (unless GEMV_GPU_FORM): a thread per run of 16 rows (any launch shape),
//                   summed GEMV_SIM_ROWS rows at a time (x's pieces loaded once for them), each row's sum in
//                   STRIDED_FOLD's lanes, no shuffle.
// gemv_t_partial:   first pass of y = alpha * A^T @ x + beta * y (y has N elements). Block 32x8: threadIdx.x
//                   runs along the columns (coalesced rows of A), threadIdx.y over the rows of this block's
//                   row chunk (blockIdx.y; rows_per_chunk rows) with stride 8. The 8 partial sums of a
//                   column are added through shared memory (one barrier) and thread y = 0 writes
//                   partial[chunk * N + col]. On the simulator (unless GEMV_GPU_FORM): thread
//                   blockIdx.x * blockDim.x + threadIdx.x sums GEMV_SIM_COL_BYTES of columns over chunk
//                   blockIdx.y's rows in row order, vector adds across the columns, no barrier.
// gemv_t_finish:    second pass: 1-D blocks of 256, grid-stride over columns: y[col] = alpha * (sum over the
//                   chunks of partial[chunk * N + col]) + beta * y[col], in chunk order (deterministic).
// ger_real:         A += alpha * outer(x, y). Block 32x8, one thread per A[row, col], threadIdx.x along the
//                   columns; a grid-stride loop over rows (the grid's y size is capped).
// beta == 0 writes y without reading it. alpha == 0 is the launcher's job (scale y, or nothing for ger).
// On the simulator a launch of 2^18 elements or more is a block per thread's run, spread over the cores:
// sim spread: gemv_n_warp gemv_t_partial gemv_t_finish
#include "common.cuh"

// gemv_t_partial's simulator form: the bytes of columns a thread sums (2048 floats, 512 complex doubles: L1's)
#define GEMV_SIM_COL_BYTES 8192

#if defined(__CUDA_ARCH_SIM__) && !defined(GEMV_GPU_FORM)
// Rows a simulated thread of gemv_n_warp sums at once: 16 lanes of each in registers (64 bytes of floats:
// 4 float rows, 2 double or cfloat rows, 1 cdouble row fill 8 of AVX2's 16 vector registers).
#define GEMV_SIM_ROWS (sizeof(real) >= 16 ? 1 : 16 / (int)sizeof(real))
// s[q] = sum over j of f(a[q][j]) * x[j] for R rows: element j in lane j % 16, the lanes added in STRIDED_FOLD's
// tree (0 with 8, 1 with 9, ..., then 0 with 4, ...). float and double accumulate in 32-byte vectors (GCC keeps
// an array of plain elements in memory: measured, a store per add); complex numbers element by element.
template <int R, class T, class F>
__device__ __forceinline__ void gemv_sim_rows(const T* const* a, const T* __restrict__ x, int n, T* s, F f) {
    constexpr int L = SIM_FOLD_LANES;
    T lanes[R][L] = {};
    int j = 0;
    if constexpr (std::is_floating_point<T>::value) {
        typedef T vec __attribute__((vector_size(32)));
        constexpr int W = 32 / sizeof(T), NV = L / W;  // a vector's elements, a row's vectors of lanes
        vec acc[R][NV] = {};
        for (; j + L <= n; j += L) {
            vec xv[NV];  // one load a vector (a memcpy of the whole array went through the stack: a stall a round)
            for (int v = 0; v < NV; ++v) memcpy(&xv[v], x + j + v * W, sizeof(vec));
            for (int q = 0; q < R; ++q)
                for (int v = 0; v < NV; ++v) {
                    vec av;
                    memcpy(&av, a[q] + j + v * W, sizeof av);
                    acc[q][v] = av * xv[v] + acc[q][v];
                }
        }
        memcpy(lanes, acc, sizeof lanes);
    } else {
        for (; j + L <= n; j += L)
            for (int q = 0; q < R; ++q)
                for (int l = 0; l < L; ++l) lanes[q][l] = f(a[q][j + l]) * x[j + l] + lanes[q][l];
    }
    for (int q = 0; q < R; ++q)
        for (int l = 0; j + l < n; ++l) lanes[q][l] = f(a[q][j + l]) * x[j + l] + lanes[q][l];
    for (int q = 0; q < R; ++q) {
        for (int w = L / 2; w > 0; w /= 2)
            for (int l = 0; l < w; ++l) lanes[q][l] = lanes[q][l + w] + lanes[q][l];
        s[q] = lanes[q][0];
    }
}

// s[j] = sum over rows r0 .. r1 - 1, in row order, of f(a[r * lda + j]) * x[r], for j < w: 4 rows a pass over the sums
// (one load and store of s[j] for four rows, each still added in row order), vector adds across the columns
template <class F>
__device__ __forceinline__ void gemv_sim_cols(const real* __restrict__ a, int lda, const real* __restrict__ x, int r0,
                                              int r1, int w, real* __restrict__ s, F f) {
    for (int j = 0; j < w; ++j) s[j] = 0;
    int r = r0;
    for (; r + 4 <= r1; r += 4) {
        const real* __restrict__ ar = a + (long long)r * lda;
        const real x0 = x[r], x1 = x[r + 1], x2 = x[r + 2], x3 = x[r + 3];
        for (int j = 0; j < w; ++j)
            s[j] = f(ar[3 * lda + j]) * x3 + (f(ar[2 * lda + j]) * x2 + (f(ar[lda + j]) * x1 + (f(ar[j]) * x0 + s[j])));
    }
    for (; r < r1; ++r) {
        const real* __restrict__ ar = a + (long long)r * lda;
        for (int j = 0; j < w; ++j) s[j] = f(ar[j]) * x[r] + s[j];
    }
}
#endif

extern "C" __global__ void gemv_n_warp(int M, int N, real alpha, const real* __restrict__ A, int lda,
                                       const real* __restrict__ x, real beta, real* __restrict__ y, int conjugate) {
#if defined(__CUDA_ARCH_SIM__) && !defined(GEMV_GPU_FORM)
    // the simulator: a thread per run of rows (any launch shape), GEMV_SIM_ROWS rows at a time (x's 16-element
    // piece loaded once for them: several streams of A in flight), each row summed in its own 16 lanes as
    // STRIDED_FOLD sums one row alone (the same bits), no shuffle rounds
    long long r0, r1;
    if (!sim_thread_run(M, r0, r1)) return;
    constexpr int R = GEMV_SIM_ROWS;
    for (long long row = r0; row < r1; row += R) {
        const real* a[R];  // a group cut at the run's end repeats its last row, whose sum it drops
        for (int q = 0; q < R; ++q) a[q] = A + (row + q < r1 ? row + q : r1 - 1) * (long long)lda;
        real s[R];
        if (conjugate) gemv_sim_rows<R, real>(a, x, N, s, [](real v) { return conj(v); });
        else gemv_sim_rows<R, real>(a, x, N, s, [](real v) { return v; });
        for (int q = 0; q < R && row + q < r1; ++q)
            y[row + q] = beta == (real)0 ? alpha * s[q] : alpha * s[q] + beta * y[row + q];
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
#if defined(__CUDA_ARCH_SIM__) && !defined(GEMV_GPU_FORM)
    // the simulator: thread blockIdx.x * blockDim.x + threadIdx.x owns GEMV_SIM_COL_BYTES of columns and walks
    // chunk blockIdx.y's rows in order (gemv_sim_cols), the columns' sums where they end, in partial (an L1-sized
    // run; no barrier)
    constexpr int C = GEMV_SIM_COL_BYTES / (int)sizeof(real);
    const long long c0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * C;
    if (c0 >= N) return;
    const int w = N - c0 < C ? (int)(N - c0) : C;
    const int r0 = blockIdx.y * rows_per_chunk;
    const int r1 = r0 + rows_per_chunk < M ? r0 + rows_per_chunk : M;
    real* __restrict__ s = partial + (long long)blockIdx.y * N + c0;
    if (conjugate) gemv_sim_cols(A + c0, lda, x, r0, r1, w, s, [](real v) { return conj(v); });
    else gemv_sim_cols(A + c0, lda, x, r0, r1, w, s, [](real v) { return v; });
#else
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
#endif
}

extern "C" __global__ void gemv_t_finish(int N, int nchunks, const real* __restrict__ partial, real alpha,
                                         real beta, real* __restrict__ y) {
    GRID_STRIDE_LOOP(int, col, N) {
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
