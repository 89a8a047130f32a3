// blas1.cu: level-1 BLAS on contiguous vectors of `real` (-Dreal=float or -Dreal=double).
//
// Element-wise kernels: 1-D blocks (256), grid-stride loop, one element per thread per step.
//   axpy_real:    y[i] += alpha * x[i]
//   scal_real:    x[i] *= alpha                      (plain product: NaN * 0 stays NaN, as x * alpha)
//   scal_beta:    x[i] = beta == 0 ? 0 : beta * x[i]  (BLAS output scaling: beta == 0 never reads x)
//   copy_real:    y[i] = x[i]
//   swap_real:    x[i] <-> y[i]
// Reductions: two passes. Pass 1 (<op>_partial): 1-D blocks of 256 threads, grid-stride loop, each
// thread accumulates its elements in registers, then a block reduction (shuffles within each warp,
// one value per warp through shared memory and a barrier, shuffles again in warp 0) writes one partial
// per block. Pass 2 (<op>_final): one block of 256 threads reduces the partials the same way and writes
// the result. Every thread's sequence of elements is fixed by its index, so the result does not depend
// on the order threads or blocks run in.
//   dot_partial / sum_final:    sum x[i] * y[i]
//   asum_partial / sum_final:   sum |x[i]|
//   amax_partial / amax_final:  max |x[i]| (NaN wins: a NaN anywhere gives NaN)
//   nrm2_partial / nrm2_final:  sqrt(sum x[i]^2) computed as scale * sqrt(sum (x[i]/scale)^2) with
//                               scale = max |x[i]| read from device memory (amax first): no overflow
//                               or underflow of the squares.
//   iamax_partial / iamax_final: first index of max |x[i]| (value and index pairs, ties to the lower index)
#include "common.cuh"

#define BLAS1_BLOCK 256

__device__ __forceinline__ real abs_real(real v) { return v < (real)0 ? -v : v; }

// ---------------------------------------------------------------------------------------------------
// Element-wise kernels
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void axpy_real(long long n, real alpha, const real* __restrict__ x, real* __restrict__ y) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] += alpha * x[i];
}

extern "C" __global__ void scal_real(long long n, real alpha, real* __restrict__ x) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        x[i] *= alpha;
}

extern "C" __global__ void scal_beta(long long n, real beta, real* __restrict__ x) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        x[i] = beta == (real)0 ? (real)0 : beta * x[i];
}

extern "C" __global__ void copy_real(long long n, const real* __restrict__ x, real* __restrict__ y) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = x[i];
}

extern "C" __global__ void swap_real(long long n, real* __restrict__ x, real* __restrict__ y) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += step) {
        const real t = x[i];
        x[i] = y[i];
        y[i] = t;
    }
}

// ---------------------------------------------------------------------------------------------------
// Block reductions (every thread of the block must call them; the result is valid in thread 0)
// ---------------------------------------------------------------------------------------------------
struct SumOp {
    __device__ __forceinline__ real operator()(real a, real b) const { return a + b; }
};
struct MaxOp {  // NaN propagates: once either side is NaN the result is NaN
    __device__ __forceinline__ real operator()(real a, real b) const { return (a != a || a > b) ? a : b; }
};

template <class Op>
__device__ __forceinline__ real warp_reduce(real v, Op op) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

template <class Op>
__device__ __forceinline__ real block_reduce(real v, Op op, real identity) {
    __shared__ real warp_part[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
    v = warp_reduce(v, op);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    v = threadIdx.x < nwarps ? warp_part[threadIdx.x] : identity;
    if (warp == 0) v = warp_reduce(v, op);
    return v;
}

// (value, index) pair reduction for iamax: larger value wins, equal values go to the lower index.
__device__ __forceinline__ void argmax_combine(real& v, long long& i, real v2, long long i2) {
    if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
}

__device__ __forceinline__ void warp_argmax(real& v, long long& i) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        const real v2 = __shfl_down_sync(0xffffffffu, v, offset);
        const long long i2 = __shfl_down_sync(0xffffffffu, i, offset);
        argmax_combine(v, i, v2, i2);
    }
}

