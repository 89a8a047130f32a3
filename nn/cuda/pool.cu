// pool.cu: 2-D max and average pooling over NCHW data (planes = N*C), forward and backward.
// `real` is the element type (float16/bfloat16 computed in float, common.cuh's acc_real, and rounded
// once on store). Window (kh, kw), stride (sh, sw), padding (ph, pw); output (OH, OW).
// Padding never wins a max (it is -inf) and counts in the average's divisor (PyTorch's defaults:
// count_include_pad=True, ceil_mode=False, so every window's divisor is kh*kw).
//
// maxpool_forward:  grid-stride loop, one thread per output element (plane, oh, ow): the max over its
//                   window and the argmax as a flat index h*W + w into the input plane (first max wins;
//                   a NaN wins so that it propagates, as in PyTorch); -1 if the window is all padding.
// maxpool_backward: grid-stride loop, one thread per input element (plane, h, w): GATHERS dy over the
//                   output windows whose argmax is this element, in a fixed order (no atomics).
//                   Windows that do not overlap (kh <= sh, kw <= sw: MaxPool2d(k) itself) take one thread
//                   per output element instead, writing its stride cell of dx (rows oh*sh - ph .. + sh,
//                   the last cell through H - 1; columns alike): dy at the argmax, 0 elsewhere. The cells
//                   tile dx, so each element is still written once, with what the gather would sum.
// avgpool_forward:  grid-stride loop, one thread per output element: the window sum / (kh*kw).
// avgpool_backward: grid-stride loop, one thread per input element: gathers dy / (kh*kw) over the
//                   windows that cover it; non-overlapping windows per output element as above
//                   (dy / (kh*kw) inside the window, 0 in the rest of its cell).
//
// The simulator (unless GRID_STRIDE_GPU_FORM): a thread takes one run of about a thousand items (flat_geometry)
// and walks it in segments of one row (PoolSimRun), the row and column found by two divisions a run; each
// element does what the GPU form does, in its order (the max's test without branches). Digits CNN shapes,
// us on a loaded VM: maxpool_forward 265 -> 170-215, maxpool_backward 275 -> 160-210 (16 planes of 8x8
// per image); 113 -> 70-100 and 147 -> 80-110 (32 of 4x4). The forward's row then became pool_forward_row, its
// window loops of a constant count (2 x 2, MaxPool2d(2)'s, unrolled whole): 16 planes of 8x8, 243 -> 154 us a call.
// The backward's whole 2 x 2 cells are four zeros and d stored at the argmax (a select per element compiled to
// branches an argmax's randomness mispredicts): A/B in one process, 16 planes of 8x8 140-180 -> 80-106 us, 32 of
// 4x4 60-84 -> 34-44 us.
//
// Sizes a kernel divides by (H, W, OH, OW, sh, sw) arrive as FastDivmod divisors (gpublas.runtime.launch.
// fast_divisor); each body is a template on its index type, 32-bit below 2^31 elements (see conv.cu).
//
// The simulator compiles max pooling apart from average pooling (gpublas/runtime/source.py's sim_units): 0.5 s of
// g++ CPU for a first MaxPool2d instead of the family's 1.2 s.
// sim unit: maxpool_forward maxpool_backward
#include "common.cuh"

struct PoolGeom {
    FastDivmod H, W, OH, OW, sh, sw;
    int kh, kw, ph, pw;
};

// Every pool kernel takes (inputs..., planes, then these); the divisors are packed by the host.
__device__ __forceinline__ PoolGeom pool_geom(unsigned long long H, unsigned long long W, unsigned long long OH,
                                              unsigned long long OW, int kh, int kw, unsigned long long sh,
                                              unsigned long long sw, int ph, int pw) {
    return PoolGeom{FastDivmod(H), FastDivmod(W), FastDivmod(OH), FastDivmod(OW), FastDivmod(sh), FastDivmod(sw),
                    kh, kw, ph, pw};
}

__device__ __forceinline__ bool pool_small(long long planes, const PoolGeom& g) {
    return small_index(planes * g.H.d * g.W.d) && small_index(planes * g.OH.d * g.OW.d);
}

