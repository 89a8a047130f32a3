// reduce.cu: reductions of `real` arrays (-Dreal=float or double), deterministic: every sum is taken
// in an order fixed by the launch shape alone (per-thread strided partials, then a shuffle tree inside
// each warp, then the warps' results through shared memory), never by the order threads happen to run.
// The array is seen as (rows, n) for a reduction over its last axis and as (outer, n, inner) otherwise.
//
// reduce_rows:    block 32..256 threads (x), block b reduces part (b % parts) of row (b / parts) of a
//                 (rows, n) array: each thread walks the part with stride blockDim.x, then a block
//                 reduce. With parts > 1 it writes partials and a second launch (parts = 1, with
//                 xidx = the partial indices) finishes them. op RED_SUM writes the sum times `scale`
//                 (1/n for a mean); RED_MAX / RED_MIN write the value and/or its first index.
// reduce_cols:    block 32x8: threadIdx.x walks inner (coalesced), threadIdx.y splits the reduced axis
//                 n with stride 8; the 8 partials per column meet in shared memory, combined in the
//                 fixed order y = 0..7. Block b covers 32 inner positions of outer index b / tiles.
// softmax_rows:   block 32..256 threads, one block per row: max, sum of exp(x - max) (two block
//                 reduces), then y = exp(x - max) / sum; stable for large logits.
// logsumexp_rows: as softmax_rows, writing max + log(sum of exp(x - max)) per row.
#include "common.cuh"

#define RED_SUM 0
#define RED_MAX 1
#define RED_MIN 2
#define NO_INDEX 0x7fffffff
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float red_exp(float x) { return expf(x); }
__device__ __forceinline__ double red_exp(double x) { return exp(x); }
__device__ __forceinline__ float red_log(float x) { return logf(x); }
__device__ __forceinline__ double red_log(double x) { return log(x); }

// Does candidate (bv, bi) beat the current (av, ai)? A NaN beats any number (NumPy's max, min,
// argmax and argmin all return the first NaN); equal values go to the smaller index.
__device__ __forceinline__ bool red_better(real bv, int bi, real av, int ai, bool is_max) {
    const bool an = av != av, bn = bv != bv;
    if (an || bn) return bn && (!an || bi < ai);
    if (bv == av) return bi < ai;
    return is_max ? bv > av : bv < av;
}

struct SumOp {
    __device__ __forceinline__ real operator()(real a, real b) const { return a + b; }
};
struct MaxOp {
    __device__ __forceinline__ real operator()(real a, real b) const { return (a != a || a > b) ? a : b; }
};

template <class Op>
__device__ __forceinline__ real warp_reduce(real v, Op op) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(FULL_MASK, v, o));
    return v;
}

// Every thread of the block gets op over all threads' v. s: 33 reals of shared memory. The block's
// thread count must be a multiple of 32 (every lane of every warp takes part in the shuffles).
template <class Op>
__device__ real block_allreduce(real v, Op op, real identity, real* s) {
    const int tid = threadIdx.x + threadIdx.y * blockDim.x;
    const int lane = tid & 31, warp = tid >> 5, nwarps = (blockDim.x * blockDim.y) >> 5;
    v = warp_reduce(v, op);
    if (lane == 0) s[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_reduce(lane < nwarps ? s[lane] : identity, op);
        if (lane == 0) s[32] = v;
    }
    __syncthreads();
    return s[32];  // the next call writes s[32] only after its first barrier, once everyone has read it
}

// (value, index) version for max/min/argmax/argmin; the result is valid in thread 0.
__device__ void block_reduce_pair(real& v, int& i, bool is_max, real* sv, int* si) {
    const int tid = threadIdx.x + threadIdx.y * blockDim.x;
    const int lane = tid & 31, warp = tid >> 5, nwarps = (blockDim.x * blockDim.y) >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        const real ov = __shfl_down_sync(FULL_MASK, v, o);
        const int oi = __shfl_down_sync(FULL_MASK, i, o);
        if (red_better(ov, oi, v, i, is_max)) { v = ov; i = oi; }
    }
    if (lane == 0) { sv[warp] = v; si[warp] = i; }
    __syncthreads();
    if (warp == 0) {
        v = lane < nwarps ? sv[lane] : sv[0];
        i = lane < nwarps ? si[lane] : si[0];
        for (int o = 16; o > 0; o >>= 1) {
            const real ov = __shfl_down_sync(FULL_MASK, v, o);
            const int oi = __shfl_down_sync(FULL_MASK, i, o);
            if (red_better(ov, oi, v, i, is_max)) { v = ov; i = oi; }
        }
    }
}

