// getrf.cu: batched LU factorization with partial pivoting, P A = L U (LAPACK getf2's steps and
// pivot choice), and the row interchanges of its solve (gpublas/blas/lapack.py). A batch is contiguous:
// matrix b at LU + b * n * n, its pivots at piv + b * n (0-based: row k was swapped with row piv[k],
// as scipy.linalg.lu_factor), info[b] = 0, or k + 1 for the first column k whose pivot is exactly 0.
// Element arithmetic is `real`'s operators and common.cuh's abs1 (|re| + |im| for a complex `real`, as
// LAPACK's icamax in cgetf2), so cfloat and cdouble are instantiations; pivots compare as `magnitude`.
//
// getrf_shared: one block of 32 x GETRF_ROWS threads per matrix (n <= GETRF_SHARED; blockDim.y 1 on the
//   simulator, where a thread costs more than an element), held in shared memory
//   (rows padded to n + 1) from the first load to the last store. Per column k: warp 0 scales column
//   k - 1 below the diagonal by its pivot, finds the pivot of column k (lanes over the rows,
//   a shuffle argmax, ties to the lower row) and swaps rows k and p (lanes over the columns); a
//   barrier; the whole block updates the trailing submatrix, threadIdx.x along the columns and
//   threadIdx.y over the rows (stride blockDim.y): A(i, j) -= A(i, k) / A(k, k) * A(k, j) (the unscaled column: its scaling waits for the next step); a
//   barrier.
// getrf_global: the same steps with the matrix in global memory (any n; one block per matrix).
// laswp: B's rows interchanged as piv says, k = 0 .. n-1 (forward) or n-1 .. 0 (backward); B a strided
//   stack (row, column, batch strides). Grid (batch, column blocks; grid-stride over the columns), 1-D
//   blocks of 128, one thread per column running the n swaps in order (no barrier).
#include "common.cuh"

#define GETRF_SHARED 32
#define GETRF_ROWS 8
#define LASWP_THREADS 128

typedef decltype(abs1(real())) magnitude;  // real for float and double, R for gcomplex<R>

// L's entries a / p as (a * s) * r with r = 1 / (p * s), one division per column: s = 1, or a power of two
// lifting a subnormal pivot (abs1(p) below the smallest normal number) into the normal range where
// 1 / p itself would overflow (then abs1(a) <= abs1(p) keeps a * s small), so the quotients stay finite
// as LAPACK getf2's division gives them. A zero pivot (a zero column: its max is 0) gives r = 0.
__device__ __forceinline__ float pivot_lift(float m) { return m < 1.2e-38f ? 4294967296.0f : 1.0f; }
__device__ __forceinline__ double pivot_lift(double m) { return m < 2.3e-308 ? 1.8446744073709552e19 : 1.0; }
struct Multiplier {
    real s, r;
    Multiplier() = default;  // the simulator's loop fission keeps a per-thread copy across a barrier
    __device__ __forceinline__ explicit Multiplier(real p)
        : s(pivot_lift(abs1(p))), r(p != (real)0 ? (real)1 / (p * s) : (real)0) {}
    __device__ __forceinline__ real operator()(real a) const { return a * s * r; }
};

struct PivotFirst {  // larger abs1(value) wins, equal ones go to the lower row
    __device__ __forceinline__ bool operator()(magnitude bv, int bi, magnitude av, int ai) const {
        return bv > av || (bv == av && bi < ai);
    }
};

// Factors the n x n matrix A (rows lda apart; shared or global memory) in place.
__device__ void getrf_steps(real* A, int lda, int n, int* __restrict__ piv, int* __restrict__ info) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    int singular = 0;
    for (int k = 0; k < n; ++k) {
        if (ty == 0) {  // warp 0
            if (k > 0) {
                const Multiplier m(A[(k - 1) * lda + k - 1]);
                for (int i = k + tx; i < n; i += 32) A[i * lda + k - 1] = m(A[i * lda + k - 1]);
            }
            magnitude best = (magnitude)-1;
            int row = n;
            for (int i = k + tx; i < n; i += 32) {
                const magnitude v = abs1(A[i * lda + k]);
                if (PivotFirst()(v, i, best, row)) { best = v; row = i; }
            }
            warp_reduce_pair(best, row, PivotFirst());
            row = __shfl_sync(FULL_MASK, row, 0);
            if (row >= n) row = k;  // every candidate NaN
            __syncwarp();           // column k - 1 scaled by every lane before rows move
            const bool zero = A[row * lda + k] == (real)0;
            if (!zero && row != k)
                for (int j = tx; j < n; j += 32) {
                    const real t = A[k * lda + j];
                    A[k * lda + j] = A[row * lda + j];
                    A[row * lda + j] = t;
                }
            if (tx == 0) {
                piv[k] = row;
                if (zero && !singular) singular = k + 1;
            }
        }
        __syncthreads();
        const Multiplier m(A[k * lda + k]);
        for (int i = k + 1 + ty; i < n; i += blockDim.y) {
            const real l = m(A[i * lda + k]);
            for (int j = k + 1 + tx; j < n; j += 32) A[i * lda + j] -= l * A[k * lda + j];
        }
        __syncthreads();
    }
    if (tx == 0 && ty == 0) *info = singular;
}

extern "C" __global__ void __launch_bounds__(256) getrf_shared(int n, real* __restrict__ LU, int* __restrict__ piv,
                                                               int* __restrict__ info) {
    __shared__ real s[GETRF_SHARED * (GETRF_SHARED + 1)];
    const long long nn = (long long)n * n;
    real* __restrict__ a = LU + blockIdx.x * nn;
    const int tid = threadIdx.y * 32 + threadIdx.x, threads = 32 * blockDim.y;
    for (int e = tid; e < nn; e += threads) s[e / n * (n + 1) + e % n] = a[e];
    __syncthreads();
    getrf_steps(s, n + 1, n, piv + (long long)blockIdx.x * n, info + blockIdx.x);
    for (int e = tid; e < nn; e += threads) a[e] = s[e / n * (n + 1) + e % n];
}

extern "C" __global__ void __launch_bounds__(256) getrf_global(int n, real* __restrict__ LU, int* __restrict__ piv,
                                                               int* __restrict__ info) {
    getrf_steps(LU + blockIdx.x * (long long)n * n, n, n, piv + (long long)blockIdx.x * n, info + blockIdx.x);
}

extern "C" __global__ void laswp(int n, int nrhs, const int* __restrict__ piv, real* __restrict__ B, long long sbr,
                                 long long sbc, long long zb, int forward) {
    piv += (long long)blockIdx.x * n;
    for (int v = blockIdx.y * blockDim.x + threadIdx.x; v < nrhs; v += gridDim.y * blockDim.x) {
        real* __restrict__ b = B + blockIdx.x * zb + v * sbc;
        for (int t = 0; t < n; ++t) {
            const int k = forward ? t : n - 1 - t;
            const int p = piv[k];
            if (p != k) {
                const real x = b[k * sbr];
                b[k * sbr] = b[p * sbr];
                b[p * sbr] = x;
            }
        }
    }
}
