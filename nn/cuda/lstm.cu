// lstm.cu: the elementwise parts of an LSTM step, fused (as Chainer's lstm.py does), and the layout
// changes around it. `real` is the element type. Gate order i, f, g, o (PyTorch's); G = 4H.
// gates (N, 4H) holds the pre-activations x W_ih^T + h W_hh^T on entry to lstm_gates_forward and is
// overwritten with the activated gates i, f, g, o, which the backward step needs.
//
// lstm_gates_forward:  grid-stride loop, one thread per (n, j), j < H: adds b_ih + b_hh, activates
//                      i = s(a_i), f = s(a_f), g = tanh(a_g), o = s(a_o) in place, then
//                      c = f c_prev + i g and h = o tanh(c); keeps tanh(c) in tanh_c for the backward step
//                      (which would otherwise compute it again: one transcendental of five per unit).
//                      On the simulator, float: one thread per run of LSTM_RUN units of a row, as vectors
//                      (gpublas/runtime/sim/vector_math.h; LSTM_GPU_FORM builds the GPU's form there, for the tests).
// lstm_gates_backward: grid-stride loop, one thread per (n, j): dh = d_out + dh_rec (the two routes into
//                      h_t); dc = dc_next + dh o (1 - tanh(c)^2), tanh(c) read from the forward's tanh_c; writes
//                      the pre-activation gradients dgates (N, 4H) and replaces dc[n, j] with dc_prev = dc f
//                      (same element, same thread). On the simulator, float: runs as the forward step's, the
//                      same arithmetic on vectors (the same bits).
// batch_first <-> time-major is gpublas' swap01 (cuda_src/transpose.cu).
#include "common.cuh"

// c = f c_prev + i g as written: two products and a sum, each rounded. nvcc would fuse one product into the sum
// (an FMA, one rounding fewer); the simulator's runs (float16v, the template) are built without contraction.
template <class T>
__device__ __forceinline__ T cell_update(T f, T cp, T i, T g) { return f * cp + i * g; }
__device__ __forceinline__ float cell_update(float f, float cp, float i, float g) {
    return __fadd_rn(__fmul_rn(f, cp), __fmul_rn(i, g));
}
__device__ __forceinline__ double cell_update(double f, double cp, double i, double g) {
    return __dadd_rn(__dmul_rn(f, cp), __dmul_rn(i, g));
}

// One unit's activations and cell update: T is `real` (one unit), or on the simulator a run of 16 float units
// (gpublas/runtime/sim/vector_math.h's float16v, whose sigmoid and tanh overloads this reaches).
template <class T>
__device__ __forceinline__ void lstm_cell(T& ai, T& af, T& ag, T& ao, T cp, T& cn, T& tc, T& h) {
    ai = sigmoid(ai); af = sigmoid(af); ag = tanh(ag); ao = sigmoid(ao);  // i, f, g, o
    cn = cell_update(af, cp, ai, ag);
    tc = tanh(cn);
    h = ao * tc;
}

#if defined(__CUDA_ARCH_SIM__) && !defined(LSTM_GPU_FORM)
#define LSTM_SIM_RUNS 1
#endif
#define LSTM_RUN 16  // units of a simulated thread's run (float; nn.kernels reads it)

#if defined(LSTM_SIM_RUNS)
// The simulator's runs (float): a grid-stride loop over the runs of LSTM_RUN units of every row n, calling
// f(row, j0, e, w, load) with row = n * 4H + j0 (the run in the gates), e = n * H + j0 (in the (N, H) arrays)
// and w its units (LSTM_RUN, or fewer in a row's last run); load(p) reads w floats at p (null: none) into a
// float16v, zeros after them: the padding is computed, never stored.
template <class F>
__device__ __forceinline__ void for_each_run(int N, int H, F f) {
    const int runs = (H + LSTM_RUN - 1) / LSTM_RUN;
    GRID_STRIDE_LOOP(long long, t, (long long)N * runs) {
        const long long n = t / runs;
        const int j0 = (int)(t - n * runs) * LSTM_RUN, w = H - j0 < LSTM_RUN ? H - j0 : LSTM_RUN;
        auto load = [w](const real* p) {
            gpublas_sim::float16v v = {};
            if (p) memcpy(&v, p, w * sizeof(real));
            return v;
        };
        f(n * 4 * H + j0, j0, n * H + j0, w, load);
    }
}
#endif