extern "C" __global__ void reduce_rows(const real* x, const int* xidx, real* val, int* idx, int op, long long n,
                                       int parts, real scale) {
    __shared__ real sv[33];
    __shared__ int si[32];
    const long long row = blockIdx.x / parts, part = blockIdx.x % parts;
    const long long chunk = (n + parts - 1) / parts, start = part * chunk;
    const long long stop = start + chunk < n ? start + chunk : n;
    const real* xr = x + row * n;
    if (op == RED_SUM) {
        real acc = (real)0;
        for (long long k = start + threadIdx.x; k < stop; k += blockDim.x) acc += xr[k];
        acc = block_allreduce(acc, SumOp(), (real)0, sv);
        if (threadIdx.x == 0) val[blockIdx.x] = acc * scale;
        return;
    }
    const bool is_max = op == RED_MAX;
    real v = is_max ? -(real)INFINITY : (real)INFINITY;
    int i = NO_INDEX;
    for (long long k = start + threadIdx.x; k < stop; k += blockDim.x) {
        const int ki = xidx ? xidx[row * n + k] : (int)k;
        if (red_better(xr[k], ki, v, i, is_max)) { v = xr[k]; i = ki; }
    }
    block_reduce_pair(v, i, is_max, sv, si);
    if (threadIdx.x == 0) {
        if (val) val[blockIdx.x] = v;
        if (idx) idx[blockIdx.x] = i;
    }
}

extern "C" __global__ void reduce_cols(const real* x, real* val, int* idx, int op, long long n, long long inner,
                                       real scale) {
    __shared__ real sv[8][33];
    __shared__ int si[8][33];
    const long long tiles = (inner + 31) / 32;
    const long long o = blockIdx.x / tiles, j = (blockIdx.x % tiles) * 32 + threadIdx.x;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const real* xo = x + o * n * inner + j;
    const bool is_max = op == RED_MAX;
    real v = op == RED_SUM ? (real)0 : (is_max ? -(real)INFINITY : (real)INFINITY);
    int i = NO_INDEX;
    if (j < inner) {
        for (long long k = ty; k < n; k += 8) {
            const real xv = xo[k * inner];
            if (op == RED_SUM) v += xv;
            else if (red_better(xv, (int)k, v, i, is_max)) { v = xv; i = (int)k; }
        }
    }
    sv[ty][tx] = v;
    si[ty][tx] = i;
    __syncthreads();
    if (ty == 0 && j < inner) {
        for (int r = 1; r < 8; ++r) {
            if (op == RED_SUM) v += sv[r][tx];
            else if (red_better(sv[r][tx], si[r][tx], v, i, is_max)) { v = sv[r][tx]; i = si[r][tx]; }
        }
        if (val) val[o * inner + j] = op == RED_SUM ? v * scale : v;
        if (idx) idx[o * inner + j] = i;
    }
}

extern "C" __global__ void softmax_rows(const real* x, real* y, long long n) {
    __shared__ real s[33];
    const real* xr = x + blockIdx.x * n;
    real* yr = y + blockIdx.x * n;
    real m = -(real)INFINITY;
    for (long long k = threadIdx.x; k < n; k += blockDim.x) m = MaxOp()(m, xr[k]);
    m = block_allreduce(m, MaxOp(), -(real)INFINITY, s);
    real sum = (real)0;
    for (long long k = threadIdx.x; k < n; k += blockDim.x) sum += red_exp(xr[k] - m);
    sum = block_allreduce(sum, SumOp(), (real)0, s);
    const real inv = (real)1 / sum;
    for (long long k = threadIdx.x; k < n; k += blockDim.x) yr[k] = red_exp(xr[k] - m) * inv;
}

extern "C" __global__ void logsumexp_rows(const real* x, real* out, long long n) {
    __shared__ real s[33];
    const real* xr = x + blockIdx.x * n;
    real m = -(real)INFINITY;
    for (long long k = threadIdx.x; k < n; k += blockDim.x) m = MaxOp()(m, xr[k]);
    m = block_allreduce(m, MaxOp(), -(real)INFINITY, s);
    real sum = (real)0;
    for (long long k = threadIdx.x; k < n; k += blockDim.x) sum += red_exp(xr[k] - m);
    sum = block_allreduce(sum, SumOp(), (real)0, s);
    if (threadIdx.x == 0) out[blockIdx.x] = m + red_log(sum);
}
