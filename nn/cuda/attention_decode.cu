// attention_decode.cu: attention of one query per (batch, head) against a key/value cache, for generation
// (nn/models/gpt_decode.py): y = softmax(scale q k^T) v with q (B, H, 1, D) and k, v (B, H, Tk, D) views of
// the cache (any b, h, t strides, d contiguous). No mask: every cached key precedes the query. Split-K as
// flash-decoding: the keys are cut into chunks, one block a chunk, so that a batch of one still fills the GPU
// (the fused forward kernel would run one block per head, 63 of its 64 query rows idle); a second kernel
// combines the chunks' partial results. `real` is the storage type; sums in acc_real (float for 16-bit data).
// A replayed decode step (a CUDA graph: the same launches at every position) reads how many keys to attend
// from device memory: `n_keys` (one int, NULL: all Tk), clamped to [0, Tk]; the grid covers Tk, the cache's
// capacity, and the blocks past the keys leave at once.
//
// attention_decode_partial: grid (S = ceil(Tk / chunk), B * H), block DEC_THREADS (1-D). Block (s, bh) takes
//   keys j0 = s chunk .. j0 + n - 1 (n <= chunk <= DEC_CHUNK; a block with n <= 0 returns, whole): q to shared
//   memory; thread t computes the scores of keys t, t + DEC_THREADS, ... (a whole row of k each, the dot
//   product over d) into shared memory; the block's max m (block_allreduce); p = e^(s - m) in place and the
//   block's sum l; then thread t sums p_j v[j, d] over the chunk's keys for columns d = t, t + DEC_THREADS, ...
//   (consecutive threads read consecutive columns of a v row) into part_o[bh, s, d], unnormalized, and
//   thread 0 writes (m, l). On the simulator (unless DEC_GPU_FORM) a block is one thread that walks the chunk
//   with its loops along d: the scores' dot products in a vector of lanes, the weighted sum of v rows a
//   vector of D accumulators (vector code; a simulated thread's dot product over d was one add chain), the
//   float exponentials 16 at a time (exp_shifted).
// attention_decode_combine: grid-stride loop, one thread per output element (bh, d): over the chunks that
//   hold keys (s < ceil(n_keys / chunk)), M = max_s m_s, y = sum_s e^(m_s - M) o_s[d] / sum_s e^(m_s - M) l_s,
//   rounded once to `real`.
// kv_cache_append: grid-stride loop, one thread per element (b, h, d) of the new position's key and value:
//   cache_k[b, h, p, d] = qkv[b, C + h D + d], cache_v[b, h, p, d] = qkv[b, 2 C + h D + d] (qkv: one (3C)
//   row per sequence, q | k | v, C = H D; the caches contiguous (B, H, T, D)), with p = *position read from
//   device memory. A p outside [0, T) writes nothing and is reported (report_bad_index: IndexError at the
//   host's next synchronization).
#include "common.cuh"

#define DEC_THREADS 128
#define DEC_CHUNK 256   // the largest chunk (the scores' shared array)
#define DEC_MAX_D 256   // the largest head dim (q's shared copy)

// The keys to attend: *n_keys (a replayed step's count, in device memory) within [0, Tk], or Tk.
__device__ __forceinline__ int decode_keys(const int* __restrict__ n_keys, int Tk) {
    return n_keys == nullptr ? Tk : max(0, min(*n_keys, Tk));
}

