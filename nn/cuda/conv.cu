// conv.cu: the data movement around Conv2d's GEMMs (im2col lowering, NCHW), batched over the minibatch.
// `real` is the element type (float, double, __half, __nv_bfloat16: sums and the bias in acc_real, one
// rounding on store). Y and dcols, the GEMMs' outputs these kernels read, are acc_real (FP32 for 16-bit
// data): a GEMM's FP32 accumulator reaches the one rounding to `real` in the kernel after it.
// Shapes: x (N, C, H, W); kernel (kh, kw) with stride (sh, sw), padding (ph, pw), dilation (dh, dw);
// output (OH, OW); P = OH*OW; K = C*kh*kw.
// cols is (K, N*P): row k = (c, i, j) of the kernel window, column (n, p) of the output, so that
// weight (C_out, K) @ cols = Y (C_out, N*P) in one GEMM.
//
// im2col_nchw:      grid-stride loop, one thread per (c, n, p): the column (n, p) of input channel c's
//                   kh*kw rows of cols, tap by tap (x at the tap or 0 in padding); p fastest so that
//                   consecutive threads write consecutive columns of each row. The index math (two
//                   divisions, then the tap's offsets added) is paid once per kh*kw elements.
// col2im_nchw:      grid-stride loop, one thread per dx element (n, c, h, w): GATHERS every (i, j, oh, ow)
//                   whose tap lands on (h, w) and sums dcols (acc_real) there, in a fixed order (no atomics,
//                   so the result does not depend on thread order). Writes (not adds) dx.
// cnp_to_nchw_bias: grid-stride loop, one thread per y element (n, c, p): y[n,c,p] = Y[c,n,p] + b[c],
//                   then the activation `act` (common.cuh's ACT_*); b may be null. Y is acc_real.
// Its inverse without bias (dY (C, N*P) from dy (N, C, P)) is gpublas' swap01 (cuda_src/transpose.cu).
//
// The simulator (unless GRID_STRIDE_GPU_FORM, which builds the GPU's loops there for the tests): the launchers
// give a thread one run of about a thousand items (flat_geometry, where a thread had 8), decomposed once:
// im2col walks its run tap by tap in segments of one output row (one loop per segment, no division);
// col2im in segments of one dx row (at most 64 elements) summed in locals, each element's taps added in the
// GPU form's order (the same bits); cnp_to_nchw_bias in (n, c) rows of P, the activation switched on once per
// run (a loop g++ vectorizes). Digits CNN step shapes (batch 32, 16 channels of 4x4 / 1 of 8x8), one thread of
// a loaded 2-core VM, us: cnp_to_nchw_bias 244 -> 17 and 153 -> 16; col2im 320 -> 115-240, im2col 270 -> 140-260
// (rows of 4 leave ~10 ns of loop overhead per row and tap: what is left to gain here).
//
// Index math: every size a kernel divides by (N, C, H, W, kh, kw, sh, sw, OH, OW; N*OH*OW for im2col_nchw,
// P for cnp_to_nchw_bias)
// arrives as a FastDivmod divisor (gpublas.runtime.launch.fast_divisor), and each kernel body is a template on
// its index type: 32-bit (unsigned, __umulhi + shift per division) when every array it touches has
// fewer than 2^31 elements, else 64-bit with plain divisions.
#include "common.cuh"

#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
#define CONV_SIM_RUNS 1

// The first d * s >= t (0 for t <= 0): the first output column whose tap lands at or after input column t.
__device__ __forceinline__ int conv_ceil_div(int t, const FastDivmod& s) {
    return t <= 0 ? 0 : (int)s.div((unsigned)(t + s.d - 1));
}
#else
#define CONV_SIM_RUNS 0
#endif

// The sizes of one convolution, each usable as a value (.d) and as a divisor.
struct ConvGeom {
    FastDivmod N, C, H, W, kh, kw, sh, sw, OH, OW;
    int ph, pw, dh, dw;
};

