// geam.cu: cuBLAS's matrix extensions that are elementwise over an M x N result C (contiguous, rows ldc
// apart); the inputs are strided views: element (i, j) of X is X[i * sxr + j * sxc] (strides in
// elements, any sign: a transposed operand is its view with the strides swapped, no copy).
// Element arithmetic is `real`'s operators only, so a complex `real` is an instantiation.
//
// geam: C = alpha A + beta B, A read conjugated where cja = 1 and B where cjb = 1 (cuBLAS's CUBLAS_OP_C:
//       the transposed view read conjugated; common.cuh's conj leaves a real number as it is);
//       alpha == 0 never reads A, beta == 0 never reads B (either pointer may be null then). Block 32x8: one thread per C(i, j), threadIdx.x along j (coalesced writes),
//       grid-stride over the rows.
// dgmm: C = diag(x) A (left = 1: row i scaled by x[i * incx]) or A diag(x) (left = 0: column j by
//       x[j * incx]). Same mapping as geam.
#include "common.cuh"

#define GEAM_BLOCK_X 32
#define GEAM_BLOCK_Y 8

extern "C" __global__ void geam(int M, int N, real alpha, const real* __restrict__ A, long long sar, long long sac,
                                int cja, real beta, const real* __restrict__ B, long long sbr, long long sbc, int cjb,
                                real* __restrict__ C, long long ldc) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < M; i += gridDim.y * blockDim.y) {
        real v = (real)0;
        if (alpha != (real)0) v = alpha * conj_if(A[i * sar + j * sac], cja);
        if (beta != (real)0) v = v + beta * conj_if(B[i * sbr + j * sbc], cjb);
        C[i * ldc + j] = v;
    }
}

extern "C" __global__ void dgmm(int M, int N, const real* __restrict__ A, long long sar, long long sac,
                                const real* __restrict__ x, long long incx, int left, real* __restrict__ C,
                                long long ldc) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    const real xj = left ? (real)0 : x[j * incx];
    for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < M; i += gridDim.y * blockDim.y)
        C[i * ldc + j] = A[i * sar + j * sac] * (left ? x[i * incx] : xj);
}
