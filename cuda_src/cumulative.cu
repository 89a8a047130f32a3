// cumulative.cu: running sums and products along rows (cumsum, cumprod) and products of rows (prod)
// (gpublas/numpy_api/cumulative.py). `real` is the result's dtype; values are combined in acc_real (float for the 16-bit
// types) and each result rounded once to `real`. A (rows, n) contiguous array; the launcher moves the axis last.
// A row is cut into chunks of `chunk` elements (chunk = n: one chunk, NumPy's left-to-right order exactly).
//
// fold_chunks_real: grid-stride loop, one (row, chunk) per thread: out[row * chunks + c] = x[c * chunk] op ...
//                   op x[min(n, (c + 1) * chunk) - 1], in order (op CUM_SUM or CUM_PROD).
// scan_chunks_real: grid-stride loop, one (row, chunk) per thread: y[k] = carry op x[c * chunk] op ... op x[k]
//                   for each k of the chunk, in order; carry = carry_in[row * chunks + c - 1] (the inclusive
//                   scan of the chunk totals, from fold_chunks and this kernel again) for c > 0, else none.
#include "common.cuh"

#define CUM_SUM 0
#define CUM_PROD 1

__device__ __forceinline__ acc_real cum_op(acc_real a, acc_real b, int op) { return op == CUM_PROD ? a * b : a + b; }

extern "C" __global__ void fold_chunks_real(const real* __restrict__ x, real* __restrict__ out, long long rows,
                                            long long n, long long chunk, int op) {
    const long long chunks = ceil_div(n, chunk);
    GRID_STRIDE_LOOP(long long, j, rows * chunks) {
        const long long row = j / chunks;
        const long long first = (j - row * chunks) * chunk;
        const long long end = first + chunk < n ? first + chunk : n;
        const real* xr = x + row * n;
        acc_real acc = load_as(xr[first]);
        for (long long k = first + 1; k < end; ++k) acc = cum_op(acc, load_as(xr[k]), op);
        out[j] = convert<real>(acc);
    }
}

extern "C" __global__ void scan_chunks_real(const real* __restrict__ x, real* __restrict__ y,
                                            const real* __restrict__ carry_in, long long rows, long long n,
                                            long long chunk, int op) {
    const long long chunks = ceil_div(n, chunk);
    GRID_STRIDE_LOOP(long long, j, rows * chunks) {
        const long long row = j / chunks;
        const long long c = j - row * chunks;
        const long long first = c * chunk;
        const long long end = first + chunk < n ? first + chunk : n;
        const real* xr = x + row * n;
        real* yr = y + row * n;
        acc_real acc = load_as(xr[first]);
        if (c > 0 && carry_in != nullptr) acc = cum_op(load_as(carry_in[j - 1]), acc, op);
        yr[first] = convert<real>(acc);
        for (long long k = first + 1; k < end; ++k) {
            acc = cum_op(acc, load_as(xr[k]), op);
            yr[k] = convert<real>(acc);
        }
    }
}