#if defined(__CUDA_ARCH_SIM__) && !defined(DEC_GPU_FORM)
#define DEC_SIM_LANES (64 / (int)sizeof(acc_real))   // the simulator's dot products: one 64-byte vector of lanes
// The simulator's p_j = e^(s_j - m) in place over the chunk's n scores, and their sum: float in runs of 16
// through vector_math.h's exp (every score of the run through it; the padding's lanes computed as e^-inf = 0,
// never stored; a scalar expf is a call the CPU cannot overlap), the runs' sums in 16 lanes added pairwise;
// double with libm's exp, one after another.
__device__ __forceinline__ float exp_shifted(float* __restrict__ ps, int n, float m) {
    gpublas_sim::float16v sum = {};
    for (int j0 = 0; j0 < n; j0 += 16) {
        const int w = min(16, n - j0);
        gpublas_sim::float16v s;
        for (int i = 0; i < 16; ++i) s[i] = i < w ? ps[j0 + i] - m : -INFINITY;
        const gpublas_sim::float16v p = exp(s);
        for (int i = 0; i < w; ++i) ps[j0 + i] = p[i];
        sum += p;
    }
    for (int w = 8; w > 0; w /= 2)
        for (int i = 0; i < w; ++i) sum[i] += sum[i + w];
    return sum[0];
}
__device__ __forceinline__ double exp_shifted(double* __restrict__ ps, int n, double m) {
    double l = 0;
    for (int j = 0; j < n; ++j) {
        ps[j] = exp(ps[j] - m);
        l += ps[j];
    }
    return l;
}
#endif

extern "C" __global__ void
attention_decode_partial(const real* __restrict__ q, const real* __restrict__ k, const real* __restrict__ v,
                         compute_t<real>* __restrict__ part_o, compute_t<real>* __restrict__ part_ml, int H,
                         int Tk, const int* __restrict__ n_keys, int D, int chunk, compute_t<real> scale,
                         long long qsb, long long qsh, long long ksb, long long ksh, long long kst, long long vsb,
                         long long vsh, long long vst) {
    const int s = blockIdx.x, bh = blockIdx.y, S = gridDim.x;
    const int b = bh / H, h = bh % H;
    const int j0 = s * chunk;
    const int n = min(chunk, decode_keys(n_keys, Tk) - j0);
    if (n <= 0) return;   // past the keys: the whole block leaves, before any barrier
    const real* qr = q + b * qsb + h * qsh;
    const real* kr = k + b * ksb + h * ksh + (long long)j0 * kst;
    const real* vr = v + b * vsb + h * vsh + (long long)j0 * vst;
#if defined(__CUDA_ARCH_SIM__) && !defined(DEC_GPU_FORM)
    // the simulator (one thread a block: the launcher's): every loop runs along d, contiguous, the dot products
    // in a vector of lanes, so that g++ makes vector code of them (a dot product a thread was one add chain)
    acc_real qv[DEC_MAX_D], ov[DEC_MAX_D], sc[DEC_CHUNK];   // locals: no __shared__ (thread_local) access
    for (int d = 0; d < D; ++d) {
        qv[d] = load_as(qr[d]);
        ov[d] = 0;
    }
    acc_real m = -INFINITY;
    for (int j = 0; j < n; ++j) {
        const real* kj = kr + (long long)j * kst;
        acc_real acc[DEC_SIM_LANES] = {};     // d's products in lanes d % DEC_SIM_LANES, added pairwise at the end
        int d = 0;
        for (; d + DEC_SIM_LANES <= D; d += DEC_SIM_LANES)
            for (int i = 0; i < DEC_SIM_LANES; ++i) acc[i] += qv[d + i] * load_as(kj[d + i]);
        acc_real tail = 0;
        for (; d < D; ++d) tail += qv[d] * load_as(kj[d]);
#pragma GCC unroll 8
        for (int w = DEC_SIM_LANES / 2; w > 0; w /= 2)   // unrolled: the lanes stay in registers
#pragma GCC unroll 16
            for (int i = 0; i < w; ++i) acc[i] += acc[i + w];
        const acc_real dot = (acc[0] + tail) * scale;
        sc[j] = dot;
        m = dot > m ? dot : m;
    }
    const acc_real l = exp_shifted(sc, n, m);
    for (int j = 0; j < n; ++j) {
        const acc_real p = sc[j];
        const real* vj = vr + (long long)j * vst;
        for (int d = 0; d < D; ++d) ov[d] += p * load_as(vj[d]);
    }
    acc_real* o = part_o + ((long long)bh * S + s) * D;
    for (int d = 0; d < D; ++d) o[d] = ov[d];
    part_ml[2 * ((long long)bh * S + s)] = m;
    part_ml[2 * ((long long)bh * S + s) + 1] = l;
#else
    __shared__ acc_real qs[DEC_MAX_D];
    __shared__ acc_real ps[DEC_CHUNK];   // the chunk's scores, then e^(score - m)
    for (int d = threadIdx.x; d < D; d += DEC_THREADS) qs[d] = load_as(qr[d]);
    __syncthreads();
    acc_real m = -INFINITY;
    for (int j = threadIdx.x; j < n; j += DEC_THREADS) {
        const real* kj = kr + (long long)j * kst;
        acc_real dot = 0;
        for (int d = 0; d < D; ++d) dot += qs[d] * load_as(kj[d]);
        dot *= scale;
        ps[j] = dot;
        m = dot > m ? dot : m;
    }
    m = block_allreduce(m, MaxOp<acc_real>(), (acc_real)-INFINITY);
    acc_real l = 0;
    for (int j = threadIdx.x; j < n; j += DEC_THREADS) {
        const acc_real p = exp(ps[j] - m);
        ps[j] = p;
        l += p;
    }
    l = block_allreduce(l, SumOp<acc_real>(), (acc_real)0);   // its barriers also publish ps
    acc_real* o = part_o + ((long long)bh * S + s) * D;
    for (int d = threadIdx.x; d < D; d += DEC_THREADS) {
        acc_real acc = 0;
        for (int j = 0; j < n; ++j) acc += ps[j] * load_as(vr[(long long)j * vst + d]);
        o[d] = acc;
    }
    if (threadIdx.x == 0) {
        part_ml[2 * ((long long)bh * S + s)] = m;
        part_ml[2 * ((long long)bh * S + s) + 1] = l;
    }
#endif
}

