// loss.cu: loss functions with their gradients. `real` is the element type. The per-row losses become
// one number through gpublas' reduce.cu (nn.kernels.sum_scaled).
//
// softmax_xent_forward: per row n of logits (N, C): max, then lse = max + log(sum exp(x - max)) (numerically
//                       stable), row_loss[n] = (lse - x[label]) s and the gradient of the MEAN: dlogits[n, j] =
//                       (exp(x_j - lse) - [j == label]) s, with s = scale[0] (device memory: 1 / the number of
//                       labels counted, xent_scale's), so the row losses sum to the mean. A row whose label is
//                       ignore_index has loss 0 and gradient 0 (torch's ignore_index); a label outside [0, C)
//                       gives a NaN row loss and is reported (common.cuh's report_bad_index: IndexError at the
//                       host's next synchronization). On a GPU a block per row (grid-stride over rows), as
//                       llm.c's fused classifier: the threads take the row's columns tx, tx + blockDim, ... (each
//                       load coalesced), the max and the sum of exps by block_allreduce, then the gradient by the
//                       same strides: a GPT-2 vocabulary's 50,257 columns a row are 197 a thread at 256 threads
//                       (a thread per row read them at row stride, 16K threads for 16K rows). On the simulator
//                       one thread per group of `rows` consecutive rows (XENT_ROWS; the GPU's build ignores
//                       rows): the group's rows go through each step together, so one row's max and sum chains
//                       (a compare or an add per element, each waiting for the last) overlap the other rows'
//                       work instead of stalling the exps; every row's values are computed as alone, in order.
//                       Both are deterministic (each sum's order fixed by C and the block size); they differ
//                       in the sum's rounding (XENT_GPU_FORM builds the GPU's on the simulator for the tests).
// xent_scale:           one block: scale[0] = 1 / the number of labels[0 .. N) that are not ignore_index
//                       (block_reduce of each thread's strided count: a fixed order; 1 / 0 = inf when every
//                       label is ignored, so the mean is NaN as torch's).
// mse_forward:          grid-stride loop, one element per thread: d = pred - target, sq[i] = d*d,
//                       dpred[i] = 2 d / n (the gradient of the mean).
// loss_track:           one thread: acc[0] = a * acc[0] + b * (double)loss[0] in double, each product and
//                       the sum rounded as host code rounds them (no fused multiply-add): a training loop
//                       that keeps its losses on the device sums an epoch (a = 1, b = batch size) or
//                       smooths them (a = 0.9, b = 0.1) to the bit as it would with floats on the host.
//
// The simulator compiles the cross-entropy kernels apart from mse_forward (gpublas/runtime/source.py's sim_units):
// a regression's first run builds 0.2 s of g++ CPU for this family; a classifier's about the whole family's
// (0.9-1.2 s; xent_scale, through block_reduce, is 1.0 s of it alone).
// sim unit: softmax_xent_forward xent_scale loss_track
#include "common.cuh"

#define XENT_ROWS 8  // softmax_xent_forward's rows per thread on the simulator (nn.step_kernels reads it)

// Element j's gradient and the row's loss from the row's lse (both forms): 0 and 0 for ignore_index, NaN and a
// report for a label outside [0, C)
__device__ __forceinline__ real xent_grad(real xj, int j, int label, real lse, real invN, int ignore) {
    return label == ignore ? (real)0 : (exp(xj - lse) - (j == label ? (real)1 : (real)0)) * invN;
}
__device__ __forceinline__ void xent_loss(const real* __restrict__ x, int label, real lse, real* __restrict__ row_loss,
                                          long long n, int C, real invN, int ignore, long long* check, int site) {
    const bool ok = label >= 0 && label < C;
    row_loss[n] = label == ignore ? (real)0 * invN  // NaN when all are ignored
                  : ok            ? (lse - x[label]) * invN
                                  : (real)NAN;
    if (!ok && label != ignore) report_bad_index(check, site, label, n, C);
}

