// loss.cu: loss functions with their gradients. `real` is the element type. The per-row losses become
// one number through gpublas' reduce.cu (nn.kernels.sum_scaled).
//
// softmax_xent_forward: grid-stride loop, one thread per row n of logits (N, C): max, then
//                       lse = max + log(sum exp(x - max)) (numerically stable), row_loss[n] = lse - x[label],
//                       and the gradient of the batch MEAN: dlogits[n, j] = (exp(x_j - lse) - [j == label]) / N.
//                       One fused pass; a label outside [0, C) gives a NaN row loss.
// mse_forward:          grid-stride loop, one element per thread: d = pred - target, sq[i] = d*d,
//                       dpred[i] = 2 d / n (the gradient of the mean).
// loss_track:           one thread: acc[0] = a * acc[0] + b * (double)loss[0] in double, each product and
//                       the sum rounded as host code rounds them (no fused multiply-add): a training loop
//                       that keeps its losses on the device sums an epoch (a = 1, b = batch size) or
//                       smooths them (a = 0.9, b = 0.1) to the bit as it would with floats on the host.
#include "common.cuh"

extern "C" __global__ void softmax_xent_forward(const real* __restrict__ logits, const int* __restrict__ labels,
                                                real* __restrict__ dlogits, real* __restrict__ row_loss, int N, int C) {
    const real invN = (real)1 / (real)N;
    GRID_STRIDE_LOOP(long long, n, N) {
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
