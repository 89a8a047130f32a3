// attention_sim.cuh: the simulator's form of nn/cuda/attention.cu's attention_forward and attention_backward
// (float and double), built when the launcher passes ATT_SIM_ROWS (nn.kernels.attention.sim_tiles); a GPU, and
// the GPU's tiles run on the simulator by the tests, compile the tiled kernels alone. The same algorithm
// (FlashAttention-2's online softmax forward, the backward recomputing P from the forward's logsumexp) written
// for one CPU thread a block, as attention_decode.cu's simulator form: no barriers, no shared tiles copied
// between the threads of a block, the scores in locals, every loop along a contiguous axis (keys after a
// chunk of K / V is copied d-major, else the head dim) so that g++ vectorizes it, the float exponentials
// 16 at a time (vector_math.h's exp). The tiled form on the simulator (8 fissioned threads of whole rows)
// spent its time in the copies between barriers and the spilled tile accumulators. GPT's step shape (B H = 32,
// T = 64, D = 16, causal, float32; one thread of a loaded 2-core VM, kernel times): forward 2.2-2.5 -> 1.4-1.8 ms,
// backward 5.4-6.2 -> 1.1-1.3 ms; then the key loops that add a row into registers written as 32-byte vectors
// (AttSimRow: g++ had vectorized them across keys with permutes, half the forward's time), min of 15 calls:
// forward 1.25-1.7 -> 0.67-0.82 ms, backward 0.74-1.2 -> 0.70-0.88 ms, bits unchanged.
//
// att_sim_forward: grid (ceil(Tq / ATT_FWD_BQ), B * H), one thread. Block (x, bh) keeps the running max m,
//   sum l and accumulator of its ATT_FWD_BQ query rows in shared memory and walks the keys in chunks of
//   ATT_FWD_BK (a multiple of 16; causal blocks stop at their last row's diagonal): the chunk's K copied
//   d-major, then per row the scores s_j = scale q . k_j (sums over d in order), m and l updated, P = e^(s - m),
//   acc = alpha acc + P V (V's rows read in place). y = acc / l, lse = m + log l.
// att_sim_backward: grid (1, B * H), one thread: a head's keys in chunks of ATT_BWD_BK (K, V copied d-major;
//   the chunk's dk, dv accumulators in shared memory), and for each chunk every query row that sees it, in
//   order: s and dP = dy . v_j, P = e^(scale s - lse), dS = P (dP - delta); dv_j += P dy, dk_j += dS q, and
//   the row's dq partial over the chunk's keys added into dq_acc (times scale). One block a head, so every
//   sum (dq's included, which the GPU's key blocks add atomically) is in an order fixed by the shape.
// Dropout (ATT_DROPOUT) as the tiled kernels': element (bh, i, j) at counter offset + (bh Tq + i) Tk + j.
#pragma once

#include <cstring>

#include "common.cuh"
#include "dropout_rng.cuh"

static_assert(ATT_FWD_BK % 16 == 0 && ATT_BWD_BK % 16 == 0, "the simulator's key chunks are runs of 16");

// x[j] = e^(x[j]) for j < n, a multiple of 16 (x = -inf gives 0): float 16 at a time through vector_math.h's exp,
// double with libm.
template <int N>
__device__ __forceinline__ void att_sim_exp(acc_real (&x)[N], int n) {
    if constexpr (sizeof(acc_real) == 4) {
        for (int j = 0; j < n; j += 16) {
            gpublas_sim::float16v v;
            memcpy(&v, x + j, sizeof v);
            v = exp(v);
            memcpy(x + j, &v, sizeof v);
        }
    } else {
        for (int j = 0; j < n; ++j) x[j] = exp(x[j]);
    }
}

// sum of x[0 .. n-1] (n a multiple of 16) in 16 lanes (j % 16), the lanes then added pairwise: independent chains
// g++ vectorizes
template <int N>
__device__ __forceinline__ acc_real att_sim_sum(const acc_real (&x)[N], int n) {
    acc_real lane[16] = {};
    for (int j = 0; j < n; j += 16)
        for (int i = 0; i < 16; ++i) lane[i] += x[j + i];
    for (int w = 8; w > 0; w /= 2)
        for (int i = 0; i < w; ++i) lane[i] += lane[i + w];
    return lane[0];
}

// rows [0, n) of the (row stride ld) tile at g into t d-major (t[d * KC + j], d < D), zeros for j in [n, KC)
template <int KC>
__device__ __forceinline__ void att_sim_load_t(acc_real* __restrict__ t, const real* __restrict__ g, long long ld, int n,
                                               int D) {
    for (int d = 0; d < D; ++d) {
        acc_real* col = t + d * KC;
        for (int j = 0; j < n; ++j) col[j] = load_as(g[j * ld + d]);
        for (int j = n; j < KC; ++j) col[j] = 0;
    }
}