// Both kernels take the same arguments: x or dx, cols or dcols, then these (divisors packed by the host).
__device__ __forceinline__ ConvGeom conv_geom(unsigned long long N, unsigned long long C, unsigned long long H,
                                              unsigned long long W, unsigned long long kh, unsigned long long kw,
                                              unsigned long long sh, unsigned long long sw, int ph, int pw, int dh,
                                              int dw, unsigned long long OH, unsigned long long OW) {
    return ConvGeom{FastDivmod(N), FastDivmod(C), FastDivmod(H), FastDivmod(W), FastDivmod(kh), FastDivmod(kw),
                    FastDivmod(sh), FastDivmod(sw), FastDivmod(OH), FastDivmod(OW), ph, pw, dh, dw};
}

// thread item e = c * NP + q with q = (n * OH + oh) * OW + ow: one division by NP, one chain of two for q;
// then the kh*kw taps of channel c write rows k = (c * kh + i) * kw + j, the tap's input row and column
// stepping by dh and dw
#if CONV_SIM_RUNS
// Small planes (the digits CNN's 4 x 4 and 8 x 8, rows of 4 to 8 columns) leave the row forms below ~10 ns of
// loop overhead per row and tap. Where a convolution's taps x output pixels fit CONV_SIM_TABLE entries, a
// thread first tabulates, per tap, the input pixel each output pixel reads (h * W + w in its plane, -1 in
// padding), then walks whole (n, c) planes through the table: one loop of P per tap, no row breaks.
#ifndef CONV_SIM_TABLE
#define CONV_SIM_TABLE 1024  // ints on the simulated thread's stack (4 KB; a fiber has 64 KB)
#endif

// tab[(i * kw + j) * P + p]: the input pixel output pixel p = oh * OW + ow reads through tap (i, j), or -1
__device__ __forceinline__ void conv_tap_table(int* tab, const ConvGeom& g) {
    for (int i = 0, t = 0; i < g.kh.d; ++i)
        for (int j = 0; j < g.kw.d; ++j)
            for (int oh = 0; oh < g.OH.d; ++oh) {
                const int h = oh * g.sh.d - g.ph + i * g.dh;
                for (int ow = 0; ow < g.OW.d; ++ow, ++t) {
                    const int w = ow * g.sw.d - g.pw + j * g.dw;
                    tab[t] = h >= 0 && h < g.H.d && w >= 0 && w < g.W.d ? h * g.W.d + w : -1;
                }
            }
}

__device__ __forceinline__ bool conv_sim_tabled(const ConvGeom& g) {
    return (long long)g.kh.d * g.kw.d * g.OH.d * g.OW.d <= CONV_SIM_TABLE;
}

// im2col through the table: the thread's items (c, n, p) in segments of one (c, n) plane, each tap's segment
// of its cols row gathered from the plane (x at the tapped pixel or 0). The GPU form's values.
template <class I>
__device__ __forceinline__ void im2col_sim_table(const real* __restrict__ x, real* __restrict__ cols, long long at,
                                                 long long end, const ConvGeom& g, const FastDivmod& NP) {
    int tab[CONV_SIM_TABLE > 0 ? CONV_SIM_TABLE : 1];
    conv_tap_table(tab, g);
    const int taps = g.kh.d * g.kw.d, P = g.OH.d * g.OW.d, HW = g.H.d * g.W.d;
    I q;
    I c = div_mod((I)at, NP, q);
    I n = q / (I)P, p = q % (I)P;
    for (long long e = at; e < end;) {
        const int len = (int)min((long long)(P - (int)p), end - e);
        const real* xc = x + (n * (I)g.C.d + c) * (I)HW;
        for (int tap = 0; tap < taps; ++tap) {
            real* out = cols + (c * (I)taps + (I)tap) * (I)NP.d + n * (I)P + p;
            const int* tp = tab + tap * P + (int)p;
            for (int t = 0; t < len; ++t) {
                const int k = tp[t];
                const real v = xc[k < 0 ? 0 : k];
                out[t] = k < 0 ? convert<real>(0.0f) : v;
            }
        }
        e += len;
        p = 0;
        if (++n == (I)g.N.d) { n = 0; ++c; }
    }
}