extern "C" __global__ void attention_decode_combine(const compute_t<real>* __restrict__ part_o,
                                                    const compute_t<real>* __restrict__ part_ml, real* __restrict__ y,
                                                    int S, int Tk, const int* __restrict__ n_keys, int chunk, int D,
                                                    long long total) {
    const int used = (decode_keys(n_keys, Tk) + chunk - 1) / chunk;   // the chunks that hold keys
    GRID_STRIDE_LOOP(long long, e, total) {
        const long long bh = e / D;
        const int d = (int)(e % D);
        const acc_real* ml = part_ml + 2 * bh * S;
        acc_real M = -INFINITY;
        for (int s = 0; s < used; ++s) M = ml[2 * s] > M ? ml[2 * s] : M;
        acc_real num = 0, den = 0;
        for (int s = 0; s < used; ++s) {
            const acc_real w = exp(ml[2 * s] - M);
            num += w * part_o[(bh * S + s) * D + d];
            den += w * ml[2 * s + 1];
        }
        y[e] = convert<real>(num / den);
    }
}

extern "C" __global__ void kv_cache_append(const real* __restrict__ qkv, long long row, real* __restrict__ cache_k,
                                           real* __restrict__ cache_v, const int* __restrict__ position, int H, int T,
                                           int D, long long total, long long* check, int site) {
    const int p = *position;
    const int C = H * D;
    GRID_STRIDE_LOOP(long long, e, total) {
        const long long b = e / C;
        const int hd = (int)(e % C);   // h D + d
        if ((unsigned)p < (unsigned)T) {
            const long long to = ((b * H + hd / D) * T + p) * D + hd % D;
            cache_k[to] = qkv[b * row + C + hd];
            cache_v[to] = qkv[b * row + 2 * C + hd];
        } else if (e == 0) {
            report_bad_index(check, site, p, 0, T);
        }
    }
}
