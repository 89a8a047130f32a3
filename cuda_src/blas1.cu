// blas1.cu: level-1 BLAS on strided vectors of `real` (-Dreal=float, double, cfloat or cdouble: axpy, scal,
// copy, swap, dot; gpublas/blas/blas1.py runs asum and nrm2 of complex vectors on their parts): element i of x
// is x[i * incx] (cuBLAS's incx, from the element at the pointer: a negative inc walks a reversed view;
// x[i] below stands for it). scal_beta takes contiguous outputs only.
//
// Element-wise kernels: 1-D blocks (256), grid-stride loop, one element per thread per step.
//   axpy_real:    y[i] += alpha * x[i]
//   scal_real:    x[i] *= alpha                      (plain product: NaN * 0 stays NaN, as x * alpha)
//   scal_beta:    x[i] = beta == 0 ? 0 : beta * x[i]  (BLAS output scaling: beta == 0 never reads x)
//   copy_real:    y[i] = x[i]
//   swap_real:    x[i] <-> y[i]
//   rotm_real:    (x[i], y[i]) = (h11 x[i] + h12 y[i], h21 x[i] + h22 y[i]): any 2x2 H on the plane (x, y):
//                 rot's rotation (h11 = h22 = c, h12 = s, h21 = -s) and rotm's modified Givens H (the
//                 launcher expands rotmg's flag into the four entries)
// Reductions: two passes. Pass 1 (<op>_partial): 1-D blocks of 256 threads, grid-stride loop, each
// thread accumulates its elements in registers, then a block reduction (shuffles within each warp,
// one value per warp through shared memory and a barrier, shuffles again in warp 0) writes one partial
// per block. Pass 2 (<op>_final): one block of 256 threads reduces the partials the same way and writes
// the result. The block reductions are common.cuh's. Every thread's sequence of elements is fixed by its index, so the result does not depend
// on the order threads or blocks run in.
//   dot_partial / sum_final:    sum x[i] * y[i], or conj(x[i]) * y[i] (dotc)
//   asum_partial / sum_final:   sum |x[i]|
//   amax_partial / amax_final:  max |x[i]| (NaN wins: a NaN anywhere gives NaN)
//   nrm2_partial / nrm2_final:  sqrt(sum x[i]^2) computed as scale * sqrt(sum (x[i]/scale)^2) with
//                               scale = max |x[i]| read from device memory (amax first): no overflow
//                               or underflow of the squares.
//   iamax_partial / iamax_final: first index of max |x[i]| (value and index pairs, ties to the lower index;
//                               complex x: max |re| + |im|, cuBLAS's icamax / izamax)
//   iamin_partial / iamin_final: first index of min |x[i]| (the same with the order reversed; NaN never
//                               wins, so an all-NaN vector leaves the index unset: the launcher says 0)
// On the simulator each thread of the element-wise kernels and of pass 1 walks a run of about a thousand
// elements (gpublas/runtime/geometry.py's flat_geometry, blas1.py's _parts), so a launch's blocks go over the
// cores however few threads they have:
// sim spread: axpy_real scal_real scal_beta copy_real swap_real rotm_real
// sim spread: dot_partial asum_partial amax_partial nrm2_partial iamax_partial iamin_partial
#include "common.cuh"

#define BLAS1_BLOCK 256

// |v|; for a complex v cuBLAS's |re| + |im| (icamax's magnitude, common.cuh's abs1) as a complex number with
// imaginary part 0, so that the value comparisons below (lexicographic for complex) order it as a real number
template <class T> __device__ __forceinline__ T abs_real(T v) { return abs1(v); }
template <class R> __device__ __forceinline__ gcomplex<R> abs_real(gcomplex<R> v) { return gcomplex<R>(abs1(v), (R)0); }
template <class T> __device__ __forceinline__ T square(T v) { return v * v; }

// ---------------------------------------------------------------------------------------------------
// Element-wise kernels
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void axpy_real(long long n, real alpha, const real* __restrict__ x, long long incx,
                                     real* __restrict__ y, long long incy) {
    UNIT_STRIDES(incx == 1 && incy == 1,
        GRID_STRIDE_LOOP(long long, i, n)
            y[i * incy] += alpha * x[i * incx];);
}