// rows [0, n) of the tile at g into t row-major at pitch DP (t[j * DP + d]), zeros past D and past n: the loops
// over a row then run to the constant DP, with the accumulators they add into in registers
template <int KC, int DP>
__device__ __forceinline__ void att_sim_load_rows(acc_real* __restrict__ t, const real* __restrict__ g, long long ld,
                                                  int n, int D) {
    for (int j = 0; j < KC; ++j)
        for (int d = 0; d < DP; ++d) t[j * DP + d] = j < n && d < D ? load_as(g[j * ld + d]) : (acc_real)0;
}

// s[j] *= scale for j < n, -inf for the masked ones past it up to n16 (n rounded up to 16); returns max(m, every
// s[j]) (lanes j % 16, then pairwise)
template <int KC>
__device__ __forceinline__ acc_real att_sim_scale_max(acc_real (&s)[KC], acc_real scale, int n, int n16, acc_real m) {
    for (int j = 0; j < n16; ++j) s[j] *= scale;
    for (int j = n; j < n16; ++j) s[j] = -(acc_real)INFINITY;
    acc_real lane[16];
    for (int i = 0; i < 16; ++i) lane[i] = m;
    for (int j = 0; j < n16; j += 16)
        for (int i = 0; i < 16; ++i) lane[i] = s[j + i] > lane[i] ? s[j + i] : lane[i];
    for (int w = 8; w > 0; w /= 2)
        for (int i = 0; i < w; ++i) lane[i] = lane[i + w] > lane[i] ? lane[i + w] : lane[i];
    return lane[0];
}

// A row of DP values (DP a multiple of 16) as vectors of 32 bytes, for the loops over a chunk's keys that add a
// multiple of a key's row into a row in registers: written as vectors, g++ keeps the row in registers and steps
// the keys one by one; as scalar loops it vectorized across 8 keys at a time instead, transposing their rows
// with permutes (half the forward's time). Each element sees the same operations in the same order.
typedef acc_real att_sim_vec __attribute__((vector_size(32)));
typedef acc_real att_sim_uvec __attribute__((vector_size(32), aligned(sizeof(acc_real))));  // at any element
template <int DP>
struct AttSimRow {
    static constexpr int N = DP * (int)sizeof(acc_real) / 32;
    att_sim_vec v[N];
    __device__ __forceinline__ void load(const acc_real* p) {
        for (int c = 0; c < N; ++c) v[c] = reinterpret_cast<const att_sim_uvec*>(p)[c];
    }
    __device__ __forceinline__ void store(acc_real* p) const {
        for (int c = 0; c < N; ++c) reinterpret_cast<att_sim_uvec*>(p)[c] = v[c];
    }
};

// s[j] = sum over d in order of x[d] t[d * KC + j], for j < n16 (a multiple of 16: the keys a row sees, rounded up)
template <int KC>
__device__ __forceinline__ void att_sim_scores(acc_real (&s)[KC], const acc_real* __restrict__ x,
                                               const acc_real* __restrict__ t, int D, int n16) {
    for (int j = 0; j < n16; ++j) s[j] = 0;
    for (int d = 0; d < D; ++d) {
        const acc_real xd = x[d];
        const acc_real* col = t + d * KC;
        for (int j = 0; j < n16; ++j) s[j] += xd * col[j];
    }
}

