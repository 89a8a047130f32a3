// triangular.cu: the small kernels of the triangular and symmetric routines (gpublas/blas3_tri.py,
// blas3_sym.py, blas2_tri.py); every other FLOP of those routines runs in the GEMM kernels. Matrices
// are strided views: element (i, j) of X is X[i * sxr + j * sxc] (strides in elements, any sign, so a
// transposed view is the same matrix with its strides swapped); a stack's matrices are zx apart.
// Element arithmetic is written with `real`'s operators only, so a complex `real` is an instantiation;
// cj = 1 reads A conjugated (common.cuh's conj: a real number is its own), the conjugate transpose of
// trans 'C' being the transposed view (strides swapped) read conjugated.
//
// tri_fill:   D = the n x n dense form of a matrix stored in the `lower` (else upper) triangle of A:
//             the other triangle zeros (mirror = 0: a triangular matrix) or A(j, i) (mirror = 1: a
//             symmetric one); unit = 1 puts ones on the diagonal without reading it; cj = 1 conjugates
//             what it reads. D contiguous.
//             Block 32x8: one thread per D(i, j), threadIdx.x along j (coalesced writes), grid-stride
//             over the rows.
// tri_update: C(i, j) = T(i, j) + beta * C(i, j) on the `lower` (else upper) triangle of C only, the
//             other triangle untouched (syrk, syr2k: T the dense product of a diagonal block). T null
//             means 0 (alpha == 0); beta == 0 writes without reading C. Same mapping as tri_fill.
// trsm_leaf:  B = alpha * A^-1 B for an n x n triangle A (`lower` else upper; unit: a diagonal of
//             ones, not read; cj: A read conjugated) and nrhs right-hand sides, in place (n <=
//             TRSM_LEAF: the diagonal blocks of trsm's recursion). 1-D blocks of TRSM_THREADS, one
//             thread per column v of B running the substitution down (lower) or up (upper) the column;
//             the block's threads read the same A(i, j) at once (one broadcast load), B(., v) stays in
//             the thread's own column, so no barrier. grid.x = batch (A and B zA, zB apart), grid.y
//             grid-strides over the columns.
#include "common.cuh"

#define TRI_BLOCK_X 32
#define TRI_BLOCK_Y 8
#define TRSM_LEAF 64
#define TRSM_THREADS 128

__device__ __forceinline__ bool in_triangle(int i, int j, int lower) { return lower ? j <= i : j >= i; }
__device__ __forceinline__ real conj_if(real a, int cj) { return cj ? conj(a) : a; }

extern "C" __global__ void tri_fill(int n, const real* __restrict__ A, long long sar, long long sac, int lower,
                                    int mirror, int unit, int cj, real* __restrict__ D) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < n; i += gridDim.y * blockDim.y) {
        real v;
        if (i == j && unit)
            v = (real)1;
        else if (in_triangle(i, j, lower))
            v = conj_if(A[i * sar + j * sac], cj);
        else
            v = mirror ? conj_if(A[j * sar + i * sac], cj) : (real)0;
        D[(long long)i * n + j] = v;
    }
}

extern "C" __global__ void tri_update(int n, const real* __restrict__ T, real beta, real* __restrict__ C,
                                      long long scr, long long scc, int lower) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < n; i += gridDim.y * blockDim.y) {
        if (!in_triangle(i, j, lower)) continue;
        real& c = C[i * scr + j * scc];
        const real t = T ? T[(long long)i * n + j] : (real)0;
        c = beta == (real)0 ? t : t + beta * c;
    }
}

extern "C" __global__ void trsm_leaf(int n, int nrhs, real alpha, const real* __restrict__ A, long long sar,
                                     long long sac, long long za, real* __restrict__ B, long long sbr, long long sbc,
                                     long long zb, int lower, int unit, int cj) {
    A += blockIdx.x * za;
    for (int v = blockIdx.y * blockDim.x + threadIdx.x; v < nrhs; v += gridDim.y * blockDim.x) {
        real* __restrict__ b = B + blockIdx.x * zb + v * sbc;
        for (int t = 0; t < n; ++t) {
            const int i = lower ? t : n - 1 - t;
            real s = alpha * b[i * sbr];
            for (int u = 0; u < t; ++u) {  // the unknowns already solved: above row i (lower) or below it
                const int j = lower ? u : n - 1 - u;
                s -= conj_if(A[i * sar + j * sac], cj) * b[j * sbr];
            }
            b[i * sbr] = unit ? s : s / conj_if(A[i * sar + i * sac], cj);
        }
    }
}