extern "C" __global__ void scal_real(long long n, real alpha, real* __restrict__ x, long long incx) {
    UNIT_STRIDES(incx == 1,
        GRID_STRIDE_LOOP(long long, i, n)
            x[i * incx] *= alpha;);
}

extern "C" __global__ void scal_beta(long long n, real beta, real* __restrict__ x) {
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] = beta == (real)0 ? (real)0 : beta * x[i];
}

extern "C" __global__ void copy_real(long long n, const real* __restrict__ x, long long incx, real* __restrict__ y,
                                     long long incy) {
    UNIT_STRIDES(incx == 1 && incy == 1,
        GRID_STRIDE_LOOP(long long, i, n)
            y[i * incy] = x[i * incx];);
}

extern "C" __global__ void swap_real(long long n, real* __restrict__ x, long long incx, real* __restrict__ y,
                                     long long incy) {
    UNIT_STRIDES(incx == 1 && incy == 1,
        GRID_STRIDE_LOOP(long long, i, n) {
            const real t = x[i * incx];
            x[i * incx] = y[i * incy];
            y[i * incy] = t;
        });
}

extern "C" __global__ void rotm_real(long long n, real* __restrict__ x, long long incx, real* __restrict__ y,
                                     long long incy, real h11, real h21, real h12, real h22) {
    UNIT_STRIDES(incx == 1 && incy == 1,
        GRID_STRIDE_LOOP(long long, i, n) {
            const real xi = x[i * incx], yi = y[i * incy];
            x[i * incx] = h11 * xi + h12 * yi;
            y[i * incy] = h21 * xi + h22 * yi;
        });
}

// (value, index) pairs for iamax / iamin: the larger (smaller) value wins, equal values go to the lower index.
struct AbsMaxFirst {
    static __device__ __forceinline__ real none() { return (real)-1; }
    __device__ __forceinline__ bool operator()(real bv, long long bi, real av, long long ai) const {
        return bv > av || (bv == av && bi < ai);
    }
};
struct AbsMinFirst {
    static __device__ __forceinline__ real none() { return (real)INFINITY; }
    __device__ __forceinline__ bool operator()(real bv, long long bi, real av, long long ai) const {
        return bv < av || (bv == av && bi < ai);
    }
};
template <class Better>
__device__ __forceinline__ void arg_combine(real& v, long long& i, real v2, long long i2) {
    if (Better()(v2, i2, v, i)) { v = v2; i = i2; }
}

