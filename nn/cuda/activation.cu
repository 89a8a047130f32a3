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
//
// The simulator (unless GRID_STRIDE_GPU_FORM, which builds the GPU's loops there for the tests): the launchers
// give a thread a run of about a thousand elements (flat_geometry, where a thread had 8), and the kernels
// switch on `act` once per run, not per element; tanh and GELU's tanh form go 16 elements at a time through
// vector_math.h's tanh (the scalar tanhf's bits: results unchanged; a scalar tanhf is a call g++ cannot
// vectorize); bias_act_forward walks its run in segments of one channel (or, inner = 1, of consecutive
// channels) instead of two divisions an element. 512 x 256 floats, bias over 256 channels, one thread of a
// loaded 2-core VM (medians): bias + identity 0.72 -> 0.06 ms, + ReLU 0.97 -> 0.05, + GELU-tanh 3.4 -> 1.5-1.7;
// act_backward_input GELU-tanh 2.4 -> 1.7, ReLU 1.3 -> 0.04. act_backward's run form switches on act once per run
// too, and takes float data 8 at a time as 32-byte vectors (its scalar ReLU kept a branch that multiplied by 0 on
// one side only, ~4 ns an element of random sign: 32K floats, the digits CNN's, ~80 -> ~10 us). Then
// vector_math.h's tanh in 32-byte quarters and, for float data, whole runs of 16 loaded and stored as vectors
// (act_sim_apply's get16 / put16; bias_act_forward keeps the scalar ones, faster there), same machine, min
// of 200 calls interleaved with the form before: act_forward tanh 0.57 -> 0.35 ms, bias + GELU-tanh ~0.71 and
// act_backward_input GELU-tanh ~0.70 unchanged (their cost is the arithmetic now; tanh alone ~3 ns an element).
// sim spread: act_forward act_backward act_backward_input bias_act_forward
#include "common.cuh"

#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
#define ACT_SIM_RUNS 1
// 16 floats at any float's address: float data's whole runs of 16 load and store as vectors (get16, put16 below:
// the same operations on every element as get and put one by one, which g++ leaves scalar, 2 ns an element)
typedef float act_sim_f16u __attribute__((vector_size(64), aligned(4)));
constexpr bool ACT_SIM_VEC_IO = std::is_same_v<real, float>;

// put(t0 + i, f(x)[i]) for the runs of 16 x[i] = get(t0 + i), t < len (a last short run padded with 0). With float
// data (ACT_SIM_VEC_IO) a whole run of 16 comes from get16(t0) and goes to put16(t0, v) (generic lambdas,
// instantiated only there), unless they are nullptr.
template <class Get, class Put, class Get16, class Put16, class F>
__device__ __forceinline__ void act_sim_map16(long long len, Get get, Put put, Get16 get16, Put16 put16, F f) {
    constexpr bool VEC = ACT_SIM_VEC_IO && !std::is_same_v<Get16, std::nullptr_t>;
    for (long long t0 = 0; t0 < len; t0 += 16) {
        const int w = len - t0 < 16 ? (int)(len - t0) : 16;
        gpublas_sim::float16v x;
        if constexpr (VEC) {
            if (w == 16) {
                put16(t0, f(get16(t0)));
                continue;
            }
        }
        for (int i = 0; i < 16; ++i) x[i] = i < w ? get(t0 + i) : 0.0f;
        x = f(x);
        for (int i = 0; i < w; ++i) put(t0 + i, x[i]);
    }
}