__device__ __forceinline__ void block_argmax(real& v, long long& i) {
    __shared__ real part_v[32];
    __shared__ long long part_i[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
    warp_argmax(v, i);
    if (lane == 0) { part_v[warp] = v; part_i[warp] = i; }
    __syncthreads();
    v = (real)-1;
    i = 0x7fffffffffffffffLL;
    if (threadIdx.x < nwarps) { v = part_v[threadIdx.x]; i = part_i[threadIdx.x]; }
    if (warp == 0) warp_argmax(v, i);
}

// ---------------------------------------------------------------------------------------------------
// Pass 1: one partial per block
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void dot_partial(long long n, const real* __restrict__ x, const real* __restrict__ y,
                                       real* __restrict__ partial) {
    real s = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        s += x[i] * y[i];
    s = block_reduce(s, SumOp(), (real)0);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" __global__ void asum_partial(long long n, const real* __restrict__ x, real* __restrict__ partial) {
    real s = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        s += abs_real(x[i]);
    s = block_reduce(s, SumOp(), (real)0);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" __global__ void amax_partial(long long n, const real* __restrict__ x, real* __restrict__ partial) {
    real m = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        m = MaxOp()(abs_real(x[i]), m);
    m = block_reduce(m, MaxOp(), (real)0);
    if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

// scale points at max |x| (one element, written by amax_final): sum of (x[i]/scale)^2.
extern "C" __global__ void nrm2_partial(long long n, const real* __restrict__ x, const real* __restrict__ scale,
                                        real* __restrict__ partial) {
    const real m = *scale;
    real s = 0;
    const long long step = (long long)gridDim.x * blockDim.x;
    if (m > (real)0 && m - m == (real)0)  // finite and nonzero; otherwise nrm2_final decides alone
        for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += step) {
            const real v = x[i] / m;
            s += v * v;
        }
    s = block_reduce(s, SumOp(), (real)0);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" __global__ void iamax_partial(long long n, const real* __restrict__ x, real* __restrict__ part_v,
                                         long long* __restrict__ part_i) {
    real v = (real)-1;
    long long idx = 0x7fffffffffffffffLL;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        argmax_combine(v, idx, abs_real(x[i]), i);  // i grows along the loop: ties keep the first
    block_argmax(v, idx);
    if (threadIdx.x == 0) { part_v[blockIdx.x] = v; part_i[blockIdx.x] = idx; }
}

// ---------------------------------------------------------------------------------------------------
// Pass 2: one block reduces the partials
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void sum_final(int nparts, const real* __restrict__ partial, real* __restrict__ out) {
    real s = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += partial[i];
    s = block_reduce(s, SumOp(), (real)0);
    if (threadIdx.x == 0) out[0] = s;
}

extern "C" __global__ void amax_final(int nparts, const real* __restrict__ partial, real* __restrict__ out) {
    real m = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) m = MaxOp()(partial[i], m);
    m = block_reduce(m, MaxOp(), (real)0);
    if (threadIdx.x == 0) out[0] = m;
}

// out = scale * sqrt(sum of partials); scale 0 gives 0, Inf gives Inf, NaN gives NaN.
extern "C" __global__ void nrm2_final(int nparts, const real* __restrict__ partial, const real* __restrict__ scale,
                                      real* __restrict__ out) {
    real s = 0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) s += partial[i];
    s = block_reduce(s, SumOp(), (real)0);
    if (threadIdx.x == 0) {
        const real m = *scale;
        out[0] = (m > (real)0 && m - m == (real)0) ? m * sqrt(s) : m;
    }
}

extern "C" __global__ void iamax_final(int nparts, const real* __restrict__ part_v,
                                       const long long* __restrict__ part_i, long long* __restrict__ out) {
    real v = (real)-1;
    long long idx = 0x7fffffffffffffffLL;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x) argmax_combine(v, idx, part_v[i], part_i[i]);
    block_argmax(v, idx);
    if (threadIdx.x == 0) out[0] = idx;
}
