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
//   nrm2_partial / nrm2_final:  sqrt(sum x[i]^2) in one pass: float squares summed in double; double
//                               ones as they are, or where that sum leaves the range by Blue's three scaled
//                               sums (the reference dnrm2's): no overflow or underflow of the squares.
//   iamax_partial / iamax_final: first index of max |x[i]| (value and index pairs, ties to the lower index;
//                               complex x: max |re| + |im|, cuBLAS's icamax / izamax)
//   iamin_partial / iamin_final: first index of min |x[i]| (the same with the order reversed; NaN never
//                               wins, so an all-NaN vector leaves the index unset: the launcher says 0)
// On the simulator each thread of the element-wise kernels and of pass 1 walks a run of about a thousand
// elements (gpublas/runtime/geometry.py's flat_geometry, blas1.py's _parts), so a launch's blocks go over the
// cores however few threads they have:
// sim spread: axpy_real scal_real scal_beta copy_real swap_real rotm_real
// sim spread: dot_partial asum_partial amax_partial nrm2_partial iamax_partial iamin_partial
// The simulator compiles the family in five units (gpublas/runtime/source.py's sim_units), so that a first axpy
// does not wait for g++ to optimize every reduction. g++ CPU with the precompiled header, float: the whole family
// in one unit 12.7 s; the units below 0.8 (element-wise), 3.4 (dot, asum), 4.7 (nrm2), 1.8 (amax) and 5.2 s
// (iamax, iamin: the rest), 15.8 s in all.
// sim unit: axpy_real scal_real scal_beta copy_real swap_real rotm_real
// sim unit: dot_partial asum_partial sum_final
// sim unit: nrm2_partial nrm2_final
// sim unit: amax_partial amax_final
#include "common.cuh"

#define BLAS1_BLOCK 256

// |v|; for a complex v cuBLAS's |re| + |im| (icamax's magnitude, common.cuh's abs1) as a complex number with
// imaginary part 0, so that the value comparisons below (lexicographic for complex) order it as a real number
template <class T> __device__ __forceinline__ T abs_real(T v) { return abs1(v); }
template <class R> __device__ __forceinline__ gcomplex<R> abs_real(gcomplex<R> v) { return gcomplex<R>(abs1(v), (R)0); }

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
#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
    if (incx == 1) {  // the simulator's unit-stride run unrolled 4 times: g++'s plain in-place vector loop ran at
        long long at, end;  // half NumPy's speed (2^18 floats 56 -> 32 us; copy, axpy, x + y gained nothing so)
        if (sim_thread_run(n, at, end)) {
#pragma GCC unroll 4
            for (long long i = at; i < end; ++i) x[i] *= alpha;
        }
        return;
    }
