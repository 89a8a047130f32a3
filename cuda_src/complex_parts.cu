// complex_parts.cu: complex GEMM's elementwise passes around the real GEMMs (gpublas/blas/gemm_complex.py);
// -Dreal=float for complex64 operands, double for complex128. A complex array comes as its `real*`
// (cuComplex's layout: element e's real part at 2e, its imaginary part at 2e + 1) with its strides counted
// in reals (twice the complex strides; any sign, so op(x) = x.T is the view with its strides swapped).
// An operand is a stack of `batch` M x N matrices (2-D: batch 1).
//
// complex_split:   up to four real planes of X in one pass over it: plane p, at offset o_p (none when
//                  o_p < 0), gets cr_p re + ci_p im of each element (an inf or NaN in one part reaches
//                  every plane, as it reaches both parts of a complex product). Element (b, i, j)'s value
//                  for plane p goes to O[b * obs + i * ldo + j * ocs + o_p]. Coefficients of 0 and +-1
//                  give the parts, a conjugate's negated imaginary part or 3M's sum Re + Im; those of a
//                  complex scalar alpha the parts of alpha x (the real 2x2 blocks of the 1M method).
// complex_combine: C = alpha (P + i Q) + beta C from real GEMM products T: element (b, i, j) of the
//                  first product is T[b * tbs + i * ldt + j * tcs], the others t1 and t2 further on.
//                  three_m = 0: P = T0, Q = T1; three_m = 1: P = T0 - T1, Q = T2 - T0 - T1 (T0 = Ar Br,
//                  T1 = Ai Bi, T2 = (Ar + Ai)(Br + Bi)). beta == 0 never reads C; a zero imaginary part of
//                  alpha or beta drops its terms.
//
// Both: grid-stride loops over matrices b (blockIdx.z), rows i (blockIdx.y, threadIdx.y) and columns j
// (blockIdx.x, threadIdx.x), so any launch shape covers any size. On a GPU the launcher's block is 32x8,
// a thread per column (reads and writes along rows coalesce) and row; on the simulator 1x8 with one
// block column, a thread per row walking all of it (a thread's call costs more than an element there).
#include "common.cuh"

#define PARTS_BLOCK_X 32
#define PARTS_BLOCK_Y 8

// c_re re + c_im im, without branches (twice as fast as skipping zero coefficients on the simulator);
// coefficients 0 and +-1 give the parts and their sums exactly.
__device__ __forceinline__ real plane_value(real re, real im, real c_re, real c_im) { return c_re * re + c_im * im; }

// (out_re, out_im) += (s_re + i s_im)(x_re + i x_im), a zero s_im dropping its terms.
__device__ __forceinline__ void scale_add(real& out_re, real& out_im, real s_re, real s_im, real x_re, real x_im) {
    out_re = out_re + s_re * x_re;
    out_im = out_im + s_re * x_im;
    if (s_im != (real)0) {
        out_re = out_re - s_im * x_im;
        out_im = out_im + s_im * x_re;
    }
}

extern "C" __global__ void complex_split(int M, int N, int batch, const real* __restrict__ X, long long sxb,
                                         long long sxr, long long sxc, real* __restrict__ O, long long obs,
                                         long long ldo, long long ocs, long long o0, real cr0, real ci0,
                                         long long o1, real cr1, real ci1, long long o2, real cr2, real ci2,
                                         long long o3, real cr3, real ci3) {
    for (long long b = blockIdx.z; b < batch; b += gridDim.z)
        for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < M; i += gridDim.y * blockDim.y)
            for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < N; j += gridDim.x * blockDim.x) {
                const real* x = X + b * sxb + i * sxr + j * sxc;
                const real re = x[0], im = x[1];
                real* o = O + b * obs + i * ldo + j * ocs;
                if (o0 >= 0) o[o0] = plane_value(re, im, cr0, ci0);
                if (o1 >= 0) o[o1] = plane_value(re, im, cr1, ci1);
                if (o2 >= 0) o[o2] = plane_value(re, im, cr2, ci2);
                if (o3 >= 0) o[o3] = plane_value(re, im, cr3, ci3);
            }
}

extern "C" __global__ void complex_combine(int M, int N, int batch, const real* __restrict__ T, long long tbs,
                                           long long ldt, long long tcs, long long t1, long long t2, int three_m,
                                           real alpha_re, real alpha_im, real beta_re, real beta_im,
                                           real* __restrict__ C, long long scb, long long scr, long long scc) {
    for (long long b = blockIdx.z; b < batch; b += gridDim.z)
        for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < M; i += gridDim.y * blockDim.y)
            for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < N; j += gridDim.x * blockDim.x) {
                const real* t = T + b * tbs + i * ldt + j * tcs;
                const real t_0 = t[0], t_1 = t[t1];
                const real p = three_m ? t_0 - t_1 : t_0, q = three_m ? t[t2] - t_0 - t_1 : t_1;
                real* c = C + b * scb + i * scr + j * scc;
                real re = (real)0, im = (real)0;
                if (beta_re != (real)0 || beta_im != (real)0) scale_add(re, im, beta_re, beta_im, c[0], c[1]);
                scale_add(re, im, alpha_re, alpha_im, p, q);
                c[0] = re;
                c[1] = im;
            }
}