// The simulator's im2col: the thread's run of items (c, n, oh, ow) in segments of one output row (c, n, oh),
// tap by tap: a segment of row k = (c, i, j) of cols is zeros, then a copy of the input row h at stride sw,
// then zeros (the output columns whose tap falls in padding, found once per tap). The same values as the
// GPU form: every element is written once, with x at its tap or 0.
template <class I>
__device__ __forceinline__ void im2col_sim(const real* __restrict__ x, real* __restrict__ cols, I total,
                                           const ConvGeom& g, const FastDivmod& NP) {
    long long at, end;
    if (!sim_thread_run(total, at, end)) return;
    if (conv_sim_tabled(g)) return im2col_sim_table<I>(x, cols, at, end, g, NP);
    const int kh = g.kh.d, kw = g.kw.d, H = g.H.d, W = g.W.d, OH = g.OH.d, OW = g.OW.d, sw = g.sw.d;
    I q_at, ow_at, oh_at;
    const I c_at = div_mod((I)at, NP, q_at);
    const I n_at = div_mod(div_mod(q_at, g.OW, ow_at), g.OH, oh_at);
    for (int i = 0; i < kh; ++i)
        for (int j = 0; j < kw; ++j) {
            const int off = j * g.dw - g.pw;  // output column ow reads input column ow * sw + off
            I c = c_at, n = n_at, q = q_at;
            int oh = (int)oh_at, ow = (int)ow_at;
            for (long long e = at; e < end;) {
                const int len = (int)min((long long)(OW - ow), end - e);
                real* out = cols + ((c * (I)kh + (I)i) * (I)kw + (I)j) * (I)NP.d + q;
                const int h = oh * g.sh.d - g.ph + i * g.dh;
                const bool row_in = h >= 0 && h < H;
                // one loop, no branch: a tap in padding reads the row's first element and stores 0 (loops
                // that g++ turns into memset and memcpy calls cost more than a row of 4 to 8 elements)
                const real* xr = x + ((n * (I)g.C.d + c) * (I)H + (I)(row_in ? h : 0)) * (I)W;
                for (int t = 0; t < len; ++t) {
                    const int w = (ow + t) * sw + off;
                    const bool in = row_in && w >= 0 && w < W;
                    const real v = xr[in ? w : 0];
                    out[t] = in ? v : convert<real>(0.0f);
                }
                e += len;
                q += (I)len;
                if ((ow += len) == OW) {
                    ow = 0;
                    if (++oh == OH) {
                        oh = 0;
                        if (++n == (I)g.N.d) { n = 0; ++c; q = 0; }
                    }
                }
            }
        }
}
#endif

template <class I>
__device__ __forceinline__ void im2col_loop(const real* __restrict__ x, real* __restrict__ cols, I total,
                                            const ConvGeom& g, const FastDivmod& NP) {
#if CONV_SIM_RUNS
    im2col_sim<I>(x, cols, total, g, NP);
#else
    const int kh = g.kh.d, kw = g.kw.d, H = g.H.d, W = g.W.d;
    GRID_STRIDE_LOOP(I, e, total) {
        I q, ow, oh;
        const I c = div_mod(e, NP, q);
        const I n = div_mod(div_mod(q, g.OW, ow), g.OH, oh);
        const real* xc = x + (n * (I)g.C.d + c) * (I)H * (I)W;
        real* out = cols + c * (I)(kh * kw) * (I)NP.d + q;
        const int h0 = (int)oh * g.sh.d - g.ph, w0 = (int)ow * g.sw.d - g.pw;
        for (int i = 0; i < kh; ++i) {
            const int h = h0 + i * g.dh;
            const bool row_in = h >= 0 && h < H;
            for (int j = 0; j < kw; ++j, out += NP.d) {
                const int w = w0 + j * g.dw;
                *out = (row_in && w >= 0 && w < W) ? xc[(I)h * (I)W + (I)w] : convert<real>(0.0f);
            }
        }
    }
#endif
}

