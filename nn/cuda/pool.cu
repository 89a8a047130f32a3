// pool.cu: 2-D max and average pooling over NCHW data (planes = N*C), forward and backward.
// `real` is the element type. Window (kh, kw), stride (sh, sw), padding (ph, pw); output (OH, OW).
// Padding never wins a max (it is -inf) and counts in the average's divisor (PyTorch's defaults:
// count_include_pad=True, ceil_mode=False, so every window's divisor is kh*kw).
//
// maxpool_forward:  grid-stride loop, one thread per output element (plane, oh, ow): the max over its
//                   window and the argmax as a flat index h*W + w into the input plane (first max wins;
//                   a NaN wins so that it propagates, as in PyTorch); -1 if the window is all padding.
// maxpool_backward: grid-stride loop, one thread per input element (plane, h, w): GATHERS dy over the
//                   output windows whose argmax is this element, in a fixed order (no atomics).
// avgpool_forward:  grid-stride loop, one thread per output element: the window sum / (kh*kw).
// avgpool_backward: grid-stride loop, one thread per input element: gathers dy / (kh*kw) over the
//                   windows that cover it.
#include "common.cuh"

extern "C" __global__ void maxpool_forward(const real* __restrict__ x, real* __restrict__ y, int* __restrict__ idx,
                                           long long planes, int H, int W, int OH, int OW, int kh, int kw,
                                           int sh, int sw, int ph, int pw) {
    const long long total = planes * OH * OW;
    GRID_STRIDE_LOOP(long long, e, total) {
        int ow = (int)(e % OW), oh = (int)((e / OW) % OH);
        long long plane = e / ((long long)OW * OH);
        const real* xp = x + plane * H * W;
        int best = -1;
        real m = 0;
        for (int i = 0; i < kh; ++i) {
            int h = oh * sh - ph + i;
            if (h < 0 || h >= H) continue;
            for (int j = 0; j < kw; ++j) {
                int w = ow * sw - pw + j;
                if (w < 0 || w >= W) continue;
                real v = xp[h * W + w];
                if (best < 0 || v > m || (v != v && m == m)) { m = v; best = h * W + w; }
            }
        }
        y[e] = best < 0 ? (real)0 : m;
        idx[e] = best;
    }
}

extern "C" __global__ void maxpool_backward(const real* __restrict__ dy, const int* __restrict__ idx, real* __restrict__ dx,
                                            long long planes, int H, int W, int OH, int OW, int kh, int kw,
                                            int sh, int sw, int ph, int pw) {
    const long long total = planes * H * W;
    GRID_STRIDE_LOOP(long long, e, total) {
        int w = (int)(e % W), h = (int)((e / W) % H);
        long long plane = e / ((long long)W * H);
        const long long base = plane * OH * OW;
        const int me = h * W + w;
        // output rows whose window covers h: oh*sh - ph <= h <= oh*sh - ph + kh - 1
        int oh_lo = h + ph - kh + 1; oh_lo = oh_lo <= 0 ? 0 : (oh_lo + sh - 1) / sh;
        int oh_hi = (h + ph) / sh; if (oh_hi > OH - 1) oh_hi = OH - 1;
        int ow_lo = w + pw - kw + 1; ow_lo = ow_lo <= 0 ? 0 : (ow_lo + sw - 1) / sw;
        int ow_hi = (w + pw) / sw; if (ow_hi > OW - 1) ow_hi = OW - 1;
        real s = 0;
        for (int oh = oh_lo; oh <= oh_hi; ++oh)
            for (int ow = ow_lo; ow <= ow_hi; ++ow)
                if (idx[base + oh * OW + ow] == me) s += dy[base + oh * OW + ow];
        dx[e] = s;
    }
}

extern "C" __global__ void avgpool_forward(const real* __restrict__ x, real* __restrict__ y, long long planes, int H,
                                           int W, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw) {
    const long long total = planes * OH * OW;
    const real inv = (real)1 / (real)(kh * kw);
    GRID_STRIDE_LOOP(long long, e, total) {
        int ow = (int)(e % OW), oh = (int)((e / OW) % OH);
        const real* xp = x + (e / ((long long)OW * OH)) * H * W;
        real s = 0;
        for (int i = 0; i < kh; ++i) {
            int h = oh * sh - ph + i;
            if (h < 0 || h >= H) continue;
            for (int j = 0; j < kw; ++j) {
                int w = ow * sw - pw + j;
                if (w >= 0 && w < W) s += xp[h * W + w];
            }
        }
        y[e] = s * inv;
    }
}

extern "C" __global__ void avgpool_backward(const real* __restrict__ dy, real* __restrict__ dx, long long planes, int H,
                                            int W, int OH, int OW, int kh, int kw, int sh, int sw, int ph, int pw) {
    const long long total = planes * H * W;
    const real inv = (real)1 / (real)(kh * kw);
    GRID_STRIDE_LOOP(long long, e, total) {
        int w = (int)(e % W), h = (int)((e / W) % H);
        const long long base = (e / ((long long)W * H)) * OH * OW;
        int oh_lo = h + ph - kh + 1; oh_lo = oh_lo <= 0 ? 0 : (oh_lo + sh - 1) / sh;
        int oh_hi = (h + ph) / sh; if (oh_hi > OH - 1) oh_hi = OH - 1;
        int ow_lo = w + pw - kw + 1; ow_lo = ow_lo <= 0 ? 0 : (ow_lo + sw - 1) / sw;
        int ow_hi = (w + pw) / sw; if (ow_hi > OW - 1) ow_hi = OW - 1;
        real s = 0;
        for (int oh = oh_lo; oh <= oh_hi; ++oh)
            for (int ow = ow_lo; ow <= ow_hi; ++ow) s += dy[base + oh * OW + ow];
        dx[e] = s * inv;
    }
}