#endif
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
    template <class V> static __device__ __forceinline__ V pick(V a, V b) { return a > b ? a : b; }  // b on ties
    __device__ __forceinline__ bool operator()(real bv, long long bi, real av, long long ai) const {
        return bv > av || (bv == av && bi < ai);
    }
};
struct AbsMinFirst {
    static __device__ __forceinline__ real none() { return (real)INFINITY; }
    template <class V> static __device__ __forceinline__ V pick(V a, V b) { return a < b ? a : b; }
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

// nrm2 in one pass. Every square of a float fits a double: float vectors sum x^2 in double, as they are. A
// double's square overflows above 2^512 and drops bits below 2^-511: a double vector sums x^2 as it is too,
// which is exact-range unless that sum is not finite or below 2^-900 (where squares lost to underflow would
// show); then the thread walks its elements again with Blue's algorithm (the reference BLAS's dnrm2 since
// LAPACK 3.10): each square goes to one of three sums, |x| below 2^-511 scaled up by 2^537, above 2^486 down
// by 2^-538, the rest as it is (a NaN lands there), and nrm2_final combines the three. Partials are doubles:
// the block's (small, middle, big) sums at [block], [grid + block], [2 grid + block].
constexpr double NRM2_TSML = 0x1p-511, NRM2_TBIG = 0x1p486, NRM2_SSML = 0x1p537, NRM2_SBIG = 0x1p-538;
__device__ __forceinline__ double nrm2_square(float v) { return (double)v * (double)v; }
__device__ __forceinline__ double nrm2_square(double v) { return v * v; }
template <class R> __device__ __forceinline__ double nrm2_square(gcomplex<R> v) { return nrm2_square(v.x) + nrm2_square(v.y); }
// Whether x's plain sum of squares may leave a double's range (double and complex double vectors only).
template <class T> struct Nrm2Blue { static constexpr bool value = false; };
template <> struct Nrm2Blue<double> { static constexpr bool value = true; };
template <> struct Nrm2Blue<gcomplex<double>> { static constexpr bool value = true; };
__device__ __forceinline__ void nrm2_blue(double& sml, double& med, double& big, double v) {
    const double a = v < 0 ? -v : v;
    if (a > NRM2_TBIG) big += (a * NRM2_SBIG) * (a * NRM2_SBIG);
    else if (a < NRM2_TSML) sml += (a * NRM2_SSML) * (a * NRM2_SSML);
    else med += a * a;
}
__device__ __forceinline__ void nrm2_blue(double& sml, double& med, double& big, float v) {
    nrm2_blue(sml, med, big, (double)v);
}
template <class R> __device__ __forceinline__ void nrm2_blue(double& sml, double& med, double& big, gcomplex<R> v) {
    nrm2_blue(sml, med, big, (double)v.x);
    nrm2_blue(sml, med, big, (double)v.y);
}

extern "C" __global__ void nrm2_partial(long long n, const real* __restrict__ x, long long incx,
                                        double* __restrict__ partial) {
    double med = 0, sml = 0, big = 0;
    UNIT_STRIDES(incx == 1, GRID_STRIDE_FOLD(long long, i, n, med, SumOp<double>(), nrm2_square(x[i * incx])););
    if (Nrm2Blue<real>::value && !(med >= 0x1p-900 && med <= 0x1.fffffffffffffp1023)) {
        med = 0;  // not finite, or tiny: the thread's elements again, each square in the sum its size takes
        GRID_STRIDE_LOOP(long long, i, n) nrm2_blue(sml, med, big, x[i * incx]);
    }
    med = block_reduce(med, SumOp<double>(), 0.0);
    __syncthreads();  // block_reduce's shared memory, read by thread 0, is written again below
    sml = block_reduce(sml, SumOp<double>(), 0.0);
    __syncthreads();
    big = block_reduce(big, SumOp<double>(), 0.0);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = sml;
        partial[gridDim.x + blockIdx.x] = med;
        partial[2 * gridDim.x + blockIdx.x] = big;
    }
}