extern "C" __global__ void im2col_nchw(const real* __restrict__ x, real* __restrict__ cols, unsigned long long N,
                                       unsigned long long C,
                                       unsigned long long H, unsigned long long W, unsigned long long kh,
                                       unsigned long long kw, unsigned long long sh, unsigned long long sw, int ph,
                                       int pw, int dh, int dw, unsigned long long OH, unsigned long long OW,
                                       unsigned long long NP_) {
    const ConvGeom g = conv_geom(N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW);
    const FastDivmod NP(NP_);  // N * OH * OW
    const long long total = (long long)g.C.d * NP.d;  // thread items; cols has kh*kw times as many elements
    if (small_index(total * g.kh.d * g.kw.d) && small_index((long long)g.N.d * g.C.d * g.H.d * g.W.d))
        im2col_loop<unsigned>(x, cols, (unsigned)total, g, NP);
    else
        im2col_loop<long long>(x, cols, total, g, NP);
}

#if CONV_SIM_RUNS
#define COL2IM_SIM_CHUNK 64

// col2im through the table (conv_sim_tabled, and a plane of at most COL2IM_SIM_PLANE pixels): the thread's dx
// elements in segments of one (n, c) plane [lo, hi), summed in locals: tap by tap in the GPU form's order (i,
// then j), every output pixel's dcols value added to the pixel its tap lands on (a tap's pixels land on
// distinct pixels). Each element gets its taps in the GPU form's order: the same sums, bit for bit.
#define COL2IM_SIM_PLANE 1024
template <class I>
__device__ __forceinline__ void col2im_sim_table(const acc_real* __restrict__ dcols, real* __restrict__ dx,
                                                 long long at, long long end, const ConvGeom& g) {
    int tab[CONV_SIM_TABLE > 0 ? CONV_SIM_TABLE : 1];
    conv_tap_table(tab, g);
    const int taps = g.kh.d * g.kw.d, P = g.OH.d * g.OW.d, HW = g.H.d * g.W.d;
    const I NP = (I)g.N.d * (I)P;
    acc_real s[COL2IM_SIM_PLANE];
    I hw, c;
    I n = div_mod((I)at / (I)HW, g.C, c);
    hw = (I)at % (I)HW;
    for (long long e = at; e < end;) {
        const int lo = (int)hw, hi = (int)min((long long)HW, lo + (end - e));
        for (int t = lo; t < hi; ++t) s[t] = 0;
        for (int tap = 0; tap < taps; ++tap) {
            const acc_real* src = dcols + (c * (I)taps + (I)tap) * NP + n * (I)P;
            const int* tp = tab + tap * P;
            for (int p = 0; p < P; ++p) {
                const int k = tp[p];
                if (k >= lo && k < hi) s[k] += src[p];
            }
        }
        real* out = dx + e - lo;
        for (int t = lo; t < hi; ++t) out[t] = convert<real>(s[t]);
        e += hi - lo;
        hw = 0;
        if (++c == (I)g.C.d) { c = 0; ++n; }
    }
}