// The output rows [lo, hi] (and columns) whose window covers input position h:
// oh * sh - ph <= h <= oh * sh - ph + kh - 1
__device__ __forceinline__ void covering(int h, int pad, int k, const FastDivmod& s, int out, int& lo, int& hi) {
    lo = h + pad - k + 1;
    lo = lo <= 0 ? 0 : (int)s.div((unsigned)(lo + s.d - 1));
    hi = (int)s.div((unsigned)(h + pad));
    if (hi > out - 1) hi = out - 1;
}

#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
#define POOL_SIM_RUNS 1
// The simulator's forms walk the thread's run of GRID_STRIDE_LOOP in segments of one row (plane, r) of the
// array they loop over, r and the first column found by two divisions per run, not per element; each element
// then does what the GPU form does, in the same order.
struct PoolSimRun {
    long long at, end;
    long long plane;
    int r, col;  // the row of `at` in its plane and its column
    // this thread's run over planes * rows * cols items; false when it is empty
    template <class I>
    __device__ __forceinline__ bool start(I total, const FastDivmod& rows, const FastDivmod& cols) {
        if (!sim_thread_run((long long)total, at, end)) return false;
        I c, rr;
        plane = (long long)div_mod(div_mod((I)at, cols, c), rows, rr);
        r = (int)rr;
        col = (int)c;
        return true;
    }
    // the segment [at, at + len) of row r from column col: len, at most `cols`
    __device__ __forceinline__ int segment(int cols) const {
        return (int)(end - at < (long long)(cols - col) ? end - at : (long long)(cols - col));
    }
    __device__ __forceinline__ void next(int len, int rows) {
        at += len;
        col = 0;
        if (++r == rows) { r = 0; ++plane; }
    }
};
#else
#define POOL_SIM_RUNS 0
#endif

// Output e of a forward: the max (0 for a window all padding) and its argmax, or the average
template <bool MAX, class I>
__device__ __forceinline__ void pool_store(real* __restrict__ y, int* __restrict__ idx, I e, int best, acc_real m,
                                           acc_real s, acc_real inv) {
    if (MAX) {
        y[e] = convert<real>(best < 0 ? (acc_real)0 : m);
        idx[e] = best;
    } else {
        y[e] = convert<real>(s * inv);
    }
}

#if POOL_SIM_RUNS
// The simulator's forward along one output row segment: outputs col .. col + len - 1 of a row whose window starts
// at input row h0 (rows i_lo .. i_hi - 1 of the window inside the plane), y and idx at the segment's first output.
// K: a square window's side when fixed at compile time (0: g.kh x g.kw).
template <bool MAX, int K>
__device__ __forceinline__ void pool_forward_row(const real* __restrict__ xp, real* __restrict__ y, int* __restrict__ idx,
                                                 int len, int col, int h0, int i_lo, int i_hi, acc_real inv,
                                                 const PoolGeom& g) {
    const int kh = K ? K : g.kh, kw = K ? K : g.kw;  // loops of a constant count unroll whole
    for (int t = 0; t < len; ++t) {
        const int w0 = (col + t) * g.sw.d - g.pw;
        const int j_lo = w0 < 0 ? -w0 : 0, j_hi = min(kw, g.W.d - w0);
        int best = -1;
        acc_real m = 0, s = 0;
        for (int i = 0; i < kh; ++i)
            for (int j = 0; j < kw; ++j) {
                if (i < i_lo || i >= i_hi || j < j_lo || j >= j_hi) continue;
                const int at = (h0 + i) * g.W.d + w0 + j;
                const acc_real v = load_as(xp[at]);
                if (!MAX) {
                    s += v;
                } else {  // the GPU form's test without its branches (a max of random data mispredicts)
                    const bool take = (best < 0) | (v > m) | ((v != v) & (m == m));
                    m = take ? v : m;
                    best = take ? at : best;
                }
            }
        pool_store<MAX>(y, idx, t, best, m, s, inv);
    }
}
#endif

