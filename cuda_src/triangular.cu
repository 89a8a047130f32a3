// triangular.cu: the small kernels of the triangular and symmetric routines (gpublas/blas/blas3_tri.py,
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
//             Block 32x8, threadIdx.x along j (coalesced writes), each thread grid-striding over the rows
//             (the launcher's grid: one row a thread on a GPU, 8 on the sim); blockIdx.z the matrix of a
//             stack (A za apart, D n^2).
// tri_update: C(i, j) = T(i, j) + beta * C(i, j) on the `lower` (else upper) triangle of C only, the
//             other triangle untouched (syrk, syr2k: T the dense products of the diagonal blocks). T null
//             means 0 (alpha == 0); beta == 0 writes without reading C. Same mapping as tri_fill, and
//             blockIdx.z the matrix of a stack: C zc apart, T n^2 (contiguous).
// trsm_leaf:  B = alpha * A^-1 B for an n x n triangle A (`lower` else upper; unit: a diagonal of
//             ones, not read; cj: A read conjugated) and nrhs right-hand sides, in place (n <=
//             TRSM_LEAF: the diagonal blocks of trsm's recursion). 1-D blocks of TRSM_THREADS, one
//             thread per column v of B running the substitution down (lower) or up (upper) the column;
//             the block's threads read the same A(i, j) at once (one broadcast load), B(., v) stays in
//             the thread's own column, so no barrier. grid.x = batch (A and B zA, zB apart), grid.y
//             grid-strides over the columns. trsm runs it where inverting the blocks would not pay
//             (a triangle of one block, or few right-hand sides: gpublas/blas/blas3_tri.py says the rule).
// trtri_blocks: W_d = inv(A_dd) for every diagonal block A_dd = A(d L : d L + r, d L : d L + r) of an n x n
//             triangle A (`lower` else upper, unit, cj as trsm_leaf; L = leaf <= TRSM_LEAF, r = min(L,
//             n - d L)), so that trsm's diagonal solves are GEMMs. W is (batch, nb, L, L) contiguous: W_d
//             in the top-left r x r of its L x L slot, the other triangle written as zeros. One block of
//             TRSM_LEAF threads per (matrix, diagonal block), grid (batch, nb): the block is staged once
//             in shared memory as a packed lower triangle (an upper one with its row and column order
//             reversed, which makes it lower: one substitution for both), one barrier, then thread j
//             computes column j of the inverse by forward substitution, T x = e_j, its x in W's column
//             (its own writes read back: no barrier). The threads walk the rows i together, thread j
//             summing T(i, u) x_u over u = j .. i-1: T is read at consecutive addresses by consecutive
//             threads (no bank conflict), x_u from W leaf + 1 elements apart across threads (a diagonal
//             of the slot, which stays in L1: 16 KB for float); 2 partial sums shorten the add chain.
#include "common.cuh"

#define TRI_BLOCK_X 32
#define TRI_BLOCK_Y 8
#define TRSM_LEAF 64
#define TRSM_THREADS 128

__device__ __forceinline__ bool in_triangle(int i, int j, int lower) { return lower ? j <= i : j >= i; }

extern "C" __global__ void tri_fill(int n, const real* __restrict__ A, long long sar, long long sac, long long za,
                                    int lower, int mirror, int unit, int cj, real* __restrict__ D) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    A += blockIdx.z * za;
    D += (long long)blockIdx.z * n * n;
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
                                      long long scr, long long scc, long long zc, int lower) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    C += blockIdx.z * zc;
    if (T) T += (long long)blockIdx.z * n * n;
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

// The packed lower triangle T of trtri_blocks: T(i, u), u <= i, at i (i + 1) / 2 + u.
__device__ __forceinline__ int packed(int i, int u) { return i * (i + 1) / 2 + u; }

extern "C" __global__ void trtri_blocks(int n, int leaf, const real* __restrict__ A, long long sar, long long sac,
                                        long long za, real* __restrict__ W, int lower, int unit, int cj) {
    __shared__ real T[TRSM_LEAF * (TRSM_LEAF + 1) / 2];
    const int d = blockIdx.y, r = min(leaf, n - d * leaf);
    A += blockIdx.x * za + (long long)d * leaf * (sar + sac);                   // A_dd's corner
    W += ((long long)blockIdx.x * gridDim.y + d) * leaf * leaf;                 // its slot, leaf x leaf
    // T(i, u) = A_dd(i, u) (lower) or A_dd(r-1-i, r-1-u) (upper); element (p, q) of A_dd or W_d is
    // canonical (i, u) = (p, q), or (r-1-p, r-1-q) for an upper triangle
    const long long rev = lower ? 0 : r - 1, sgn = lower ? 1 : -1;
    for (int i = 0; i < r; ++i)
        for (int u = threadIdx.x; u <= i; u += blockDim.x)
            T[packed(i, u)] = unit && u == i ? (real)1 : conj_if(A[(rev + sgn * i) * sar + (rev + sgn * u) * sac], cj);
    __syncthreads();
    const int j = threadIdx.x;
    if (j >= r) return;
    real* __restrict__ w = W + rev * leaf + rev;                                // canonical (i, j) of W_d at
    const long long wr = sgn * leaf, wc = sgn;                                  // w[i * wr + j * wc]
    for (int i = 0; i < r; ++i) {   // every thread at row i together: T(i, j + u') at consecutive addresses
        if (i < j) {
            w[i * wr + j * wc] = (real)0;                                       // x_i = 0 above the diagonal
            continue;
        }
        real s0 = i == j ? (real)1 : (real)0, s1 = (real)0;                     // (e_j - T(i, j:i-1) x)_i
        int u = j;
        for (; u + 1 < i; u += 2) {
            s0 -= T[packed(i, u)] * w[u * wr + j * wc];
            s1 -= T[packed(i, u + 1)] * w[(u + 1) * wr + j * wc];
        }
        if (u < i) s0 -= T[packed(i, u)] * w[u * wr + j * wc];
        const real s = s0 + s1;
        w[i * wr + j * wc] = unit ? s : s / T[packed(i, i)];
    }
}