// The simulator's col2im: the thread's run of dx in segments of one input row (n, c, h), at most
// COL2IM_SIM_CHUNK elements, summed in locals: for each kernel row i whose tap lands on h (the output row oh
// found once a segment), each j adds the dcols run of the output columns ow landing in the segment. Each
// element gets its taps in the GPU form's order (i, then j, skipping the same taps): the same sums, bit for bit.
template <class I>
__device__ __forceinline__ void col2im_sim(const acc_real* __restrict__ dcols, real* __restrict__ dx, I total,
                                           const ConvGeom& g) {
    long long at, end;
    if (!sim_thread_run(total, at, end)) return;
    if (conv_sim_tabled(g) && (long long)g.H.d * g.W.d <= COL2IM_SIM_PLANE)
        return col2im_sim_table<I>(dcols, dx, at, end, g);
    const int kh = g.kh.d, kw = g.kw.d, H = g.H.d, W = g.W.d, OW = g.OW.d, sw = g.sw.d;
    const I P = (I)g.OH.d * (I)OW, NP = (I)g.N.d * P;
    I w_at, h_at, c;
    I n = div_mod(div_mod(div_mod((I)at, g.W, w_at), g.H, h_at), g.C, c);
    int h = (int)h_at, w = (int)w_at;
    acc_real s[COL2IM_SIM_CHUNK];
    for (long long e = at; e < end;) {
        const int len = (int)min((long long)min(W - w, COL2IM_SIM_CHUNK), end - e);
        for (int t = 0; t < len; ++t) s[t] = 0;
        for (int i = 0; i < kh; ++i) {
            const int th = h + g.ph - i * g.dh;  // = oh * sh when tap i of output row oh lands on h
            if (th < 0) continue;
            unsigned oh, rh;
            oh = div_mod((unsigned)th, g.sh, rh);
            if (rh || (int)oh >= g.OH.d) continue;
            for (int j = 0; j < kw; ++j) {
                // output column ow's tap j lands on input column ow * sw - t0 + w: in the segment for ow in [lo, hi)
                const int t0 = w + g.pw - j * g.dw;
                const int lo = conv_ceil_div(t0, g.sw), hi = min(conv_ceil_div(t0 + len, g.sw), OW);
                const acc_real* src = dcols + ((c * (I)kh + (I)i) * (I)kw + (I)j) * NP + n * P + (I)oh * (I)OW;
                if (sw == 1)
                    for (int ow = lo; ow < hi; ++ow) s[ow - t0] += src[ow];
                else
                    for (int ow = lo; ow < hi; ++ow) s[ow * sw - t0] += src[ow];
            }
        }
        real* out = dx + e;
        for (int t = 0; t < len; ++t) out[t] = convert<real>(s[t]);
        e += len;
        if ((w += len) == W) {
            w = 0;
            if (++h == H) {
                h = 0;
                if (++c == (I)g.C.d) { c = 0; ++n; }
            }
        }
    }
}
#endif

// dx element e = ((n * C + c) * H + h) * W + w
template <class I>
__device__ __forceinline__ void col2im_loop(const acc_real* __restrict__ dcols, real* __restrict__ dx, I total,
                                            const ConvGeom& g) {
#if CONV_SIM_RUNS
    col2im_sim<I>(dcols, dx, total, g);
#else
    const I P = (I)g.OH.d * (I)g.OW.d, NP = (I)g.N.d * P;
    GRID_STRIDE_LOOP(I, e, total) {
        I w, h, c;
        const I n = div_mod(div_mod(div_mod(e, g.W, w), g.H, h), g.C, c);
        acc_real s = 0;
        for (int i = 0; i < g.kh.d; ++i) {
            const int th = (int)h + g.ph - i * g.dh;  // = oh * sh when tap i of output row oh lands on h
            if (th < 0) continue;
            unsigned oh, rh;
            oh = div_mod((unsigned)th, g.sh, rh);
            if (rh || (int)oh >= g.OH.d) continue;
            for (int j = 0; j < g.kw.d; ++j) {
                const int tw = (int)w + g.pw - j * g.dw;
                if (tw < 0) continue;
                unsigned ow, rw;
                ow = div_mod((unsigned)tw, g.sw, rw);
                if (rw || (int)ow >= g.OW.d) continue;
                const I k = (c * (I)g.kh.d + (I)i) * (I)g.kw.d + (I)j;
                s += dcols[k * NP + n * P + (I)oh * (I)g.OW.d + (I)ow];
            }
        }
        dx[e] = convert<real>(s);
    }
#endif
}

extern "C" __global__ void col2im_nchw(const acc_real* __restrict__ dcols, real* __restrict__ dx, unsigned long long N, unsigned long long C,
                                       unsigned long long H, unsigned long long W, unsigned long long kh,
                                       unsigned long long kw, unsigned long long sh, unsigned long long sw, int ph,
                                       int pw, int dh, int dw, unsigned long long OH, unsigned long long OW) {
    const ConvGeom g = conv_geom(N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW);
    const long long total = (long long)g.N.d * g.C.d * g.H.d * g.W.d;
    if (small_index(total) && small_index((long long)g.C.d * g.kh.d * g.kw.d * g.N.d * g.OH.d * g.OW.d))
        col2im_loop<unsigned>(dcols, dx, (unsigned)total, g);
    else
        col2im_loop<long long>(dcols, dx, total, g);
}

