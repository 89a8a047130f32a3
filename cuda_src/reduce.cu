// reduce.cu: reductions of `real` arrays (-Dreal=float, double, int, long long, __half, __nv_bfloat16, cfloat or
// cdouble: sum and mean), computed and
// accumulated in acc_real (common.cuh: float for the 16-bit types, so a sum of 3,000 bf16 ones is 3,000), which is
// also the type of every value output (val, partials) but softmax's y. Deterministic: every sum is taken
// in an order fixed by the launch shape alone (per-thread strided partials, then a shuffle tree inside
// each warp, then the warps' results through shared memory), never by the order threads happen to run.
// The array is seen as (rows, n) for a reduction over its last axis and as (outer, n, inner) otherwise.
//
// reduce_rows:    block 32..256 threads (x), block b reduces part (b % parts) of row (b / parts) of a
//                 (rows, n) array: each thread walks the part with stride blockDim.x (on the simulator a
//                 contiguous run of it, a sum in common.cuh's STRIDED_FOLD lanes), then a block reduce. With parts > 1 it writes partials and a second launch (parts = 1, with
//                 xidx = the partial indices) finishes them. op RED_SUM writes the sum times `scale`
//                 (1/n for a mean); RED_MAX / RED_MIN write the value and/or its first index (the value
//                 alone: a fold in MaxOp / MinOp as the sum's, in lanes on the simulator).
// reduce_cols:    block 32x8: threadIdx.x walks inner (coalesced), threadIdx.y splits the reduced axis
//                 n with stride 8; the 8 partials per column meet in shared memory, combined in the
//                 fixed order y = 0..7. Block b covers 32 inner positions of outer index b / tiles.
//                 val = result + beta * val (beta == 0: val is only written).
// reduce_serial:  no barrier, block 256 (x; on the sim as few whole warps as cover few outputs), grid-stride
//                 over the outputs of an (outer, n, inner) array in runs of `cols` adjacent ones (inner
//                 positions of one outer index; the last run of a row may be shorter), one thread per run:
//                 each output walks its n values in the order k = 0..n-1 (stride inner, so adjacent threads
//                 read adjacent addresses when inner > 1). The launcher passes cols = 1 on a GPU (its build
//                 takes one output per thread whatever cols is); on the simulator SERIAL_COLS: a run's chains
//                 advance together (a few vector adds per k) instead of one latency-bound chain at a time (a
//                 row's short last run goes 8, then 1 output at a time). Every output's sum has the same
//                 order either way, but for rows (inner 1) of SERIAL_LANES_MIN or more on the simulator:
//                 STRIDED_FOLD's 16 lanes.
//                 For short reduced axes, where a block or warp reduce would idle most of its threads and
//                 pay its barriers for a few elements (the simulator runs it without fibers), and on the
//                 simulator for column sums (bias gradients). Writes as reduce_cols.
// softmax_rows:   block 32..256 threads, one block per row: max, sum of exp(x - max) (two block
//                 reduces), then y = exp(x - max) / sum; stable for large logits.
// logsumexp_rows: as softmax_rows, writing max + log(sum of exp(x - max)) per row (a max that is not
//                 finite shifts by 0, as SciPy: all -inf gives -inf).
//
// The simulator compiles reduce_serial, the kernel its launchers pick for every column sum and every row of
// up to 4096 (gpublas/core/reduction.py's serial_fits), apart from the others (gpublas/runtime/source.py's sim_units): a
// first sum builds 1.6 s of g++ CPU instead of the family's 6.3 s.
// sim unit: reduce_serial
#include "common.cuh"

#define RED_SUM 0
#define RED_MAX 1
#define RED_MIN 2
#define NO_INDEX 0x7fffffff
#define SERIAL_COLS 32  // reduce_serial's outputs per thread on the simulator (gpublas.core.reduction reads it)
#define SERIAL_LANES_MIN 256  // ... and the shortest row it sums in lanes there (rows of inner 1)

