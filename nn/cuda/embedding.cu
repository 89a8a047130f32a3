// embedding.cu: the lookup table of nn.Embedding. `real` is the element type; weight is (V, D) row-major,
// idx holds n int32 row numbers (host indices are checked to be in [0, V) by the layer; device ones are
// not read back, so the kernels guard them).
//
// embedding_forward:  grid-stride loop, one output element per thread: y[i, d] = weight[idx[i], d], or
//                     NaN when idx[i] is outside [0, V) (no read outside the table), which column 0's thread
//                     reports (common.cuh's report_bad_index: the host raises IndexError at its next
//                     synchronization). D is a FastDivmod divisor (gpublas.runtime.launch.fast_divisor): 32-bit index
//                     math below 2^31 elements.
// embedding_backward: deterministic scatter-add without atomics. Block of B <= EMB_THREADS threads (the
//                     launcher picks B from D), grid (V, ceil(D / B)): block (r, b) owns weight row r,
//                     columns b*B + threadIdx.x. The block walks idx in tiles of 32*B indices: thread t
//                     compares the 32 consecutive indices 32t .. 32t+31 of the tile with r once and puts
//                     the matches in a bit mask in shared memory (one word per thread); after a barrier
//                     each thread walks the words in order and the set bits of each in increasing order,
//                     adding dy[i, d] for every i with idx[i] == r, in increasing i, into a register
//                     (acc_real: float for 16-bit data), then dweight[r, d] += that sum, rounded once.
//                     Same order every run, so the same bits. Rows equal to padding_idx (-1: none) get
//                     nothing; an index outside [0, V) matches no row. Work is V * n * ceil(D / B) index
//                     compares plus one read of dy per match: right for character and small-word vocabularies.
// embedding_backward_serial: the same sums without a barrier, for the simulator (where each of
//                     embedding_backward's two barriers a tile is a pass over the block's threads): grid-stride
//                     loop over (row r, run of EMB_RUN columns) pairs, one thread each, which compares idx with
//                     r 32 indices at a time into a bit mask and walks its set bits in increasing order,
//                     adding dy[i, d] into a register per column, then dweight[r, d] += that sum: the same
//                     additions in the same order, so the bits of embedding_backward.
// embedding_backward_sorted: the same sums for a large vocabulary (GPT-2's 50,257 rows and 16K indices make
//                     embedding_backward's V n compares 0.8 G and each block read all of idx), from `order`:
//                     the positions 0 .. n-1 sorted stably by index (gpublas.argsort), so that each row's
//                     positions form one run, in increasing i. A block per position k of the order
//                     (grid-stride), its threads over the columns d (coalesced rows of dy); the block of a
//                     run's first position adds dy[i, d] over the run's positions, in order, into a register,
//                     then dweight[r, d] += that sum: the same additions in the same order, so the same bits.
//                     The blocks of the other positions, and of rows padding_idx or outside [0, V), return.
//                     Work: the sort plus one read of dy.
#include "common.cuh"

#define EMB_THREADS 128
#define EMB_RUN 16  // embedding_backward_serial's columns per thread (nn.kernels reads it)

template <class I>
__device__ __forceinline__ void embedding_gather(const real* __restrict__ weight, const int* __restrict__ idx,
                                                 real* __restrict__ y, I total, const FastDivmod& D, int V,
                                                 long long* check, int site) {
    GRID_STRIDE_LOOP(I, e, total) {
        I d;
        const I i = div_mod(e, D, d);  // element e is column d of index i = e / D
        const int r = idx[i];
        if ((unsigned)r < (unsigned)V) {
            y[e] = weight[(long long)r * D.d + d];
        } else {
            y[e] = (real)NAN;
            if (d == 0) report_bad_index(check, site, r, (long long)i, V);
        }
    }
}

extern "C" __global__ void embedding_forward(const real* __restrict__ weight, const int* __restrict__ idx,
                                             real* __restrict__ y, long long n, unsigned long long D_, int V,
                                             long long* check, int site) {
    const FastDivmod D(D_);
    const long long total = n * D.d;
    if (small_index(total)) embedding_gather<unsigned>(weight, idx, y, (unsigned)total, D, V, check, site);
    else embedding_gather<long long>(weight, idx, y, total, D, V, check, site);
}