// Rows n0 .. n0 + G - 1 of softmax_xent_forward (x, dx: the first row's logits and gradient), step by step
// together; each row's max, sum of exps (in j order) and outputs as for G = 1.
template <int G>
__device__ __forceinline__ void xent_rows(const real* __restrict__ x, const int* __restrict__ labels,
                                          real* __restrict__ dx, real* __restrict__ row_loss, long long n0, int C,
                                          real invN, int ignore, long long* check, int site) {
    real m[G], s[G], lse[G];
    int label[G];
    for (int g = 0; g < G; ++g) {
        label[g] = labels[n0 + g];
        m[g] = x[g * C];
        s[g] = 0;
    }
    for (int j = 1; j < C; ++j)
        for (int g = 0; g < G; ++g) m[g] = x[g * C + j] > m[g] ? x[g * C + j] : m[g];
    for (int j = 0; j < C; ++j)
        for (int g = 0; g < G; ++g) s[g] += exp(x[g * C + j] - m[g]);
    for (int g = 0; g < G; ++g) lse[g] = m[g] + log(s[g]);
    for (int j = 0; j < C; ++j)
        for (int g = 0; g < G; ++g) dx[g * C + j] = xent_grad(x[g * C + j], j, label[g], lse[g], invN, ignore);
    for (int g = 0; g < G; ++g) xent_loss(x + g * C, label[g], lse[g], row_loss, n0 + g, C, invN, ignore, check, site);
}

#if !defined(__CUDA_ARCH_SIM__) || defined(XENT_GPU_FORM)
// Row n of softmax_xent_forward by the whole block (x, dx: the row's logits and gradient); every thread calls it.
__device__ __forceinline__ void xent_row_block(const real* __restrict__ x, const int* __restrict__ labels,
                                               real* __restrict__ dx, real* __restrict__ row_loss, long long n, int C,
                                               real invN, int ignore, long long* check, int site) {
    const int label = labels[n];
    real m = (real)-INFINITY, s = 0;
    for (int j = threadIdx.x; j < C; j += blockDim.x) m = MaxOp<real>()(x[j], m);
    m = block_allreduce(m, MaxOp<real>(), (real)-INFINITY);
    for (int j = threadIdx.x; j < C; j += blockDim.x) s += exp(x[j] - m);
    const real lse = m + log(block_allreduce(s, SumOp<real>(), (real)0));
    for (int j = threadIdx.x; j < C; j += blockDim.x) dx[j] = xent_grad(x[j], j, label, lse, invN, ignore);
    if (threadIdx.x == 0) xent_loss(x, label, lse, row_loss, n, C, invN, ignore, check, site);
}
#endif

extern "C" __global__ void softmax_xent_forward(const real* __restrict__ logits, const int* __restrict__ labels,
                                                real* __restrict__ dlogits, real* __restrict__ row_loss, int N, int C,
                                                int rows, int ignore, const real* __restrict__ scale,
                                                long long* check, int site) {
    const real invN = scale[0];
#if defined(__CUDA_ARCH_SIM__) && !defined(XENT_GPU_FORM)  // XENT_GPU_FORM: the GPU's form on the simulator (tests)
    GRID_STRIDE_LOOP(long long, r, (N + rows - 1) / rows) {
        const long long n0 = r * rows;
        if (rows == XENT_ROWS && n0 + XENT_ROWS <= N)
            xent_rows<XENT_ROWS>(logits + n0 * C, labels, dlogits + n0 * C, row_loss, n0, C, invN, ignore, check, site);
        else
            for (long long n = n0; n < n0 + rows && n < N; ++n)
                xent_rows<1>(logits + n * C, labels, dlogits + n * C, row_loss, n, C, invN, ignore, check, site);
    }
#else
    for (long long n = blockIdx.x; n < N; n += gridDim.x)
        xent_row_block(logits + n * C, labels, dlogits + n * C, row_loss, n, C, invN, ignore, check, site);
#endif
}

extern "C" __global__ void xent_scale(const int* __restrict__ labels, int N, int ignore, real* __restrict__ scale) {
    long long count = 0;
    for (int n = threadIdx.x; n < N; n += blockDim.x) count += labels[n] != ignore;
    count = block_reduce(count, SumOp<long long>(), 0LL);
    if (threadIdx.x == 0) scale[0] = (real)1 / (real)count;
}

extern "C" __global__ void mse_forward(const real* __restrict__ pred, const real* __restrict__ target,
                                       real* __restrict__ dpred, real* __restrict__ sq, long long n) {
    const real g = (real)2 / (real)n;
    GRID_STRIDE_LOOP(long long, i, n) {
        real d = pred[i] - target[i];
        sq[i] = d * d;
        dpred[i] = g * d;
    }
}

extern "C" __global__ void loss_track(const real* __restrict__ loss, double* __restrict__ acc, double a, double b) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        acc[0] = __dadd_rn(__dmul_rn(a, acc[0]), __dmul_rn(b, (double)loss[0]));
}
