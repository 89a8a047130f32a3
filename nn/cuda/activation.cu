// activation.cu: activations and bias handling for nn's layers, fused where they always go together.
// `real` is the element type (-Dreal=float or double). `act` selects the activation:
// 0 identity, 1 relu, 2 tanh, 3 sigmoid.
//
// act_forward:        grid-stride loop, one element per thread: y[i] = act(x[i]) (y may be x).
// act_backward:       grid-stride loop, one element per thread: dx[i] = dy[i] * act'(.) written in
//                     terms of the forward OUTPUT y (relu: y > 0, tanh: 1 - y^2, sigmoid: y (1 - y)),
//                     so forward only has to keep y. dx may be dy.
// bias_act_forward:   grid-stride loop over x viewed as (outer, C, inner), one element per thread:
//                     y[i] = act(x[i] + b[(i / inner) % C]); Dense uses inner = 1, Conv2d inner = H*W.
// bias_grad_sum:      block of BIAS_THREADS (128) threads per channel c (grid = C): each thread sums a
//                     strided share of the (outer, inner) elements of channel c, then a shared-memory
//                     tree reduction in a fixed order; thread 0 ADDS the total into db[c]. Deterministic:
//                     no atomics, the summation order depends only on the shape.
#include "common.cuh"

#define BIAS_THREADS 128

__device__ __forceinline__ real act_apply(real v, int act) {
    if (act == 1) return v > (real)0 ? v : (real)0;
    if (act == 2) return tanh(v);
    if (act == 3) return (real)1 / ((real)1 + exp(-v));
    return v;
}

__device__ __forceinline__ real act_grad_from_output(real y, int act) {
    if (act == 1) return y > (real)0 ? (real)1 : (real)0;
    if (act == 2) return (real)1 - y * y;
    if (act == 3) return y * ((real)1 - y);
    return (real)1;
}

extern "C" __global__ void act_forward(const real* __restrict__ x, real* y, long long n, int act) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = act_apply(x[i], act);
}

extern "C" __global__ void act_backward(const real* __restrict__ y, const real* dy, real* dx, long long n, int act) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dx[i] = dy[i] * act_grad_from_output(y[i], act);
}

extern "C" __global__ void bias_act_forward(const real* x, const real* __restrict__ b, real* y, long long n,
                                            int C, long long inner, int act) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = act_apply(x[i] + b[(i / inner) % C], act);
}

extern "C" __global__ void bias_grad_sum(const real* __restrict__ dy, real* __restrict__ db, long long outer,
                                         int C, long long inner) {
    __shared__ real partial[BIAS_THREADS];
    const int c = blockIdx.x;
    const long long count = outer * inner;
    real s = 0;
    for (long long k = threadIdx.x; k < count; k += blockDim.x) {
        long long o = k / inner, j = k - o * inner;
        s += dy[(o * C + c) * inner + j];
    }
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) db[c] += partial[0];
}