__device__ void att_sim_forward(const real* __restrict__ q, const real* __restrict__ k, const real* __restrict__ v,
                                real* __restrict__ o, acc_real* __restrict__ lse, int H, int Tq, int Tk, int D,
                                acc_real scale, int causal, float drop_p, acc_real drop_scale, long long drop_seed,
                                const long long* __restrict__ drop_offset, long long q_sb, long long q_sh,
                                long long q_st, long long k_sb, long long k_sh, long long k_st, long long v_sb,
                                long long v_sh, long long v_st, long long o_sb, long long o_sh, long long o_st) {
    constexpr int R = ATT_FWD_BQ, KC = ATT_FWD_BK, DP = ATT_DP;
    const acc_real NEG_INF = -(acc_real)INFINITY;
    // the launch's dynamic shared memory (a header's `extern __shared__` is not rewritten for the simulator)
    acc_real* KT = static_cast<acc_real*>(gpublas_sim::dynamic_shared());  // DP x KC: the key chunk, d-major
    acc_real* VP = KT + DP * KC;                                // KC x DP: its values, rows padded with zeros
    acc_real* A = VP + KC * DP;                                 // R x DP: the rows' accumulators
    acc_real* M = A + R * DP;                                   // R: the rows' running max
    acc_real* L = M + R;                                        // R: the rows' running sum
    const int b = blockIdx.y / H, h = blockIdx.y % H, q0 = blockIdx.x * R;
    const int rows = min(R, Tq - q0);
    q += b * q_sb + h * q_sh + q0 * q_st;
    k += b * k_sb + h * k_sh;
    v += b * v_sb + h * v_sh;
    o += b * o_sb + h * o_sh + q0 * o_st;
    lse += (long long)blockIdx.y * Tq + q0;
    const unsigned long long drop_row = ATT_DROPOUT ? *drop_offset + ((unsigned long long)blockIdx.y * Tq + q0) * Tk : 0;
    for (int r = 0; r < rows; ++r) {
        M[r] = NEG_INF;
        L[r] = 0;
        for (int d = 0; d < DP; ++d) A[r * DP + d] = 0;
    }
    const int k_end = causal ? min(Tk, q0 + rows) : Tk;  // keys past it are masked in every row here
    acc_real qr[DP];
    for (int k0 = 0; k0 < k_end; k0 += KC) {
        const int n = min(KC, k_end - k0);
        att_sim_load_t<KC>(KT, k + k0 * k_st, k_st, n, D);
        att_sim_load_rows<KC, DP>(VP, v + k0 * v_st, v_st, n, D);
        for (int r = 0; r < rows; ++r) {
            const int nr = causal ? min(n, q0 + r + 1 - k0) : n;  // the keys of the chunk row r sees
            if (nr <= 0) continue;
            for (int d = 0; d < D; ++d) qr[d] = load_as(q[r * q_st + d]);
            const int n16 = (nr + 15) & ~15;  // the scores' work stops at the row's last visible key's run
            acc_real s[KC];
            att_sim_scores(s, qr, KT, D, n16);
            const acc_real mx = att_sim_scale_max(s, scale, nr, n16, M[r]);
            const acc_real base = mx == NEG_INF ? (acc_real)0 : mx;  // a row masked so far: P = 0, alpha = 0
            const acc_real alpha = ew_exp(M[r] - base);
            M[r] = mx;
            for (int j = 0; j < n16; ++j) s[j] -= base;
            att_sim_exp(s, n16);
            L[r] = L[r] * alpha + att_sim_sum(s, n16);  // l sums P before dropout
            if (ATT_DROPOUT)
                for (int j = 0; j < nr; ++j)
                    if (!dropout_keep(drop_seed, drop_row + (unsigned long long)r * Tk + k0 + j, drop_p)) s[j] = 0;
            AttSimRow<DP> a;  // the row's accumulator in registers while the chunk's P V adds into it
            a.load(A + r * DP);
            for (int c = 0; c < a.N; ++c) a.v[c] *= alpha;
            for (int j = 0; j < nr; ++j) {
                const acc_real p = s[j];
                const att_sim_uvec* vj = reinterpret_cast<const att_sim_uvec*>(VP + j * DP);
                for (int c = 0; c < a.N; ++c) a.v[c] += p * vj[c];
            }
            a.store(A + r * DP);
        }
    }
    for (int r = 0; r < rows; ++r) {
        const acc_real inv = ATT_DROPOUT ? drop_scale / L[r] : (acc_real)1 / L[r];
        for (int d = 0; d < D; ++d) o[r * o_st + d] = convert<real>(A[r * DP + d] * inv);
        lse[r] = M[r] + ew_log(L[r]);
    }
}

