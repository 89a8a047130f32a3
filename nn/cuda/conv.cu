// conv.cu: the data movement around Conv2d's GEMMs (im2col lowering, NCHW), batched over the minibatch.
// `real` is the element type (-Dreal=float or double). Shapes: x (N, C, H, W); kernel (kh, kw) with
// stride (sh, sw), padding (ph, pw), dilation (dh, dw); output (OH, OW); P = OH*OW; K = C*kh*kw.
// cols is (K, N*P): row k = (c, i, j) of the kernel window, column (n, p) of the output, so that
// weight (C_out, K) @ cols = Y (C_out, N*P) in one GEMM.
//
// im2col_nchw:      grid-stride loop, one thread per cols element (k, n, p), p fastest so that
//                   consecutive threads write consecutive columns: cols = x at the tap or 0 in padding.
// col2im_nchw:      grid-stride loop, one thread per dx element (n, c, h, w): GATHERS every (i, j, oh, ow)
//                   whose tap lands on (h, w) and sums dcols there, in a fixed order (no atomics, so the
//                   result does not depend on thread order). Writes (not adds) dx.
// cnp_to_nchw_bias: grid-stride loop, one thread per y element (n, c, p): y[n,c,p] = Y[c,n,p] + b[c],
//                   then the activation `act` (0 none, 1 relu, 2 tanh, 3 sigmoid); b may be null.
// Its inverse without bias (dY (C, N*P) from dy (N, C, P)) is gpublas' swap01 (cuda_src/transpose.cu).
#include "common.cuh"

__device__ __forceinline__ real conv_act(real v, int act) {
    if (act == 1) return v > (real)0 ? v : (real)0;
    if (act == 2) return tanh(v);
    if (act == 3) return (real)1 / ((real)1 + exp(-v));
    return v;
}

extern "C" __global__ void im2col_nchw(const real* __restrict__ x, real* __restrict__ cols, int N, int C, int H,
                                       int W, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                                       int OH, int OW) {
    const long long P = (long long)OH * OW, NP = N * P;
    const long long total = (long long)C * kh * kw * NP;
    GRID_STRIDE_LOOP(long long, e, total) {
        long long k = e / NP, col = e - k * NP;
        int n = (int)(col / P), p = (int)(col - (long long)n * P);
        int oh = p / OW, ow = p - oh * OW;
        int j = (int)(k % kw), i = (int)((k / kw) % kh), c = (int)(k / ((long long)kw * kh));
        int h = oh * sh - ph + i * dh, w = ow * sw - pw + j * dw;
        cols[e] = (h >= 0 && h < H && w >= 0 && w < W) ? x[(((long long)n * C + c) * H + h) * W + w] : (real)0;
    }
}

extern "C" __global__ void col2im_nchw(const real* __restrict__ dcols, real* __restrict__ dx, int N, int C, int H,
                                       int W, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                                       int OH, int OW) {
    const long long P = (long long)OH * OW, NP = N * P;
    const long long total = (long long)N * C * H * W;
    GRID_STRIDE_LOOP(long long, e, total) {
        int w = (int)(e % W), h = (int)((e / W) % H), c = (int)((e / ((long long)W * H)) % C);
        int n = (int)(e / ((long long)W * H * C));
        real s = 0;
        for (int i = 0; i < kh; ++i) {
            int th = h + ph - i * dh;             // = oh * sh when tap i of output row oh lands on h
            if (th < 0 || th % sh) continue;
            int oh = th / sh;
            if (oh >= OH) continue;
            for (int j = 0; j < kw; ++j) {
                int tw = w + pw - j * dw;
                if (tw < 0 || tw % sw) continue;
                int ow = tw / sw;
                if (ow >= OW) continue;
                long long k = ((long long)c * kh + i) * kw + j;
                s += dcols[k * NP + (long long)n * P + (long long)oh * OW + ow];
            }
        }
        dx[e] = s;
    }
}

extern "C" __global__ void cnp_to_nchw_bias(const real* __restrict__ Y, const real* __restrict__ b, real* __restrict__ y,
                                            int N, int C, long long P, int act) {
    const long long total = (long long)N * C * P;
    GRID_STRIDE_LOOP(long long, e, total) {
        long long p = e % P;
        int c = (int)((e / P) % C), n = (int)(e / (P * C));
        real v = Y[((long long)c * N + n) * P + p];
        if (b) v += b[c];
        y[e] = conv_act(v, act);
    }
}
