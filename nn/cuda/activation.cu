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
// The bias gradient (a sum over every axis but the channel) is gpublas' reduce.cu: nn.kernels.bias_grad_sum.
#include "common.cuh"

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
    GRID_STRIDE_LOOP(long long, i, n)
        y[i] = act_apply(x[i], act);
}

extern "C" __global__ void act_backward(const real* __restrict__ y, const real* dy, real* dx, long long n, int act) {
    GRID_STRIDE_LOOP(long long, i, n)
        dx[i] = dy[i] * act_grad_from_output(y[i], act);
}

extern "C" __global__ void bias_act_forward(const real* x, const real* __restrict__ b, real* y, long long n,
                                            int C, long long inner, int act) {
    GRID_STRIDE_LOOP(long long, i, n)
        y[i] = act_apply(x[i] + b[(i / inner) % C], act);
}