// y element e = (plane * OH + oh) * OW + ow
template <class I, bool MAX>
__device__ __forceinline__ void pool_forward_loop(const real* __restrict__ x, real* __restrict__ y,
                                                  int* __restrict__ idx, I total, const PoolGeom& g) {
    const acc_real inv = (acc_real)1 / (acc_real)(g.kh * g.kw);
#if POOL_SIM_RUNS
    PoolSimRun run;
    if (!run.start(total, g.OH, g.OW)) return;
    while (run.at < run.end) {
        const int len = run.segment(g.OW.d), oh = run.r;
        const real* xp = x + run.plane * (long long)g.H.d * g.W.d;
        const int h0 = oh * g.sh.d - g.ph;
        const int i_lo = h0 < 0 ? -h0 : 0, i_hi = min(g.kh, g.H.d - h0);  // window rows inside the plane
        if (g.kh == 2 && g.kw == 2)  // MaxPool2d(2)'s window, its loops unrolled
            pool_forward_row<MAX, 2>(xp, y + run.at, idx ? idx + run.at : nullptr, len, run.col, h0, i_lo, i_hi, inv, g);
        else
            pool_forward_row<MAX, 0>(xp, y + run.at, idx ? idx + run.at : nullptr, len, run.col, h0, i_lo, i_hi, inv, g);
        run.next(len, g.OH.d);
    }
#else
    GRID_STRIDE_LOOP(I, e, total) {
        I ow, oh;
        const I plane = div_mod(div_mod(e, g.OW, ow), g.OH, oh);
        const real* xp = x + plane * (I)g.H.d * (I)g.W.d;
        int best = -1;
        acc_real m = 0, s = 0;
        for (int i = 0; i < g.kh; ++i) {
            const int h = (int)oh * g.sh.d - g.ph + i;
            if (h < 0 || h >= g.H.d) continue;
            for (int j = 0; j < g.kw; ++j) {
                const int w = (int)ow * g.sw.d - g.pw + j;
                if (w < 0 || w >= g.W.d) continue;
                const acc_real v = load_as(xp[h * g.W.d + w]);
                if (!MAX) s += v;
                else if (best < 0 || v > m || (v != v && m == m)) { m = v; best = h * g.W.d + w; }
            }
        }
        pool_store<MAX>(y, idx, e, best, m, s, inv);
    }
#endif
}

// dx element e = (plane * H + h) * W + w
template <class I, bool MAX>
__device__ __forceinline__ void pool_backward_loop(const real* __restrict__ dy, const int* __restrict__ idx,
                                                   real* __restrict__ dx, I total, const PoolGeom& g) {
    const acc_real inv = (acc_real)1 / (acc_real)(g.kh * g.kw);
#if POOL_SIM_RUNS
    PoolSimRun run;
    if (!run.start(total, g.H, g.W)) return;
    while (run.at < run.end) {
        const int len = run.segment(g.W.d), h = run.r;
        const long long base = run.plane * (long long)g.OH.d * g.OW.d;
        int oh_lo, oh_hi;
        covering(h, g.ph, g.kh, g.sh, g.OH.d, oh_lo, oh_hi);
        for (int t = 0; t < len; ++t) {
            const int w = run.col + t, me = h * g.W.d + w;
            int ow_lo, ow_hi;
            covering(w, g.pw, g.kw, g.sw, g.OW.d, ow_lo, ow_hi);
            acc_real s = 0;
            for (int oh = oh_lo; oh <= oh_hi; ++oh)
                for (int ow = ow_lo; ow <= ow_hi; ++ow) {
                    const long long o = base + oh * g.OW.d + ow;
                    if (!MAX) s += load_as(dy[o]);
                    else if (idx[o] == me) s += load_as(dy[o]);
                }
            dx[run.at + t] = convert<real>(MAX ? s : s * inv);
        }
        run.next(len, g.H.d);
    }
#else
    GRID_STRIDE_LOOP(I, e, total) {
        I w, h;
        const I plane = div_mod(div_mod(e, g.W, w), g.H, h);
        const I base = plane * (I)g.OH.d * (I)g.OW.d;
        const int me = (int)h * g.W.d + (int)w;
        int oh_lo, oh_hi, ow_lo, ow_hi;
        covering((int)h, g.ph, g.kh, g.sh, g.OH.d, oh_lo, oh_hi);
        covering((int)w, g.pw, g.kw, g.sw, g.OW.d, ow_lo, ow_hi);
        acc_real s = 0;
        for (int oh = oh_lo; oh <= oh_hi; ++oh)
            for (int ow = ow_lo; ow <= ow_hi; ++ow) {
                const I o = base + (I)(oh * g.OW.d + ow);
                if (!MAX) s += load_as(dy[o]);
                else if (idx[o] == me) s += load_as(dy[o]);
            }
        dx[e] = convert<real>(MAX ? s : s * inv);
    }
#endif
}