extern "C" __global__ void embedding_backward(const real* __restrict__ dy, const int* __restrict__ idx,
                                              real* __restrict__ dweight, long long n, int D, int padding_idx) {
    __shared__ unsigned hits[EMB_THREADS];              // bit k of word w: idx[t0 + 32 w + k] == r
    const int r = blockIdx.x;
    if (r == padding_idx) return;                       // the whole block leaves: no barrier is skipped
    const int B = blockDim.x;
    const int d = blockIdx.y * B + threadIdx.x;
    acc_real acc = 0;
    for (long long t0 = 0; t0 < n; t0 += 32LL * B) {
        const long long first = t0 + 32LL * threadIdx.x;
        const int mine = (int)(n - first < 0 ? 0 : n - first < 32 ? n - first : 32);
        unsigned word = 0;
        for (int k = 0; k < mine; ++k)
            word |= (unsigned)(idx[first + k] == r) << k;
        hits[threadIdx.x] = word;
        __syncthreads();
        if (d < D) {
            const int words = (int)((n - t0 + 31) / 32 < B ? (n - t0 + 31) / 32 : B);
            for (int w = 0; w < words; ++w)
                for (unsigned m = hits[w]; m; m &= m - 1)  // set bits in increasing order: increasing i
                    acc += load_as(dy[(t0 + 32LL * w + __ffs((int)m) - 1) * D + d]);
        }
        __syncthreads();                                // the words are rewritten next
    }
    if (d < D) dweight[(long long)r * D + d] = convert<real>(load_as(dweight[(long long)r * D + d]) + acc);
}

extern "C" __global__ void embedding_backward_serial(const real* __restrict__ dy, const int* __restrict__ idx,
                                                     real* __restrict__ dweight, long long n, int D, int V,
                                                     int padding_idx) {
    const int runs = (D + EMB_RUN - 1) / EMB_RUN;  // per row
    GRID_STRIDE_LOOP(long long, t, (long long)V * runs) {
        const int r = (int)(t / runs), d0 = (int)(t % runs) * EMB_RUN;
        if (r == padding_idx) continue;
        const int w = D - d0 < EMB_RUN ? D - d0 : EMB_RUN;  // this run's columns
        acc_real acc[EMB_RUN];
        for (int u = 0; u < EMB_RUN; ++u) acc[u] = 0;
        for (long long t0 = 0; t0 < n; t0 += 32) {
            const int mine = (int)(n - t0 < 32 ? n - t0 : 32);
            unsigned word = 0;
            for (int k = 0; k < mine; ++k) word |= (unsigned)(idx[t0 + k] == r) << k;
            for (unsigned m = word; m; m &= m - 1) {  // set bits in increasing order: increasing i
                const real* row = dy + (t0 + __ffs((int)m) - 1) * D + d0;
                for (int u = 0; u < EMB_RUN; ++u)
                    if (u < w) acc[u] += load_as(row[u]);
            }
        }
        real* out = dweight + (long long)r * D + d0;
        for (int u = 0; u < w; ++u) out[u] = convert<real>(load_as(out[u]) + acc[u]);
    }
}

extern "C" __global__ void embedding_backward_sorted(const real* __restrict__ dy, const int* __restrict__ idx,
                                                     const long long* __restrict__ order, real* __restrict__ dweight,
                                                     long long n, int D, int V, int padding_idx) {
    for (long long k = blockIdx.x; k < n; k += gridDim.x) {
        const int r = idx[order[k]];
        if ((k > 0 && idx[order[k - 1]] == r) || r == padding_idx || (unsigned)r >= (unsigned)V) continue;
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            acc_real acc = 0;
            for (long long j = k; j < n && idx[order[j]] == r; ++j) acc += load_as(dy[order[j] * D + d]);
            dweight[(long long)r * D + d] = convert<real>(load_as(dweight[(long long)r * D + d]) + acc);
        }
    }
}