__device__ void att_sim_backward(const real* __restrict__ q, const real* __restrict__ k, const real* __restrict__ v,
                                 const real* __restrict__ dy, const acc_real* __restrict__ lse,
                                 const acc_real* __restrict__ delta, acc_real* __restrict__ dq_acc,
                                 real* __restrict__ dk, real* __restrict__ dv, int H, int Tq, int Tk, int D,
                                 acc_real scale, int causal, float drop_p, acc_real drop_scale, long long drop_seed,
                                 const long long* __restrict__ drop_offset, long long q_sb, long long q_sh,
                                 long long q_st, long long k_sb, long long k_sh, long long k_st, long long v_sb,
                                 long long v_sh, long long v_st, long long dy_sb, long long dy_sh, long long dy_st) {
    constexpr int KC = ATT_BWD_BK, DP = ATT_DP;
    const acc_real NEG_INF = -(acc_real)INFINITY;
    acc_real* KT = static_cast<acc_real*>(gpublas_sim::dynamic_shared());  // DP x KC: the key chunk's k, d-major
    acc_real* VT = KT + DP * KC;                                // DP x KC: its v, d-major
    acc_real* KP = VT + DP * KC;                                // KC x DP: its k, rows padded with zeros
    acc_real* DK = KP + KC * DP;                                // KC x DP: its dk accumulators
    acc_real* DV = DK + KC * DP;                                // KC x DP: its dv accumulators
    att_backward_rows(q, k, v, dy, lse, delta, dq_acc, H, Tq, D, 0, q_sb, q_sh, k_sb, k_sh, k_st, v_sb, v_sh, v_st,
                      dy_sb, dy_sh);
    dk += (long long)blockIdx.y * Tk * D;
    dv += (long long)blockIdx.y * Tk * D;
    const unsigned long long drop_head = ATT_DROPOUT ? *drop_offset + (unsigned long long)blockIdx.y * Tq * Tk : 0;
    acc_real qr[DP] = {}, gr[DP] = {};  // a query row and its dy, zeros past D
    for (int k0 = 0; k0 < Tk; k0 += KC) {
        const int n = min(KC, Tk - k0);
        att_sim_load_t<KC>(KT, k + k0 * k_st, k_st, n, D);
        att_sim_load_t<KC>(VT, v + k0 * v_st, v_st, n, D);
        att_sim_load_rows<KC, DP>(KP, k + k0 * k_st, k_st, n, D);
        for (int e = 0; e < KC * DP; ++e) DK[e] = DV[e] = 0;
        for (int i = causal ? k0 : 0; i < Tq; ++i) {  // a causal row i < k0 sees none of the chunk
            const int nr = causal ? min(n, i + 1 - k0) : n;
            for (int d = 0; d < D; ++d) {
                qr[d] = load_as(q[i * q_st + d]);
                gr[d] = load_as(dy[i * dy_st + d]);
            }
            const int n16 = (nr + 15) & ~15;  // the work stops at the row's last visible key's run
            acc_real s[KC], dp[KC];
            att_sim_scores(s, qr, KT, D, n16);
            att_sim_scores(dp, gr, VT, D, n16);
            const acc_real li = lse[i], dl = delta[i];
            for (int j = 0; j < n16; ++j) s[j] = s[j] * scale - li;
            for (int j = nr; j < n16; ++j) s[j] = NEG_INF;
            att_sim_exp(s, n16);  // P
            acc_real pk[KC], ds[KC];  // dropout: dv's P o M, and dP of the kept ones times drop_scale
            for (int j = 0; j < n16; ++j) {
                acc_real dpj = dp[j];
                pk[j] = s[j];
                if (ATT_DROPOUT && j < nr) {
                    const bool keep = dropout_keep(drop_seed, drop_head + (unsigned long long)i * Tk + k0 + j, drop_p);
                    dpj = keep ? dpj * drop_scale : (acc_real)0;
                    pk[j] = keep ? pk[j] : (acc_real)0;
                }
                ds[j] = s[j] * (dpj - dl);
            }
            AttSimRow<DP> dqa = {}, qv, gv;  // the row's dq over this chunk, in registers; q and dy's rows
            qv.load(qr);
            gv.load(gr);
            for (int j = 0; j < nr; ++j) {
                const acc_real p = pk[j], g = ds[j];
                att_sim_uvec* dvj = reinterpret_cast<att_sim_uvec*>(DV + j * DP);
                att_sim_uvec* dkj = reinterpret_cast<att_sim_uvec*>(DK + j * DP);
                const att_sim_uvec* kj = reinterpret_cast<const att_sim_uvec*>(KP + j * DP);
                for (int c = 0; c < dqa.N; ++c) {
                    dvj[c] += p * gv.v[c];
                    dkj[c] += g * qv.v[c];
                    dqa.v[c] += g * kj[c];
                }
            }
            acc_real dqs[DP];
            dqa.store(dqs);
            acc_real* dqi = dq_acc + (long long)i * D;
            for (int d = 0; d < D; ++d) dqi[d] += dqs[d] * scale;
        }
        for (int j = 0; j < n; ++j)
            for (int d = 0; d < D; ++d) {
                dk[(long long)(k0 + j) * D + d] = convert<real>(DK[j * DP + d] * scale);
                dv[(long long)(k0 + j) * D + d] = convert<real>(ATT_DROPOUT ? DV[j * DP + d] * drop_scale : DV[j * DP + d]);
            }
    }
}