#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
// The simulator's form of a thread's (value, index) loop over its run, for float and double at unit stride: in
// 32-byte vectors, each lane keeps its best |x| and the offset where it first held it (a compare and two blends
// an element; g++ vectorizes neither the pairs' loop nor common.cuh's lane arrays for a max: 2^22 floats were
// 0.25x NumPy's argmax), then the lanes are combined, the lower index winning ties. The same answer as the
// pairs' loop: ties go to the first, NaN never wins (`>` and `<` with a NaN are false), and a run whose best
// stays none() (all NaN; for iamin all infinite) leaves (v, idx) unset. Other types and strides take the
// pairs' loop.
template <class Better, class R>  // R: real, as a template parameter so that `if constexpr` drops the vectors
__device__ __forceinline__ void arg_run(long long n, const R* __restrict__ x, long long incx, R& v,
                                        long long& idx) {
    long long begin, end;
    sim_thread_run(n, begin, end);
    if constexpr (std::is_floating_point<R>::value) {
        typedef typename std::conditional<sizeof(R) == 4, int, long long>::type offset;  // a lane per mask lane
        if (incx == 1 && end - begin < 0x7fffffffLL) {  // offsets in the run fit the mask lanes
            constexpr int W = 32 / sizeof(R);
            typedef R vec __attribute__((vector_size(32)));
            typedef offset vec_at __attribute__((vector_size(32)));
            vec best[2] = {(vec){} + Better::none(), (vec){} + Better::none()};  // two chains: half the latency
            vec_at best_at[2] = {}, at_v = {};
            long long at = begin;
            for (; at + 2 * W <= end; at += 2 * W, at_v += 2 * W)
                for (int h = 0; h < 2; ++h) {
                    vec a;
                    memcpy(&a, x + at + h * W, sizeof a);
                    a = a < 0 ? -a : a;
                    const auto better = Better::pick(a, best[h]) != best[h];  // strictly better (NaN: false)
                    best[h] = better ? a : best[h];
                    best_at[h] = better ? at_v : best_at[h];
                }
            for (int h = 0; h < 2; ++h)
                for (int l = 0; l < W; ++l)
                    if (best[h][l] != Better::none())
                        arg_combine<Better>(v, idx, best[h][l], begin + best_at[h][l] + h * W + l);
            for (; at < end; ++at) arg_combine<Better>(v, idx, abs_real(x[at]), at);
            return;
        }
    }
    for (long long i = begin; i < end; ++i) arg_combine<Better>(v, idx, abs_real(x[i * incx]), i);
}
#else
template <class Better>
__device__ __forceinline__ void arg_run(long long n, const real* __restrict__ x, long long incx, real& v,
                                        long long& idx) {
    GRID_STRIDE_LOOP(long long, i, n)
        arg_combine<Better>(v, idx, abs_real(x[i * incx]), i);  // i grows along the loop: ties keep the first
}
#endif

template <class Better>  // Better comes as a named argument: the sim fission pass rewrites no explicit template
                         // arguments, and an unnamed parameter's type would be renamed as if it were the name
__device__ void arg_partial(long long n, const real* __restrict__ x, long long incx, real* __restrict__ part_v,
                            long long* __restrict__ part_i, Better better) {
    real v = Better::none();
    long long idx = 0x7fffffffffffffffLL;
    arg_run<Better>(n, x, incx, v, idx);
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

// out = the norm from nparts blocks' (small, middle, big) sums (nrm2_partial), combined as the reference dnrm2
// combines them: the big sum with the middle one scaled down; else the small one with the middle one; else the
// middle one. NaN and Inf come through the sums (a NaN in the middle sum, an Inf in the big one).
extern "C" __global__ void nrm2_final(int nparts, const double* __restrict__ partial, real* __restrict__ out) {
    double sml = 0, med = 0, big = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) {
        sml += partial[i];
        med += partial[nparts + i];
        big += partial[2 * nparts + i];
    }
    med = block_reduce(med, SumOp<double>(), 0.0);
    __syncthreads();
    sml = block_reduce(sml, SumOp<double>(), 0.0);
    __syncthreads();
    big = block_reduce(big, SumOp<double>(), 0.0);
    if (threadIdx.x == 0) {
        double scale = 1, sum = med;
        if (big > 0) {
            if (med > 0 || med != med) big += (med * NRM2_SBIG) * NRM2_SBIG;
            scale = 1 / NRM2_SBIG;
            sum = big;
        } else if (sml > 0) {
            if (med > 0 || med != med) {
                const double ymed = sqrt(med), ysml = sqrt(sml) / NRM2_SSML;
                const double ymin = ysml > ymed ? ymed : ysml, ymax = ysml > ymed ? ysml : ymed;
                sum = ymax * ymax * (1 + (ymin / ymax) * (ymin / ymax));
            } else {
                scale = 1 / NRM2_SSML;
                sum = sml;
            }
        }
        out[0] = (real)(scale * sqrt(sum));
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