// The identities of max (lowest) and min (highest): infinities for floats, the limits for the int
// builds (-Dreal=int or long long: sum, max, min, argmax, argmin; unsigned long long: max, min, argmax, argmin;
// softmax and logsumexp are float-only).
__device__ __forceinline__ float red_lowest(float) { return -INFINITY; }
__device__ __forceinline__ double red_lowest(double) { return -INFINITY; }
__device__ __forceinline__ int red_lowest(int) { return -2147483647 - 1; }
__device__ __forceinline__ long long red_lowest(long long) { return -9223372036854775807LL - 1; }
__device__ __forceinline__ float red_highest(float) { return INFINITY; }
__device__ __forceinline__ double red_highest(double) { return INFINITY; }
__device__ __forceinline__ int red_highest(int) { return 2147483647; }
__device__ __forceinline__ long long red_highest(long long) { return 9223372036854775807LL; }
__device__ __forceinline__ unsigned long long red_lowest(unsigned long long) { return 0ull; }  // max, min, arg*
__device__ __forceinline__ unsigned long long red_highest(unsigned long long) { return ~0ull; }
// complex builds (-Dreal=cfloat or cdouble) run RED_SUM (sum, mean); these make max/min compile in
// NumPy's lexicographic order of complex numbers
template <class R> __device__ __forceinline__ gcomplex<R> red_lowest(gcomplex<R>) { return {-INFINITY, -INFINITY}; }
template <class R> __device__ __forceinline__ gcomplex<R> red_highest(gcomplex<R>) { return {INFINITY, INFINITY}; }

// Does candidate (bv, bi) beat the current (av, ai)? A NaN beats any number (NumPy's max, min,
// argmax and argmin all return the first NaN); equal values go to the smaller index.
__device__ __forceinline__ bool red_better(acc_real bv, int bi, acc_real av, int ai, bool is_max) {
    const bool an = av != av, bn = bv != bv;
    if (an || bn) return bn && (!an || bi < ai);
    if (bv == av) return bi < ai;
    return is_max ? bv > av : bv < av;
}

// red_better as the functor common.cuh's block_reduce_pair takes
struct RedBetter {
    bool is_max;
    __device__ __forceinline__ bool operator()(acc_real bv, int bi, acc_real av, int ai) const {
        return red_better(bv, bi, av, ai, is_max);
    }
};

// Output `at` of reduce_cols and reduce_serial: val = result (times scale for a sum) + beta * val, where
// beta == 0 never reads val; idx gets the index of max / min.
__device__ __forceinline__ void store_result(acc_real* val, int* idx, long long at, acc_real v, int i, int op,
                                             acc_real scale, acc_real beta) {
    if (val) {
        const acc_real r = op == RED_SUM ? v * scale : v;
        val[at] = beta == (acc_real)0 ? r : beta * val[at] + r;
    }
    if (idx) idx[at] = i;
}

