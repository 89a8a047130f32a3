// loss.cu: loss functions with their gradients, and the deterministic sum that turns per-row losses
// into one number. `real` is the element type.
//
// softmax_xent_forward: grid-stride loop, one thread per row n of logits (N, C): max, then
//                       lse = max + log(sum exp(x - max)) (numerically stable), row_loss[n] = lse - x[label],
//                       and the gradient of the batch MEAN: dlogits[n, j] = (exp(x_j - lse) - [j == label]) / N.
//                       One fused pass; a label outside [0, C) gives a NaN row loss.
// mse_forward:          grid-stride loop, one element per thread: d = pred - target, sq[i] = d*d,
//                       dpred[i] = 2 d / n (the gradient of the mean).
// sum_scaled:           one block of SUM_THREADS (256) threads: each sums a strided share of x, then a
//                       shared-memory tree reduction in a fixed order; out[0] = scale * total.
#include "common.cuh"

#define SUM_THREADS 256

extern "C" __global__ void softmax_xent_forward(const real* __restrict__ logits, const int* __restrict__ labels,
                                                real* __restrict__ dlogits, real* __restrict__ row_loss, int N, int C) {
    const real invN = (real)1 / (real)N;
    for (long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x; n < N; n += (long long)gridDim.x * blockDim.x) {
        const real* x = logits + n * C;
        real* dx = dlogits + n * C;
        const int label = labels[n];
        real m = x[0];
        for (int j = 1; j < C; ++j) m = x[j] > m ? x[j] : m;
        real s = 0;
        for (int j = 0; j < C; ++j) s += exp(x[j] - m);
        const real lse = m + log(s);
        for (int j = 0; j < C; ++j) dx[j] = (exp(x[j] - lse) - (j == label ? (real)1 : (real)0)) * invN;
        row_loss[n] = (label >= 0 && label < C) ? lse - x[label] : (real)NAN;
    }
}

extern "C" __global__ void mse_forward(const real* __restrict__ pred, const real* __restrict__ target,
                                       real* __restrict__ dpred, real* __restrict__ sq, long long n) {
    const real g = (real)2 / (real)n;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        real d = pred[i] - target[i];
        sq[i] = d * d;
        dpred[i] = g * d;
    }
}

extern "C" __global__ void sum_scaled(const real* __restrict__ x, real* __restrict__ out, long long n, real scale) {
    __shared__ real partial[SUM_THREADS];
    real s = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = scale * partial[0];
}
