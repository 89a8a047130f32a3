// batchnorm.cu: batch normalization over x viewed as (N, C, L) (L = 1 for (N, C), H*W for NCHW).
// `real` is the element type of x, y, dy, dx; the statistics, gamma, beta and their gradients are
// acc_real (common.cuh: float for 16-bit data, whose elements are loaded as float and rounded once on
// store: FP32 statistics and parameters under mixed precision).
// Channel c's M = N*L elements sit at x[(n*C + c)*L + l]; element j of a
// channel is n = j / L, l = j % L (consecutive threads take consecutive l, so NCHW rows coalesce).
//
// bn_stats:    one block per channel (256 threads; any multiple of 32 works). use_running == 0:
//              mean = sum(x) / M, then var = sum((x - mean)^2) / M (biased; two passes, each a strided
//              partial sum per thread and common.cuh's block_allreduce: a fixed order, deterministic);
//              invstd = 1 / sqrt(var + eps); when running_mean is not null also
//              running_mean = (1 - f) running_mean + f mean and running_var = (1 - f) running_var +
//              f var M / (M - 1) (unbiased), f = momentum. use_running == 1: mean = running_mean,
//              invstd = 1 / sqrt(running_var + eps) (eval mode; one thread does the work).
// bn_forward:  grid-stride loop, one element per thread: y = (x - mean[c]) invstd[c] gamma[c] + beta[c]
//              (gamma, beta null: 1 and 0).
// bn_backward: one block per channel: sum_dy = sum(dy), sum_dy_xhat = sum(dy xhat) with
//              xhat = (x - mean) invstd (block_allreduce, fixed order); dgamma[c] += sum_dy_xhat,
//              dbeta[c] += sum_dy (when not null); then each thread writes dx for its strided elements:
//                batch statistics: dx = gamma invstd (dy - sum_dy / M - xhat sum_dy_xhat / M)
//                running statistics (constants): dx = gamma invstd dy
#include "common.cuh"

__device__ __forceinline__ long long bn_index(long long j, int c, int C, long long L) {
    return (j / L * C + c) * L + j % L;
}

extern "C" __global__ void bn_stats(const real* __restrict__ x, compute_t<real>* __restrict__ mean,
                                    compute_t<real>* __restrict__ invstd, compute_t<real>* __restrict__ running_mean,
                                    compute_t<real>* __restrict__ running_var, int N, int C, long long L,
                                    compute_t<real> eps, compute_t<real> momentum, int use_running) {
    const int c = blockIdx.x;
    if (use_running) {
        if (threadIdx.x == 0) {
            mean[c] = running_mean[c];
            invstd[c] = (acc_real)1 / sqrt(running_var[c] + eps);
        }
        return;
    }
    const long long M = (long long)N * L;
    acc_real s = 0;
    for (long long j = threadIdx.x; j < M; j += blockDim.x) s += load_as(x[bn_index(j, c, C, L)]);
    const acc_real mu = block_allreduce(s, SumOp<acc_real>(), (acc_real)0) / (acc_real)M;
    acc_real q = 0;
    for (long long j = threadIdx.x; j < M; j += blockDim.x) {
        const acc_real d = load_as(x[bn_index(j, c, C, L)]) - mu;
        q += d * d;
    }
    const acc_real var = block_allreduce(q, SumOp<acc_real>(), (acc_real)0) / (acc_real)M;
    if (threadIdx.x == 0) {
        mean[c] = mu;
        invstd[c] = (acc_real)1 / sqrt(var + eps);
        if (running_mean) {
            running_mean[c] = ((acc_real)1 - momentum) * running_mean[c] + momentum * mu;
            running_var[c] = ((acc_real)1 - momentum) * running_var[c] + momentum * var * (acc_real)M / (acc_real)(M - 1);
        }
    }
}

extern "C" __global__ void bn_forward(const real* __restrict__ x, const compute_t<real>* __restrict__ mean,
                                      const compute_t<real>* __restrict__ invstd,
                                      const compute_t<real>* __restrict__ gamma,
                                      const compute_t<real>* __restrict__ beta, real* __restrict__ y, long long n,
                                      int C, long long L) {
    GRID_STRIDE_LOOP(long long, i, n) {
        const int c = (int)(i / L % C);
        const acc_real v = (load_as(x[i]) - mean[c]) * invstd[c];
        y[i] = convert<real>((gamma ? v * gamma[c] : v) + (beta ? beta[c] : (acc_real)0));
    }
}

extern "C" __global__ void bn_backward(const real* __restrict__ x, const real* __restrict__ dy,
                                       const compute_t<real>* __restrict__ mean,
                                       const compute_t<real>* __restrict__ invstd,
                                       const compute_t<real>* __restrict__ gamma, real* __restrict__ dx,
                                       compute_t<real>* __restrict__ dgamma, compute_t<real>* __restrict__ dbeta, int N,
                                       int C, long long L, int batch_stats) {
    const int c = blockIdx.x;
    const long long M = (long long)N * L;
    const acc_real mu = mean[c], inv = invstd[c];
    acc_real s = 0, sx = 0;
    for (long long j = threadIdx.x; j < M; j += blockDim.x) {
        const long long i = bn_index(j, c, C, L);
        const acc_real d = load_as(dy[i]);
        s += d;
        sx += d * (load_as(x[i]) - mu) * inv;
    }
    const acc_real sum_dy = block_allreduce(s, SumOp<acc_real>(), (acc_real)0);
    const acc_real sum_dy_xhat = block_allreduce(sx, SumOp<acc_real>(), (acc_real)0);
    if (threadIdx.x == 0 && dgamma) dgamma[c] += sum_dy_xhat;
    if (threadIdx.x == 0 && dbeta) dbeta[c] += sum_dy;
    // y = gamma xhat + beta, xhat = (x - mean) invstd with mean, var over the channel's M elements:
    // dL/dx = gamma invstd / M (M dy - sum(dy) - xhat sum(dy xhat))
    const acc_real g = (gamma ? gamma[c] : (acc_real)1) * inv;
    const acc_real a = batch_stats ? sum_dy / (acc_real)M : (acc_real)0;
    const acc_real b = batch_stats ? sum_dy_xhat / (acc_real)M : (acc_real)0;
    for (long long j = threadIdx.x; j < M; j += blockDim.x) {
        const long long i = bn_index(j, c, C, L);
        dx[i] = convert<real>(g * (load_as(dy[i]) - a - (load_as(x[i]) - mu) * inv * b));
    }
}