extern "C" __global__ void reduce_rows(const real* x, const int* xidx, compute_t<real>* val, int* idx, int op,
                                       long long n, int parts, compute_t<real> scale) {
    const long long row = blockIdx.x / parts, part = blockIdx.x % parts;
    const long long chunk = (n + parts - 1) / parts, start = part * chunk;
    const long long stop = start + chunk < n ? start + chunk : n;
    const real* xr = x + row * n;
    if (op == RED_SUM) {
        acc_real acc = (acc_real)0;
        STRIDED_FOLD(long long, k, start, stop, threadIdx.x, blockDim.x, acc, SumOp<acc_real>(), load_as(xr[k]));
        acc = block_reduce(acc, SumOp<acc_real>(), (acc_real)0);
        if (threadIdx.x == 0) val[blockIdx.x] = acc * scale;
        return;
    }
    const bool is_max = op == RED_MAX;
    acc_real v = is_max ? red_lowest((acc_real)0) : red_highest((acc_real)0);
    if (!idx && !xidx) {  // the value alone (max, min): a fold as the sum's (in lanes on the simulator), NaN wins
        if (op == RED_MAX) {  // (the fold's accumulator declared beside it: the sim's loop fission sees the macro's write)
            acc_real m = red_lowest((acc_real)0);
            STRIDED_FOLD_LOAD(long long, k, start, stop, threadIdx.x, blockDim.x, m, MaxOp<acc_real>(), xr);
            v = block_reduce(m, MaxOp<acc_real>(), red_lowest((acc_real)0));
        } else {
            acc_real m = red_highest((acc_real)0);
            STRIDED_FOLD_LOAD(long long, k, start, stop, threadIdx.x, blockDim.x, m, MinOp<acc_real>(), xr);
            v = block_reduce(m, MinOp<acc_real>(), red_highest((acc_real)0));
        }
        if (threadIdx.x == 0) val[blockIdx.x] = v;
        return;
    }
    int i = NO_INDEX;
    for (long long k = start + threadIdx.x; k < stop; k += blockDim.x) {
        const int ki = xidx ? xidx[row * n + k] : (int)k;
        const acc_real xv = load_as(xr[k]);
        if (red_better(xv, ki, v, i, is_max)) { v = xv; i = ki; }
    }
    block_reduce_pair(v, i, RedBetter{is_max});
    if (threadIdx.x == 0) {
        if (val) val[blockIdx.x] = v;
        if (idx) idx[blockIdx.x] = i;
    }
}