#if CONV_SIM_RUNS
// The simulator's cnp_to_nchw_bias: the thread's run of y in segments of one (n, c) row of P elements, each a
// contiguous run of Y with one bias value, the activation a constant (switched on once per run): a loop g++
// vectorizes. The same operations per element as the GPU form (no bias: nothing added).
template <int ACT>
struct CnpToNchwSim {
    template <class I>
    static __device__ __forceinline__ void run(const acc_real* __restrict__ Y, const real* __restrict__ b,
                                               real* __restrict__ y, I total, I N, const FastDivmod& C,
                                               const FastDivmod& P) {
        long long at, end;
        if (!sim_thread_run(total, at, end)) return;
        I p, c;
        I n = div_mod(div_mod((I)at, P, p), C, c);
        for (long long e = at; e < end;) {
            const int len = (int)min((long long)(P.d - (int)p), end - e);
            const acc_real* src = Y + (c * N + n) * (I)P.d + p;
            real* out = y + e;
            if (b) {
                const acc_real bc = load_as(b[c]);
                for (int t = 0; t < len; ++t) out[t] = convert<real>(act_apply(src[t] + bc, ACT));
            } else {
                for (int t = 0; t < len; ++t) out[t] = convert<real>(act_apply(src[t], ACT));
            }
            e += len;
            p = 0;
            if (++c == (I)C.d) { c = 0; ++n; }
        }
    }
};
#endif

// y element e = (n * C + c) * P + p; Y element (c * N + n) * P + p
template <class I>
__device__ __forceinline__ void cnp_to_nchw_loop(const acc_real* __restrict__ Y, const real* __restrict__ b,
                                                 real* __restrict__ y, I total, I N, const FastDivmod& C,
                                                 const FastDivmod& P, int act) {
#if CONV_SIM_RUNS
    switch (act) {
        case ACT_RELU: CnpToNchwSim<ACT_RELU>::run(Y, b, y, total, N, C, P); break;
        case ACT_TANH: CnpToNchwSim<ACT_TANH>::run(Y, b, y, total, N, C, P); break;
        case ACT_SIGMOID: CnpToNchwSim<ACT_SIGMOID>::run(Y, b, y, total, N, C, P); break;
        case ACT_GELU: CnpToNchwSim<ACT_GELU>::run(Y, b, y, total, N, C, P); break;
        case ACT_GELU_TANH: CnpToNchwSim<ACT_GELU_TANH>::run(Y, b, y, total, N, C, P); break;
        default: CnpToNchwSim<ACT_IDENTITY>::run(Y, b, y, total, N, C, P);
    }
#else
    GRID_STRIDE_LOOP(I, e, total) {
        I p, c;
        const I n = div_mod(div_mod(e, P, p), C, c);
        acc_real v = Y[(c * N + n) * (I)P.d + p];
        if (b) v += load_as(b[c]);
        y[e] = convert<real>(act_apply(v, act));
    }
#endif
}

extern "C" __global__ void cnp_to_nchw_bias(const acc_real* __restrict__ Y, const real* __restrict__ b, real* __restrict__ y,
                                            long long N, unsigned long long C_, unsigned long long P_, int act) {
    const FastDivmod C(C_), P(P_);
    const long long total = N * C.d * P.d;
#if CONV_SIM_RUNS  // one index type: a run divides once, at its start (as activation.cu's bias_act_forward)
    cnp_to_nchw_loop<long long>(Y, b, y, total, N, C, P, act);
#else
    if (small_index(total)) cnp_to_nchw_loop<unsigned>(Y, b, y, (unsigned)total, (unsigned)N, C, P, act);
    else cnp_to_nchw_loop<long long>(Y, b, y, total, N, C, P, act);
#endif
}
