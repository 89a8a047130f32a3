// embedding.cu: the lookup table of nn.Embedding. `real` is the element type; weight is (V, D) row-major,
// idx holds n int32 row numbers (host indices are checked to be in [0, V) by the layer; device ones are
// not read back, so the kernels guard them).
//
// embedding_forward:  grid-stride loop, one output element per thread: y[i, d] = weight[idx[i], d], or
//                     NaN when idx[i] is outside [0, V) (no read outside the table; the loss shows it).
// embedding_backward: deterministic scatter-add without atomics. Block of B <= EMB_THREADS threads (the
//                     launcher picks B from D), grid (V, ceil(D / B)): block (r, b) owns weight row r,
//                     columns b*B + threadIdx.x. The block walks idx in tiles of B staged in shared memory; each thread adds dy[i, d] for every i
//                     with idx[i] == r, in increasing i, into a register (acc_real: float for 16-bit data), then
//                     dweight[r, d] += that sum, rounded once.
//                     Same order every run, so the same bits. Rows equal to padding_idx (-1: none) get
//                     nothing; an index outside [0, V) matches no row. Work is V * n index compares: right for character and small-word vocabularies.
#include "common.cuh"

#define EMB_THREADS 128

extern "C" __global__ void embedding_forward(const real* __restrict__ weight, const int* __restrict__ idx,
                                             real* __restrict__ y, long long n, int D, int V) {
    const long long total = n * D;
    GRID_STRIDE_LOOP(long long, e, total) {
        const int r = idx[e / D];
        y[e] = (unsigned)r < (unsigned)V ? weight[(long long)r * D + e % D] : (real)NAN;
    }
}

extern "C" __global__ void embedding_backward(const real* __restrict__ dy, const int* __restrict__ idx,
                                              real* __restrict__ dweight, long long n, int D, int padding_idx) {
    __shared__ int tile[EMB_THREADS];
    const int r = blockIdx.x;
    if (r == padding_idx) return;                       // the whole block leaves: no barrier is skipped
    const int B = blockDim.x;
    const int d = blockIdx.y * B + threadIdx.x;
    acc_real acc = 0;
    for (long long t0 = 0; t0 < n; t0 += B) {
        const long long i = t0 + threadIdx.x;
        tile[threadIdx.x] = i < n ? idx[i] : -1;
        __syncthreads();
        const int count = (int)(n - t0 < B ? n - t0 : B);
        if (d < D)
            for (int k = 0; k < count; ++k)
                if (tile[k] == r) acc += load_as(dy[(t0 + k) * D + d]);
        __syncthreads();                                // the tile is refilled next
    }
    if (d < D) dweight[(long long)r * D + d] = convert<real>(load_as(dweight[(long long)r * D + d]) + acc);
}