// put(t, act(get(t))) for t < len, ACT a constant: float tanh and GELU-tanh 16 at a time through the vector
// tanh (act_apply's operations in act_apply's order), the others one by one.
template <int ACT, class Get, class Put, class Get16, class Put16>
__device__ __forceinline__ void act_sim_apply(long long len, Get get, Put put, Get16 get16, Put16 put16) {
    if constexpr (sizeof(acc_real) == 4 && (ACT == ACT_TANH || ACT == ACT_GELU_TANH)) {
        act_sim_map16(len, get, put, get16, put16, [](gpublas_sim::float16v x) {
            if (ACT == ACT_TANH) return tanh(x);
            return 0.5f * x * (1.0f + tanh(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
        });
    } else {
        for (long long t = 0; t < len; ++t) put(t, act_apply(get(t), ACT));
    }
}

// put(t, act'(get(t))) for t < len (act_grad_from_input's; GELU-tanh's 16 at a time through the vector tanh)
template <int ACT, class Get, class Put, class Get16, class Put16>
__device__ __forceinline__ void act_sim_grad(long long len, Get get, Put put, Get16 get16, Put16 put16) {
    if constexpr (sizeof(acc_real) == 4 && ACT == ACT_GELU_TANH) {
        act_sim_map16(len, get, put, get16, put16, [](gpublas_sim::float16v x) {
            const float k = 0.79788456080286535588f;
            const gpublas_sim::float16v x2 = x * x, t = tanh(k * (x + 0.044715f * x2 * x));
            return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 0.134145f * x2);
        });
    } else {
        for (long long t = 0; t < len; ++t) put(t, act_grad_from_input(get(t), ACT));
    }
}

// F<ACT>::run(args...) with `act` made a constant
#define ACT_SIM_DISPATCH(F, ...) \
    switch (act) { \
        case ACT_RELU: F<ACT_RELU>::run(__VA_ARGS__); break; \
        case ACT_TANH: F<ACT_TANH>::run(__VA_ARGS__); break; \
        case ACT_SIGMOID: F<ACT_SIGMOID>::run(__VA_ARGS__); break; \
        case ACT_GELU: F<ACT_GELU>::run(__VA_ARGS__); break; \
        case ACT_GELU_TANH: F<ACT_GELU_TANH>::run(__VA_ARGS__); break; \
        default: F<ACT_IDENTITY>::run(__VA_ARGS__); \
    }

template <int ACT>
struct ActForwardSim {
    static __device__ __forceinline__ void run(const real* __restrict__ x, real* y, long long n) {
        long long at, end;
        sim_thread_run(n, at, end);
        act_sim_apply<ACT>(end - at, [&](long long t) { return load_as(x[at + t]); },
                           [&](long long t, acc_real v) { y[at + t] = convert<real>(v); },
                           [&](auto t) { return (gpublas_sim::float16v)*(const act_sim_f16u*)(x + at + t); },
                           [&](auto t, gpublas_sim::float16v v) { *(act_sim_f16u*)(y + at + t) = v; });
    }
};

template <int ACT>
struct ActBackwardSim {
    static __device__ __forceinline__ void run(const real* __restrict__ y, const real* dy, real* dx, long long n) {
        long long at, end;
        sim_thread_run(n, at, end);
        long long i = at;
        if constexpr (ACT_SIM_VEC_IO) {  // float data 8 at a time: act_grad_from_output's operations as vectors
            typedef float f8 __attribute__((vector_size(32)));
            typedef float f8u __attribute__((vector_size(32), aligned(4)));
            for (; i + 8 <= end; i += 8) {
                const f8 yv = *(const f8u*)(y + i), d = *(const f8u*)(dy + i);
                f8 g = f8{} + 1.0f;
                if constexpr (ACT == ACT_RELU) g = yv > 0.0f ? g : f8{};
                else if constexpr (ACT == ACT_TANH) g = 1.0f - yv * yv;
                else if constexpr (ACT == ACT_SIGMOID) g = yv * (1.0f - yv);
                *(f8u*)(dx + i) = d * g;
            }
        }
        for (; i < end; ++i)
            dx[i] = convert<real>(load_as(dy[i]) * act_grad_from_output(load_as(y[i]), ACT));
    }
};

template <int ACT>
struct ActBackwardInputSim {
    static __device__ __forceinline__ void run(const real* __restrict__ x, const real* dy, real* dx, long long n) {
        long long at, end;
        sim_thread_run(n, at, end);
        act_sim_grad<ACT>(end - at, [&](long long t) { return load_as(x[at + t]); },
                          [&](long long t, acc_real g) { dx[at + t] = convert<real>(load_as(dy[at + t]) * g); },
                          [&](auto t) { return (gpublas_sim::float16v)*(const act_sim_f16u*)(x + at + t); },
                          [&](auto t, gpublas_sim::float16v g) {
                              const gpublas_sim::float16v d = *(const act_sim_f16u*)(dy + at + t);
                              *(act_sim_f16u*)(dx + at + t) = d * g;
                          });
    }
};

// A run in segments of one channel c (elements j .. inner - 1 of it) or, with inner = 1, of channels c .. C - 1:
// the bias one value, or consecutive ones, along a segment.
template <int ACT>
struct BiasActSim {
    template <class I>
    static __device__ __forceinline__ void run(const acc_real* x, const real* __restrict__ b, real* y, real* pre, I n,
                                               const FastDivmod& C, const FastDivmod& inner) {
        long long at, end;
        sim_thread_run(n, at, end);
        if (at >= end) return;
        I j = 0, c = 0;
        if (b) div_mod(div_mod((I)at, inner, j), C, c);  // c = (at / inner) % C
        const bool rows = inner.d == 1;
        while (at < end) {
            const long long seg = !b ? end - at : rows ? (long long)(C.d - c) : (long long)(inner.d - j);
            const long long len = end - at < seg ? end - at : seg;
            const acc_real* xs = x + at;
            real* ys = y + at;
            real* ps = pre ? pre + at : nullptr;
            const real* bs = b ? b + c : nullptr;
            act_sim_apply<ACT>(len, [&](long long t) {
                acc_real v = xs[t];
                if (bs) v += load_as(bs[rows ? t : 0]);
                if (ps) ps[t] = convert<real>(v);
                return v;
            }, [&](long long t, acc_real v) { ys[t] = convert<real>(v); }, nullptr, nullptr);  // (vector IO: slower)
            at += len;
            if (b) {
                if (rows) c += (I)len;
                else if ((j += (I)len) == (I)inner.d) { j = 0; ++c; }
                if (c == (I)C.d) c = 0;
            }
        }
    }
};
#else
#define ACT_SIM_RUNS 0
#endif

extern "C" __global__ void act_forward(const real* __restrict__ x, real* y, long long n, int act) {
#if ACT_SIM_RUNS
    ACT_SIM_DISPATCH(ActForwardSim, x, y, n)
#else
    GRID_STRIDE_LOOP(long long, i, n)
        y[i] = convert<real>(act_apply(load_as(x[i]), act));
#endif
}

extern "C" __global__ void act_backward_input(const real* __restrict__ x, const real* dy, real* dx, long long n,
                                              int act) {
#if ACT_SIM_RUNS
    ACT_SIM_DISPATCH(ActBackwardInputSim, x, dy, dx, n)
#else
    GRID_STRIDE_LOOP(long long, i, n)
        dx[i] = convert<real>(load_as(dy[i]) * act_grad_from_input(load_as(x[i]), act));
#endif
}

extern "C" __global__ void act_backward(const real* __restrict__ y, const real* dy, real* dx, long long n, int act) {
#if ACT_SIM_RUNS
    ACT_SIM_DISPATCH(ActBackwardSim, y, dy, dx, n)
#else
    GRID_STRIDE_LOOP(long long, i, n)
        dx[i] = convert<real>(load_as(dy[i]) * act_grad_from_output(load_as(y[i]), act));
#endif
}

template <class I>
__device__ __forceinline__ void bias_act_loop(const acc_real* x, const real* __restrict__ b, real* y, real* pre, I n,
                                              const FastDivmod& C, const FastDivmod& inner, int act) {
#if ACT_SIM_RUNS
    ACT_SIM_DISPATCH(BiasActSim, x, b, y, pre, n, C, inner)
#else
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
#endif
}

extern "C" __global__ void bias_act_forward(const acc_real* x, const real* __restrict__ b, real* y, real* pre,
                                            long long n, unsigned long long C_, unsigned long long inner_, int act) {
    const FastDivmod C(C_), inner(inner_);
#if ACT_SIM_RUNS  // one index type: a run divides once, at its start (the unsigned copy doubled g++'s 6 s here)
    bias_act_loop<long long>(x, b, y, pre, n, C, inner, act);
#else
    if (small_index(n)) bias_act_loop<unsigned>(x, b, y, pre, (unsigned)n, C, inner, act);
    else bias_act_loop<long long>(x, b, y, pre, n, C, inner, act);
#endif
}