// ---------------------------------------------------------------------------------------------------
// Pass 1: one partial per block
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void dot_partial(long long n, const real* __restrict__ x, long long incx,
                                       const real* __restrict__ y, long long incy, int conjugate,
                                       real* __restrict__ partial) {
    real s = 0;
    UNIT_STRIDES(incx == 1 && incy == 1,
        GRID_STRIDE_FOLD(long long, i, n, s, SumOp<real>(), (conjugate ? conj(x[i * incx]) : x[i * incx]) * y[i * incy]););
    s = block_reduce(s, SumOp<real>(), (real)0);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" __global__ void asum_partial(long long n, const real* __restrict__ x, long long incx,
                                        real* __restrict__ partial) {
    real s = 0;
    UNIT_STRIDES(incx == 1, GRID_STRIDE_FOLD(long long, i, n, s, SumOp<real>(), abs_real(x[i * incx])););
    s = block_reduce(s, SumOp<real>(), (real)0);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" __global__ void amax_partial(long long n, const real* __restrict__ x, long long incx,
                                        real* __restrict__ partial) {
    real m = 0;
    UNIT_STRIDES(incx == 1, GRID_STRIDE_FOLD(long long, i, n, m, MaxOp<real>(), abs_real(x[i * incx])););
    m = block_reduce(m, MaxOp<real>(), (real)0);
    if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

// scale points at max |x| (one element, written by amax_final): sum of (x[i]/scale)^2.
extern "C" __global__ void nrm2_partial(long long n, const real* __restrict__ x, long long incx,
                                        const real* __restrict__ scale, real* __restrict__ partial) {
    const real m = *scale;
    real s = 0;
    if (m > (real)0 && m - m == (real)0)  // finite and nonzero; otherwise nrm2_final decides alone
        UNIT_STRIDES(incx == 1, GRID_STRIDE_FOLD(long long, i, n, s, SumOp<real>(), square(x[i * incx] / m)););
    s = block_reduce(s, SumOp<real>(), (real)0);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

template <class Better>  // Better comes as a named argument: the sim fission pass rewrites no explicit template
                         // arguments, and an unnamed parameter's type would be renamed as if it were the name
__device__ void arg_partial(long long n, const real* __restrict__ x, long long incx, real* __restrict__ part_v,
                            long long* __restrict__ part_i, Better better) {
    real v = Better::none();
    long long idx = 0x7fffffffffffffffLL;
    GRID_STRIDE_LOOP(long long, i, n)
        arg_combine<Better>(v, idx, abs_real(x[i * incx]), i);  // i grows along the loop: ties keep the first
    block_reduce_pair(v, idx, better);
    if (threadIdx.x == 0) { part_v[blockIdx.x] = v; part_i[blockIdx.x] = idx; }
}

extern "C" __global__ void iamax_partial(long long n, const real* __restrict__ x, long long incx,
                                         real* __restrict__ part_v, long long* __restrict__ part_i) {
    arg_partial(n, x, incx, part_v, part_i, AbsMaxFirst());
}

extern "C" __global__ void iamin_partial(long long n, const real* __restrict__ x, long long incx,
                                         real* __restrict__ part_v, long long* __restrict__ part_i) {
    arg_partial(n, x, incx, part_v, part_i, AbsMinFirst());
}

// ---------------------------------------------------------------------------------------------------
// Pass 2: one block reduces the partials
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void sum_final(int nparts, const real* __restrict__ partial, real* __restrict__ out) {
    real s = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += partial[i];
    s = block_reduce(s, SumOp<real>(), (real)0);
    if (threadIdx.x == 0) out[0] = s;
}

extern "C" __global__ void amax_final(int nparts, const real* __restrict__ partial, real* __restrict__ out) {
    real m = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) m = MaxOp<real>()(partial[i], m);
    m = block_reduce(m, MaxOp<real>(), (real)0);
    if (threadIdx.x == 0) out[0] = m;
}

// out = scale * sqrt(sum of partials); scale 0 gives 0, Inf gives Inf, NaN gives NaN.
extern "C" __global__ void nrm2_final(int nparts, const real* __restrict__ partial, const real* __restrict__ scale,
                                      real* __restrict__ out) {
    real s = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += partial[i];
    s = block_reduce(s, SumOp<real>(), (real)0);
    if (threadIdx.x == 0) {
        const real m = *scale;
        out[0] = (m > (real)0 && m - m == (real)0) ? m * ew_sqrt(s) : m;
    }
}

template <class Better>  // Better comes as a named argument: the sim fission pass rewrites no explicit template
                         // arguments, and an unnamed parameter's type would be renamed as if it were the name
__device__ void arg_final(int nparts, const real* __restrict__ part_v, const long long* __restrict__ part_i,
                          long long* __restrict__ out, Better better) {
    real v = Better::none();
    long long idx = 0x7fffffffffffffffLL;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) arg_combine<Better>(v, idx, part_v[i], part_i[i]);
    block_reduce_pair(v, idx, better);
    if (threadIdx.x == 0) out[0] = idx;
}

extern "C" __global__ void iamax_final(int nparts, const real* __restrict__ part_v,
                                       const long long* __restrict__ part_i, long long* __restrict__ out) {
    arg_final(nparts, part_v, part_i, out, AbsMaxFirst());
}

extern "C" __global__ void iamin_final(int nparts, const real* __restrict__ part_v,
                                       const long long* __restrict__ part_i, long long* __restrict__ out) {
    arg_final(nparts, part_v, part_i, out, AbsMinFirst());
}
