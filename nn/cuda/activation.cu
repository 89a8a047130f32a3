// activation.cu: activations and bias handling for nn's layers, fused where they always go together.
// `real` is the element type (-Dreal=float, double, __half or __nv_bfloat16; 16-bit data is computed in
// float, common.cuh's acc_real, and rounded once on store). `act` selects the activation: common.cuh's
// ACT_IDENTITY, ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_GELU, ACT_GELU_TANH (act_apply, act_grad_from_output,
// act_grad_from_input).
//
// act_forward:        grid-stride loop, one element per thread: y[i] = act(x[i]) (y may be x).
// act_backward:       grid-stride loop, one element per thread: dx[i] = dy[i] * act'(.) written in
//                     terms of the forward OUTPUT y (relu: y > 0, tanh: 1 - y^2, sigmoid: y (1 - y)),
//                     so forward only has to keep y. dx may be dy.
// act_backward_input: grid-stride loop, one element per thread: dx[i] = dy[i] * act'(x[i]) from the forward
//                     INPUT x (the GELUs' derivative has no form in y). dx may be dy.
// bias_act_forward:   grid-stride loop over x viewed as (outer, C, inner), one element per thread:
//                     y[i] = act(x[i] + b[(i / inner) % C]) (b may be null: y[i] = act(x[i])); Dense uses
//                     inner = 1. x is acc_real, a GEMM's accumulator output (FP32 for 16-bit y), so the
//                     product, the bias and the activation are rounded to `real` once, on this store, as
//                     a fused GEMM epilogue (cuBLASLt's) does; y may be x when they have one type.
//                     pre (may be null) gets x[i] + b[c] rounded to `real`: the pre-activation that
//                     act_backward_input needs (Dense with a GELU).
//                     C and inner are FastDivmod divisors; 32-bit index math below 2^31 elements.
// The bias gradient (a sum over every axis but the channel) is gpublas' reduce.cu: nn.kernels.bias_grad_sum.
#include "common.cuh"

extern "C" __global__ void act_forward(const real* __restrict__ x, real* y, long long n, int act) {
    GRID_STRIDE_LOOP(long long, i, n)
        y[i] = convert<real>(act_apply(load_as(x[i]), act));
}

extern "C" __global__ void act_backward_input(const real* __restrict__ x, const real* dy, real* dx, long long n,
                                              int act) {
    GRID_STRIDE_LOOP(long long, i, n)
        dx[i] = convert<real>(load_as(dy[i]) * act_grad_from_input(load_as(x[i]), act));
}

extern "C" __global__ void act_backward(const real* __restrict__ y, const real* dy, real* dx, long long n, int act) {
    GRID_STRIDE_LOOP(long long, i, n)
        dx[i] = convert<real>(load_as(dy[i]) * act_grad_from_output(load_as(y[i]), act));
}

template <class I>
__device__ __forceinline__ void bias_act_loop(const acc_real* x, const real* __restrict__ b, real* y, real* pre, I n,
                                              const FastDivmod& C, const FastDivmod& inner, int act) {
    GRID_STRIDE_LOOP(I, i, n) {
        acc_real v = x[i];
        if (b) {
            I j, c;
            div_mod(div_mod(i, inner, j), C, c);  // c = (i / inner) % C
            v += load_as(b[c]);
        }
        if (pre) pre[i] = convert<real>(v);
        y[i] = convert<real>(act_apply(v, act));
    }
}

extern "C" __global__ void bias_act_forward(const acc_real* x, const real* __restrict__ b, real* y, real* pre,
                                            long long n, unsigned long long C_, unsigned long long inner_, int act) {
    const FastDivmod C(C_), inner(inner_);
    if (small_index(n)) bias_act_loop<unsigned>(x, b, y, pre, (unsigned)n, C, inner, act);
    else bias_act_loop<long long>(x, b, y, pre, n, C, inner, act);
}
