// scan.cu: exclusive prefix sums, out[i] = x[0] + ... + x[i-1] with each x converted to long long.
// `real` is the input's element type (bool for a mask's positions, long long for the tile totals).
// Integer sums in an order fixed by the launch shape: the result is exact and the same under any
// thread order. gpublas/core/scan.py drives the levels: tiles, then a scan of the tile totals (the same
// kernel again, recursively), then scan_add.
//
// scan_tiles_real: block SCAN_BLOCK (1-D), one block per tile of SCAN_TILE consecutive elements;
//                  thread t takes the tile's SCAN_ITEMS elements from t * SCAN_ITEMS (a serial sum),
//                  common.cuh's block_exclusive_scan turns the thread sums into each thread's start,
//                  and the thread writes its elements' sums within the tile; tile_sums[tile] = the
//                  tile's total.
// scan_add:        grid-stride loop, one element per thread: out[i] += tile_starts[i / SCAN_TILE] (the
//                  exclusive scan of the tile totals, with their grand total at [tiles]), which thread
//                  0 of block 0 also copies to out[n].
#include "common.cuh"

#define SCAN_BLOCK 256
#define SCAN_ITEMS 8
#define SCAN_TILE 2048
static_assert(SCAN_TILE == SCAN_BLOCK * SCAN_ITEMS, "a tile is one block's elements");

extern "C" __global__ void scan_tiles_real(const real* __restrict__ x, long long n, long long* __restrict__ out,
                                           long long* __restrict__ tile_sums) {
    const long long first = (long long)blockIdx.x * SCAN_TILE + (long long)threadIdx.x * SCAN_ITEMS;
    long long sum = 0;
    for (int k = 0; k < SCAN_ITEMS && first + k < n; ++k) sum += (long long)x[first + k];
    long long total;
    long long run = block_exclusive_scan(sum, total);
    for (int k = 0; k < SCAN_ITEMS && first + k < n; ++k) {
        out[first + k] = run;
        run += (long long)x[first + k];
    }
    if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

extern "C" __global__ void scan_add(long long* __restrict__ out, long long n, const long long* __restrict__ tile_starts) {
    if (blockIdx.x == 0 && threadIdx.x == 0) out[n] = tile_starts[ceil_div(n, SCAN_TILE)];
    GRID_STRIDE_LOOP(long long, i, n)
        out[i] += tile_starts[i / SCAN_TILE];
}