extern "C" __global__ void reduce_cols(const real* x, compute_t<real>* val, int* idx, int op, long long n,
                                       long long inner, compute_t<real> scale, compute_t<real> beta) {
    __shared__ acc_real sv[8][33];
    __shared__ int si[8][33];
    const long long tiles = (inner + 31) / 32;
    const long long o = blockIdx.x / tiles, j = (blockIdx.x % tiles) * 32 + threadIdx.x;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const real* xo = x + o * n * inner + j;
    const bool is_max = op == RED_MAX;
    acc_real v = op == RED_SUM ? (acc_real)0 : (is_max ? red_lowest((acc_real)0) : red_highest((acc_real)0));
    int i = NO_INDEX;
    if (j < inner) {
        for (long long k = ty; k < n; k += 8) {
            const acc_real xv = load_as(xo[k * inner]);
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
        store_result(val, idx, o * inner + j, v, i, op, scale, beta);
    }
}

// W adjacent outputs of reduce_serial, starting at output `at` whose first value is xo[0]: W chains, each
// in the order k = 0..n-1, advanced together (W = SERIAL_COLS: the simulator's vector adds).
template <int W>
__device__ __forceinline__ void serial_outputs(const real* xo, compute_t<real>* val, int* idx, int op, long long at,
                                               long long n, long long inner, acc_real scale, acc_real beta) {
    acc_real v[W];
    int i[W];
    if (op == RED_SUM) {
        for (int u = 0; u < W; ++u) v[u] = (acc_real)0;
        for (long long k = 0; k < n; ++k)
            for (int u = 0; u < W; ++u) v[u] += load_as(xo[k * inner + u]);
        for (int u = 0; u < W; ++u) store_result(val, idx, at + u, v[u], NO_INDEX, op, scale, beta);
        return;
    }
    const bool is_max = op == RED_MAX;
    for (int u = 0; u < W; ++u) {
        v[u] = is_max ? red_lowest((acc_real)0) : red_highest((acc_real)0);
        i[u] = NO_INDEX;
    }
    for (long long k = 0; k < n; ++k)
        for (int u = 0; u < W; ++u) {
            const acc_real xv = load_as(xo[k * inner + u]);
            if (red_better(xv, (int)k, v[u], i[u], is_max)) { v[u] = xv; i[u] = (int)k; }
        }
    for (int u = 0; u < W; ++u) store_result(val, idx, at + u, v[u], i[u], op, scale, beta);
}

extern "C" __global__ void reduce_serial(const real* x, compute_t<real>* val, int* idx, int op, long long outer,
                                         long long n, long long inner, int cols, compute_t<real> scale,
                                         compute_t<real> beta) {
#if defined(__CUDA_ARCH_SIM__) && !defined(REDUCE_GPU_FORM)  // REDUCE_GPU_FORM: the GPU's form on the simulator (tests)
    // long row sums in STRIDED_FOLD's lanes (g++'s vector adds); rows under SERIAL_LANES_MIN keep the order
    // k = 0..n-1 (the GPU's), where one chain's latency costs little
    if (inner == 1 && op == RED_SUM && n >= SERIAL_LANES_MIN) {
        GRID_STRIDE_LOOP(long long, o, outer) {
            const real* xo = x + o * n;
            acc_real s = (acc_real)0;
            STRIDED_FOLD(long long, k, 0, n, 0, 1, s, SumOp<acc_real>(), load_as(xo[k]));
            store_result(val, idx, o, s, NO_INDEX, op, scale, beta);
        }
        return;
    }
    const long long runs = (inner + cols - 1) / cols;  // per outer index
    GRID_STRIDE_LOOP(long long, r, outer * runs) {
        const long long o = r / runs, j = (r % runs) * cols, at = o * inner + j;
        const real* xo = x + o * n * inner + j;
        const int w = inner - j < cols ? (int)(inner - j) : cols;  // this run's outputs
        int u = 0;
        if (w == SERIAL_COLS) {
            serial_outputs<SERIAL_COLS>(xo, val, idx, op, at, n, inner, scale, beta);
            u = w;
        }
        for (; u + 8 <= w; u += 8)  // a row's short last run
            serial_outputs<8>(xo + u, val, idx, op, at + u, n, inner, scale, beta);
        for (; u < w; ++u) serial_outputs<1>(xo + u, val, idx, op, at + u, n, inner, scale, beta);
    }
#else  // one output per thread whatever cols is (the launcher passes 1); runs took 40 registers, not 31 (sm_90, double)
    GRID_STRIDE_LOOP(long long, at, outer * inner)
        serial_outputs<1>(x + (at / inner) * n * inner + at % inner, val, idx, op, at, n, inner, scale, beta);
#endif
}

// The row's max (NaN wins), handed to every thread of the block.
__device__ acc_real row_max(const real* xr, long long n) {
    acc_real m = -(acc_real)INFINITY;
    for (long long k = threadIdx.x; k < n; k += blockDim.x) m = MaxOp<acc_real>()(m, load_as(xr[k]));
    return block_allreduce(m, MaxOp<acc_real>(), -(acc_real)INFINITY);
}

// sum over the row of exp(x - shift), handed to every thread of the block.
__device__ acc_real row_sumexp(const real* xr, long long n, acc_real shift) {
    acc_real sum = (acc_real)0;
    for (long long k = threadIdx.x; k < n; k += blockDim.x) sum += ew_exp(load_as(xr[k]) - shift);
    return block_allreduce(sum, SumOp<acc_real>(), (acc_real)0);
}

extern "C" __global__ void softmax_rows(const real* x, real* y, long long n) {
    const real* xr = x + blockIdx.x * n;
    real* yr = y + blockIdx.x * n;
    const acc_real m = row_max(xr, n);
    const acc_real inv = (acc_real)1 / row_sumexp(xr, n, m);
    for (long long k = threadIdx.x; k < n; k += blockDim.x) yr[k] = convert<real>(ew_exp(load_as(xr[k]) - m) * inv);
}

// A row whose max is not finite shifts by 0 (as SciPy): all -inf gives -inf, a +inf gives +inf.
extern "C" __global__ void logsumexp_rows(const real* x, compute_t<real>* out, long long n) {
    const real* xr = x + blockIdx.x * n;
    acc_real m = row_max(xr, n);
    if (m - m != (acc_real)0) m = (acc_real)0;  // +-inf or NaN (a NaN then comes out of the sum)
    const acc_real sum = row_sumexp(xr, n, m);
    if (threadIdx.x == 0) out[blockIdx.x] = m + ew_log(sum);
}