// One dy element's stride cell of dx (rows top.. h_end, columns left.. w_end of its plane dxp, W wide): d where
// the max was (flat index arg in the plane) or, averaging, d / (kh kw) inside the window; 0 elsewhere.
template <bool MAX>
__device__ __forceinline__ void pool_cell(real* __restrict__ dxp, int W, int top, int left, int h_end, int w_end,
                                          acc_real d, int arg, const PoolGeom& g, acc_real inv) {
    for (int h = max(top, 0); h < h_end; ++h)
        for (int w = max(left, 0); w < w_end; ++w) {
            const bool hit = MAX ? h * W + w == arg : (h - top < g.kh && w - left < g.kw);
            dxp[h * W + w] = convert<real>(hit ? (MAX ? d : d * inv) : (acc_real)0);
        }
}

// dy element e = (plane * OH + oh) * OW + ow writes dx over its stride cell (non-overlapping windows)
template <class I, bool MAX>
__device__ __forceinline__ void pool_backward_cells(const real* __restrict__ dy, const int* __restrict__ idx,
                                                    real* __restrict__ dx, I total, const PoolGeom& g) {
    const acc_real inv = (acc_real)1 / (acc_real)(g.kh * g.kw);
    const int H = g.H.d, W = g.W.d, sh = g.sh.d, sw = g.sw.d;
#if POOL_SIM_RUNS
    PoolSimRun run;
    if (!run.start(total, g.OH, g.OW)) return;
    while (run.at < run.end) {
        const int len = run.segment(g.OW.d), oh = run.r;
        real* dxp = dx + run.plane * (long long)H * W;
        const int top = oh * sh - g.ph;
        const int h_end = oh == g.OH.d - 1 ? H : min(top + sh, H);
        const bool rows2 = g.kh == 2 && sh == 2 && top >= 0 && h_end == top + 2;
        for (int t = 0; t < len; ++t) {
            const long long e = run.at + t;
            const int ow = run.col + t, left = ow * sw - g.pw;
            const int w_end = ow == g.OW.d - 1 ? W : min(left + sw, W);
            if (rows2 && g.kw == 2 && sw == 2 && left >= 0 && w_end == left + 2) {
                // MaxPool2d(2)'s whole 2 x 2 cell, unrolled: pool_cell's values, the max's as zeros then d at
                // the argmax when it lies in the cell (no select per element: an argmax is random)
                const int base = top * W + left;
                const acc_real d = load_as(dy[e]);
                const real v = convert<real>(MAX ? d : d * inv);
                real* c = dxp + base;
                c[0] = c[1] = c[W] = c[W + 1] = MAX ? convert<real>((acc_real)0) : v;
                if (MAX) {
                    const int off = idx[e] - base;
                    if (off == 0 || off == 1 || off == W || off == W + 1) c[off] = v;
                }
                continue;
            }
            pool_cell<MAX>(dxp, W, top, left, h_end, w_end, load_as(dy[e]), MAX ? idx[e] : -1, g, inv);
        }
        run.next(len, g.OH.d);
    }
#else
    GRID_STRIDE_LOOP(I, e, total) {
        I ow, oh;
        const I plane = div_mod(div_mod(e, g.OW, ow), g.OH, oh);
        real* dxp = dx + plane * (I)H * (I)W;
        const int top = (int)oh * sh - g.ph, left = (int)ow * sw - g.pw;  // the window's corner
        const int h_end = (int)oh == g.OH.d - 1 ? H : min(top + sh, H);
        const int w_end = (int)ow == g.OW.d - 1 ? W : min(left + sw, W);
        pool_cell<MAX>(dxp, W, top, left, h_end, w_end, load_as(dy[e]), MAX ? idx[e] : -1, g, inv);
    }
#endif
}