extern "C" __global__ void lstm_gates_forward(real* __restrict__ gates, const real* __restrict__ b_ih,
                                              const real* __restrict__ b_hh, const real* __restrict__ c_prev,
                                              real* __restrict__ h, real* __restrict__ c, real* __restrict__ tanh_c,
                                              int N, int H) {
#if defined(LSTM_SIM_RUNS)
    if constexpr (sizeof(real) == 4) {  // the simulator, float: runs of LSTM_RUN units, vector_math.h's exp, tanh
        for_each_run(N, H, [&](long long row, int j0, long long e, int w, auto load) {
            real* a = gates + row;
            gpublas_sim::float16v g[4], cn, tc, hv;
            for (int q = 0; q < 4; ++q) g[q] = load(a + q * H) + load(b_ih ? b_ih + q * H + j0 : nullptr)
                                                             + load(b_hh ? b_hh + q * H + j0 : nullptr);
            lstm_cell(g[0], g[1], g[2], g[3], load(c_prev + e), cn, tc, hv);
            for (int q = 0; q < 4; ++q) memcpy(a + q * H, &g[q], w * sizeof(real));
            memcpy(c + e, &cn, w * sizeof(real));
            memcpy(tanh_c + e, &tc, w * sizeof(real));
            memcpy(h + e, &hv, w * sizeof(real));
        });
        return;
    }
#endif
    const long long total = (long long)N * H;
    GRID_STRIDE_LOOP(long long, e, total) {
        const int n = (int)(e / H), j = (int)(e - (long long)n * H);
        real* a = gates + (long long)n * 4 * H;
        real ai = a[j], af = a[H + j], ag = a[2 * H + j], ao = a[3 * H + j];
        if (b_ih) { ai += b_ih[j]; af += b_ih[H + j]; ag += b_ih[2 * H + j]; ao += b_ih[3 * H + j]; }
        if (b_hh) { ai += b_hh[j]; af += b_hh[H + j]; ag += b_hh[2 * H + j]; ao += b_hh[3 * H + j]; }
        real cn, tc, hv;
        lstm_cell(ai, af, ag, ao, c_prev[e], cn, tc, hv);
        a[j] = ai; a[H + j] = af; a[2 * H + j] = ag; a[3 * H + j] = ao;
        c[e] = cn;
        tanh_c[e] = tc;
        h[e] = hv;
    }
}

// One unit's backward step (T as for lstm_cell): from the activated gates i, f, g, o, tanh(c), c_prev and the
// gradient dh reaching h, the gate pre-activations' gradients da and dc replaced by dc_prev.
template <class T>
__device__ __forceinline__ void lstm_cell_backward(T i, T f, T g, T o, T tc, T cp, T dh, T& dc, T (&da)[4]) {
    // h = o tanh(c): dh/do = tanh(c), dh/dc = o (1 - tanh(c)^2)
    const T dcell = dc + dh * o * ((real)1 - tc * tc);
    const T d_o = dh * tc;
    // c = f c_prev + i g
    const T d_i = dcell * g, d_f = dcell * cp, d_g = dcell * i;
    // through the activations: s' = s (1 - s), tanh' = 1 - tanh^2
    da[0] = d_i * i * ((real)1 - i);
    da[1] = d_f * f * ((real)1 - f);
    da[2] = d_g * ((real)1 - g * g);
    da[3] = d_o * o * ((real)1 - o);
    dc = dcell * f;
}

extern "C" __global__ void lstm_gates_backward(const real* __restrict__ gates, const real* __restrict__ c_prev,
                                               const real* __restrict__ tanh_c, const real* __restrict__ d_out,
                                               const real* __restrict__ dh_rec, real* __restrict__ dc,
                                               real* __restrict__ dgates, int N, int H) {
#if defined(LSTM_SIM_RUNS)
    if constexpr (sizeof(real) == 4) {  // the simulator, float: runs of LSTM_RUN units, as the forward step
        for_each_run(N, H, [&](long long row, int, long long e, int w, auto load) {
            const real* a = gates + row;
            gpublas_sim::float16v dcv = load(dc + e), d[4];
            const gpublas_sim::float16v dh = load(dh_rec ? dh_rec + e : nullptr) + load(d_out ? d_out + e : nullptr);
            lstm_cell_backward(load(a), load(a + H), load(a + 2 * H), load(a + 3 * H), load(tanh_c + e),
                               load(c_prev + e), dh, dcv, d);
            for (int q = 0; q < 4; ++q) memcpy(dgates + row + q * H, &d[q], w * sizeof(real));
            memcpy(dc + e, &dcv, w * sizeof(real));
        });
        return;
    }
#endif
    const long long total = (long long)N * H;
    GRID_STRIDE_LOOP(long long, e, total) {
        const int n = (int)(e / H), j = (int)(e - (long long)n * H);
        const real* a = gates + (long long)n * 4 * H;
        real* da = dgates + (long long)n * 4 * H;
        real dh = dh_rec ? dh_rec[e] : (real)0;
        if (d_out) dh += d_out[e];
        real d[4], dcv = dc[e];
        lstm_cell_backward(a[j], a[H + j], a[2 * H + j], a[3 * H + j], tanh_c[e], c_prev[e], dh, dcv, d);
        for (int q = 0; q < 4; ++q) da[q * H + j] = d[q];
        dc[e] = dcv;
    }
}