// Backward takes the stride cells when no two windows overlap (and there is a window: with none, the
// gather writes dx's zeros).
__device__ __forceinline__ bool pool_cells(const PoolGeom& g) {
    return g.kh <= g.sh.d && g.kw <= g.sw.d && g.OH.d > 0 && g.OW.d > 0;
}

// One launch: the forward loop over y (or the backward loop over dx, or over dy by cells), 32-bit below
// 2^31 elements.
template <bool MAX, bool FORWARD>
__device__ __forceinline__ void pool_run(const real* __restrict__ src, const int* __restrict__ idx_in,
                                         real* __restrict__ dst, int* __restrict__ idx_out, long long planes,
                                         const PoolGeom& g) {
    const bool outputs = FORWARD || pool_cells(g);  // the loop runs over y / dy, else over dx
    const long long total = planes * (outputs ? (long long)g.OH.d * g.OW.d : (long long)g.H.d * g.W.d);
    const bool small = pool_small(planes, g);
    if (FORWARD && small) pool_forward_loop<unsigned, MAX>(src, dst, idx_out, (unsigned)total, g);
    else if (FORWARD) pool_forward_loop<long long, MAX>(src, dst, idx_out, total, g);
    else if (outputs && small) pool_backward_cells<unsigned, MAX>(src, idx_in, dst, (unsigned)total, g);
    else if (outputs) pool_backward_cells<long long, MAX>(src, idx_in, dst, total, g);
    else if (small) pool_backward_loop<unsigned, MAX>(src, idx_in, dst, (unsigned)total, g);
    else pool_backward_loop<long long, MAX>(src, idx_in, dst, total, g);
}

extern "C" __global__ void maxpool_forward(const real* __restrict__ x, real* __restrict__ y, int* __restrict__ idx,
        long long planes, unsigned long long H, unsigned long long W, unsigned long long OH, unsigned long long OW,
        int kh, int kw, unsigned long long sh, unsigned long long sw, int ph, int pw) {
    pool_run<true, true>(x, nullptr, y, idx, planes, pool_geom(H, W, OH, OW, kh, kw, sh, sw, ph, pw));
}

extern "C" __global__ void maxpool_backward(const real* __restrict__ dy, const int* __restrict__ idx, real* __restrict__ dx,
        long long planes, unsigned long long H, unsigned long long W, unsigned long long OH, unsigned long long OW,
        int kh, int kw, unsigned long long sh, unsigned long long sw, int ph, int pw) {
    pool_run<true, false>(dy, idx, dx, nullptr, planes, pool_geom(H, W, OH, OW, kh, kw, sh, sw, ph, pw));
}

extern "C" __global__ void avgpool_forward(const real* __restrict__ x, real* __restrict__ y,
        long long planes, unsigned long long H, unsigned long long W, unsigned long long OH, unsigned long long OW,
        int kh, int kw, unsigned long long sh, unsigned long long sw, int ph, int pw) {
    pool_run<false, true>(x, nullptr, y, nullptr, planes, pool_geom(H, W, OH, OW, kh, kw, sh, sw, ph, pw));
}

extern "C" __global__ void avgpool_backward(const real* __restrict__ dy, real* __restrict__ dx,
        long long planes, unsigned long long H, unsigned long long W, unsigned long long OH, unsigned long long OW,
        int kh, int kw, unsigned long long sh, unsigned long long sw, int ph, int pw) {
    pool_run<false, false>(dy, nullptr, dx, nullptr, planes, pool_geom(H, W, OH, OW, kh, kw, sh, sw, ph, pw));
}
