// attention_half.cu: fused scaled dot-product attention for 16-bit q, k, v (`real`: __half or __nv_bfloat16) on
// the tensor cores: y = softmax(scale q k^T [+ causal mask]) v with FlashAttention-2's algorithm, as attention.cu
// (float, double) computes it, whose header states the layout and the causal alignment: q (B, H, Tq, D), k and v
// (B, H, Tk, D) with any strides over b, h, t (d contiguous, 16-byte aligned rows), D padded with zeros to ATT_DP
// (a multiple of 16) in shared memory, rows ATT_PITCH apart (attention_tiles.cuh). The products are mma.sync
// m16n8k16 with float accumulators (mma.cuh; fragments from shared memory by ldmatrix, .trans for an operand
// stored k-major); the scores, the softmax and every sum are float, the probabilities (and backward's dS) are
// rounded to `real` once as an mma operand, and each output is rounded once. Built for float or double the
// kernels are empty (the launcher never runs them so), and so below sm_80.
//
// attention_half_forward: grid (ceil(Tq / BQ), B * H), ATT_WARPS warps, BQ = 16 ATT_WARPS. Warp w owns queries
//   16 w .. 16 w + 15 of the block; their q fragments are loaded once (ldmatrix) and kept in registers. K/V tiles
//   of BK keys stream through two cp.async stages (causal blocks stop at the diagonal's tile). Per tile a warp
//   computes its 16 x BK scores S = q k^T (mma with k's rows as B, K-contiguous), lane 4g + t holding rows g and
//   g + 8, keys 8j + 2t, 8j + 2t + 1; the row maxima meet over the 4 lanes of a row (two shuffles), the running
//   max m (in log2 units: scores times scale log2 e) moves, l and the output accumulator are rescaled by
//   2^(m_old - m), and P = 2^(s - m) (float) goes from the score accumulators straight into mma A fragments
//   (rounded to `real`): acc += P V with V's rows as B (.trans). At the end the row sums l meet over the
//   quad, y = acc / l is stored (two adjacent columns a store) and lse = ln 2 (m + log2 l) (float, natural
//   units, as attention.cu's) is kept for backward.
// attention_half_backward: grid (ceil(Tk / BK), B * H), ATT_WARPS warps, BK = 16 ATT_WARPS; attention.cu's
//   attention_backward_prep (built for the same `real`) has written delta = rowsum(dy * y) and zeroed the float
//   dq accumulator. Warp w owns keys 16 w .. 16 w + 15 of the block (K and V rows in shared memory for the whole
//   block); tiles of BQ queries (q, dy) stream through two cp.async stages from the first tile the causal mask
//   lets see the block's keys. Per tile a warp computes S^T = k q^T and dP^T = v dy^T (16 keys x BQ queries,
//   mma with q's and dy's rows as B), P^T = 2^(scale log2 e s - log2 e lse) and dS^T = P^T (dP^T - delta) in
//   float, and from the accumulators as A fragments (rounded to `real`) adds dv += P^T dy and dk += dS^T q
//   (dy and q as B, .trans), kept in float registers until the end (dk times scale). dS^T also goes to shared
//   memory (Ss, `real`); after a barrier the warps compute this tile's dq = scale dS k, warp w taking query rows
//   16 (w % (BQ / 16)) .. and every ATT_WARPS / (BQ / 16)-th pair of 8-column blocks (dS through ldmatrix .trans
//   as A, k as B .trans), added into the dq accumulator with float atomicAdd (the key blocks meet there in no
//   fixed order: dq's last bits may vary run to run).
// Dropout (ATT_DROPOUT = 1): as attention.cu's, whose header states it; here P is zeroed where dropped before it
//   is rounded into the P V (forward) and dv (backward) operands, and drop_scale applied to y and dv at the end.
#include <type_traits>  // std::is_same

#ifndef ATT_WARPS
#define ATT_WARPS 4  // warps a block: 16 queries (forward) or keys (backward) each
#endif
#ifndef ATT_THREADS
#define ATT_THREADS 128  // 32 ATT_WARPS (a literal: __launch_bounds__ takes it)
#endif
#include "attention_tiles.cuh"
#include "dropout_rng.cuh"
#include "mma.cuh"
static_assert(ATT_THREADS == 32 * ATT_WARPS, "ATT_THREADS is 32 ATT_WARPS");
#ifndef ATT_DROPOUT
#define ATT_DROPOUT 0  // 1: dropout on the probabilities (the header's last paragraph)
#endif
#ifndef ATT_FWD_BK
#define ATT_FWD_BK 64  // forward: keys a streamed tile holds
#endif
#ifndef ATT_BWD_BQ
#define ATT_BWD_BQ (ATT_DP <= 64 ? 64 : 32)  // backward: queries a streamed tile holds
#endif

// a = mma.m16n8k16's A registers of the 16 x 16 tile (rows m0 .., k0 ..) of an operand stored with row pitch
// `pitch`, K-contiguous (s[m][k]) or, TRANS, k-major (s[k][m]): one ldmatrix_x4, lane 8j + i naming row i of
// matrix j = (rows m0 + 8 (j % 2) .., k k0 + 8 (j / 2) ..), stored transposed when TRANS.
template <bool TRANS>
__device__ __forceinline__ void att_load_a(unsigned (&a)[4], const real* s, int pitch, int m0, int k0, int lane) {
    const int i = lane % 8, j = lane / 8;
    if constexpr (TRANS)
        ldmatrix_x4_trans(a, s + (k0 + 8 * (j / 2) + i) * pitch + m0 + 8 * (j % 2));
    else
        ldmatrix_x4(a, s + (m0 + 8 * (j % 2) + i) * pitch + k0 + 8 * (j / 2));
}

// b[h] = mma.m16n8k16's B registers of the 8 columns n0 + 8 h .. (h = 0, 1), k0 .. k0 + 15, of an operand
// stored K-contiguous (s[n][k]) or, TRANS, k-major (s[k][n]): one ldmatrix_x4 whose matrix j holds columns
// n0 + 8 (j / 2) .., k k0 + 8 (j % 2) ...
template <bool TRANS>
__device__ __forceinline__ void att_load_b2(unsigned (&b)[2][2], const real* s, int pitch, int n0, int k0,
                                            int lane) {
    const int i = lane % 8, j = lane / 8;
    unsigned r[4];
    if constexpr (TRANS)
        ldmatrix_x4_trans(r, s + (k0 + 8 * (j % 2) + i) * pitch + n0 + 8 * (j / 2));
    else
        ldmatrix_x4(r, s + (n0 + 8 * (j / 2) + i) * pitch + k0 + 8 * (j % 2));
    b[0][0] = r[0]; b[0][1] = r[1];
    b[1][0] = r[2]; b[1][1] = r[3];
}

// acc[j] += A B_j for the N 8-column tiles j of B (columns 8j .., k k0 .. k0 + 15, stored as att_load_b2 reads
// it): one 16-row strip of a product, A's k-step in registers.
template <bool BF16, bool TRANS, int N>
__device__ __forceinline__ void att_mma_strip(float (&acc)[N][4], const unsigned (&a)[4], const real* s, int pitch,
                                              int k0, int lane) {
#pragma unroll
    for (int j = 0; j < N; j += 2) {
        unsigned b[2][2];
        att_load_b2<TRANS>(b, s, pitch, 8 * j, k0, lane);
        mma_m16n8k16<BF16>(acc[j], a, b[0]);
        mma_m16n8k16<BF16>(acc[j + 1], a, b[1]);
    }
}

// Two floats rounded to `real`, lo in the low 16 bits (an mma operand register, or one 4-byte store).
__device__ __forceinline__ unsigned att_pack(float lo, float hi) {
    const real a = convert<real>(lo), b = convert<real>(hi);
    unsigned short x, y;
    memcpy(&x, &a, 2);
    memcpy(&y, &b, 2);
    return x | (unsigned)y << 16;
}

// The A fragments of a 16 x 16 k-step kk from two 16 x 8 accumulator tiles c[2 kk], c[2 kk + 1] (mma's D layout
// is its A layout, tile by tile: lane 4g + t holds rows g, g + 8 and columns 2t, 2t + 1 of each).
template <int NC>
__device__ __forceinline__ void att_to_a(unsigned (&a)[NC / 2][4], const float (&c)[NC][4]) {
#pragma unroll
    for (int kk = 0; kk < NC / 2; ++kk) {
        a[kk][0] = att_pack(c[2 * kk][0], c[2 * kk][1]);
        a[kk][1] = att_pack(c[2 * kk][2], c[2 * kk][3]);
        a[kk][2] = att_pack(c[2 * kk + 1][0], c[2 * kk + 1][1]);
        a[kk][3] = att_pack(c[2 * kk + 1][2], c[2 * kk + 1][3]);
    }
}

// The max (SUM false) or sum of v over the 4 lanes of a row (lanes 4g .. 4g + 3), adjacent lanes first.
template <bool SUM>
__device__ __forceinline__ float att_quad(float v) {
    if constexpr (SUM)
        return warp_allreduce(v, SumOp<float>(), 4, true);
    else
        return warp_allreduce(v, [](float a, float b) { return fmaxf(a, b); }, 4, true);
}

constexpr float ATT_LOG2E = 1.4426950408889634f, ATT_LN2 = 0.6931471805599453f;

// ---------------------------------------------------------------------------------------------------
// attention_half_forward
// ---------------------------------------------------------------------------------------------------
// Shared memory: Qs (BQ x PITCH), Ks and Vs (2 stages of BK x PITCH each): half_fwd_shared in
// nn/kernels_attention.py adds the same up.
extern "C" __global__ void __launch_bounds__(ATT_THREADS, 1)
attention_half_forward(const real* __restrict__ q, const real* __restrict__ k, const real* __restrict__ v,
                       real* __restrict__ o, float* __restrict__ lse, int H, int Tq, int Tk, int D, float scale,
                       int causal, float drop_p, float drop_scale, long long drop_seed,
                       const long long* __restrict__ drop_offset, long long q_sb, long long q_sh, long long q_st, long long k_sb, long long k_sh,
                       long long k_st, long long v_sb, long long v_sh, long long v_st, long long o_sb,
                       long long o_sh, long long o_st) {
#if defined(GPUBLAS_HAS_MMA_TF32)
    if constexpr (sizeof(real) == 2) {
        constexpr bool BF16 = std::is_same<real, __nv_bfloat16>::value;
        constexpr int BQ = 16 * ATT_WARPS, BK = ATT_FWD_BK, DP = ATT_DP, P = ATT_PITCH, NK = BK / 8, ND = DP / 8;
        static_assert(BK % 16 == 0, "whole k-steps of keys");
        extern __shared__ __align__(16) unsigned char att_half_fwd_smem[];
        real* Qs = reinterpret_cast<real*>(att_half_fwd_smem);
        real* Ks = Qs + BQ * P;
        real* Vs = Ks + 2 * BK * P;
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        const int b = blockIdx.y / H, h = blockIdx.y % H, q0 = blockIdx.x * BQ, wq = q0 + 16 * warp;
        q += b * q_sb + h * q_sh + q0 * q_st;
        k += b * k_sb + h * k_sh;
        v += b * v_sb + h * v_sh;
        const int k_end = causal && q0 + BQ < Tk ? q0 + BQ : Tk;  // keys past it are masked in every row here
        const int nt = (k_end + BK - 1) / BK;
        const float sl2 = scale * ATT_LOG2E;
        // dropout: the counter of element (query wq + r, key j) is drop_row + r Tk + j
        const unsigned long long drop_row = ATT_DROPOUT ? *drop_offset + ((unsigned long long)blockIdx.y * Tq + wq) * Tk : 0;

        att_load_rows<BQ>(Qs, q, q_st, Tq - q0, D);
        att_load_rows<BK>(Ks, k, k_st, Tk, D);
        att_load_rows<BK>(Vs, v, v_st, Tk, D);
        __pipeline_commit();

        unsigned qa[DP / 16][4];  // this warp's 16 rows of q, every k-step of D
        float acc[ND][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g, g + 8
#pragma unroll
        for (int j = 0; j < ND; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
        for (int it = 0; it < nt; ++it) {
            const int k0 = it * BK, stage = it & 1;
            __pipeline_wait_prior(0);  // tile it has landed (this thread's copies) ...
            __syncthreads();           // ... everyone's, and everyone is done with tile it - 1's stage
            if (it + 1 < nt) {
                att_load_rows<BK>(Ks + (stage ^ 1) * BK * P, k + (k0 + BK) * k_st, k_st, Tk - k0 - BK, D);
                att_load_rows<BK>(Vs + (stage ^ 1) * BK * P, v + (k0 + BK) * v_st, v_st, Tk - k0 - BK, D);
            }
            __pipeline_commit();
            if (it == 0)
#pragma unroll
                for (int ks = 0; ks < DP / 16; ++ks) att_load_a<false>(qa[ks], Qs, P, 16 * warp, 16 * ks, lane);
            const real* Kt = Ks + stage * BK * P;
            const real* Vt = Vs + stage * BK * P;

            // s = q k^T (16 rows x BK keys), in log2 units; masked keys -inf
            float s[NK][4];
#pragma unroll
            for (int j = 0; j < NK; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[j][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < DP / 16; ++ks) att_mma_strip<BF16, false>(s, qa[ks], Kt, P, 16 * ks, lane);
            const bool masked = k0 + BK > Tk || (causal && k0 + BK - 1 > wq);  // the warp's uniform choice
            float mx[2] = {m[0], m[1]};
#pragma unroll
            for (int j = 0; j < NK; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int kj = k0 + 8 * j + 2 * t + e % 2, qi = wq + g + 8 * (e / 2);
                    s[j][e] = !masked || (kj < Tk && (!causal || kj <= qi)) ? s[j][e] * sl2 : -INFINITY;
                    mx[e / 2] = fmaxf(mx[e / 2], s[j][e]);
                }
            // the rows' new max; alpha = 2^(m_old - m) rescales l and acc; P = 2^(s - m)
            float alpha[2], base[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                mx[r] = att_quad<false>(mx[r]);
                base[r] = mx[r] == -INFINITY ? 0.0f : mx[r];  // a row masked so far: P = 0, alpha = 0
                alpha[r] = exp2f(m[r] - base[r]);
                m[r] = mx[r];
                l[r] *= alpha[r];
            }
#pragma unroll
            for (int j = 0; j < NK; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    s[j][e] = exp2f(s[j][e] - base[e / 2]);
                    l[e / 2] += s[j][e];  // this lane's part of the row sum (float P, before rounding and dropout)
                    if (ATT_DROPOUT &&
                        !dropout_keep(drop_seed, drop_row + (unsigned long long)(g + 8 * (e / 2)) * Tk + k0 + 8 * j + 2 * t + e % 2,
                                      drop_p))
                        s[j][e] = 0.0f;
                }
#pragma unroll
            for (int j = 0; j < ND; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[j][e] *= alpha[e / 2];
            // acc += P V: P's k-steps from the score registers, V's rows (keys) as B, k-major
            unsigned pa[NK / 2][4];
            att_to_a<NK>(pa, s);
#pragma unroll
            for (int kk = 0; kk < NK / 2; ++kk) att_mma_strip<BF16, true>(acc, pa[kk], Vt, P, 16 * kk, lane);
        }
        // y = acc / l (rounded once), lse = ln 2 (m + log2 l)
        o += b * o_sb + h * o_sh;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float sum = att_quad<true>(l[r]), inv = (ATT_DROPOUT ? drop_scale : 1.0f) / sum;
            const int qi = wq + g + 8 * r;
            if (qi < Tq) {
#pragma unroll
                for (int j = 0; j < ND; ++j)
                    if (8 * j < D)
                        *reinterpret_cast<unsigned*>(o + qi * o_st + 8 * j + 2 * t) =
                            att_pack(acc[j][2 * r] * inv, acc[j][2 * r + 1] * inv);
                if (t == 0) lse[(long long)blockIdx.y * Tq + qi] = ATT_LN2 * (m[r] + log2f(sum));
            }
        }
    }
#endif
}

// ---------------------------------------------------------------------------------------------------
// attention_half_backward
// ---------------------------------------------------------------------------------------------------
// Shared memory: Ks, Vs (BK x PITCH each), Qs and Gs (dy) (2 stages of BQ x PITCH each), Ss (dS^T: BK x (BQ + 8)):
// half_bwd_shared in nn/kernels_attention.py adds the same up. dk and dv are contiguous (B, H, Tk, D), dq_acc the
// float (B, H, Tq, D) accumulator.
extern "C" __global__ void __launch_bounds__(ATT_THREADS, 1)
attention_half_backward(const real* __restrict__ q, const real* __restrict__ k, const real* __restrict__ v,
                        const real* __restrict__ dy, const float* __restrict__ lse, const float* __restrict__ delta,
                        float* __restrict__ dq_acc, real* __restrict__ dk, real* __restrict__ dv, int H, int Tq,
                        int Tk, int D, float scale, int causal, float drop_p, float drop_scale, long long drop_seed,
                        const long long* __restrict__ drop_offset, long long q_sb, long long q_sh, long long q_st,
                        long long k_sb, long long k_sh, long long k_st, long long v_sb, long long v_sh,
                        long long v_st, long long dy_sb, long long dy_sh, long long dy_st) {
#if defined(GPUBLAS_HAS_MMA_TF32)
    if constexpr (sizeof(real) == 2) {
        constexpr bool BF16 = std::is_same<real, __nv_bfloat16>::value;
        constexpr int BK = 16 * ATT_WARPS, BQ = ATT_BWD_BQ, DP = ATT_DP, P = ATT_PITCH, SP = BQ + 8;
        constexpr int NQ = BQ / 8, ND = DP / 8;
        constexpr int QW = BQ / 16, WN = ATT_WARPS / QW, NPAIR = (DP / 16 + WN - 1) / WN;  // dq: warps, pairs
        static_assert(BQ % 16 == 0 && ATT_WARPS % QW == 0, "the warps tile dq's rows");
        extern __shared__ __align__(16) unsigned char att_half_bwd_smem[];
        real* Ks = reinterpret_cast<real*>(att_half_bwd_smem);
        real* Vs = Ks + BK * P;
        real* Qs = Vs + BK * P;
        real* Gs = Qs + 2 * BQ * P;
        real* Ss = Gs + 2 * BQ * P;
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        const int k0 = blockIdx.x * BK, wk = k0 + 16 * warp;
        att_backward_rows(q, k, v, dy, lse, delta, dq_acc, H, Tq, D, k0, q_sb, q_sh, k_sb, k_sh, k_st, v_sb, v_sh,
                          v_st, dy_sb, dy_sh);
        const int u0 = causal ? k0 / BQ : 0, nu = (Tq + BQ - 1) / BQ;  // query tiles before u0 see none of the keys
        const float sl2 = scale * ATT_LOG2E;
        // dropout: the counter of element (query i, key wk + c) is drop_col + i Tk + c, as the forward's
        const unsigned long long drop_col = ATT_DROPOUT ? *drop_offset + (unsigned long long)blockIdx.y * Tq * Tk + wk : 0;

        att_load_rows<BK>(Ks, k, k_st, Tk - k0, D);
        att_load_rows<BK>(Vs, v, v_st, Tk - k0, D);
        if (u0 < nu) {
            att_load_rows<BQ>(Qs, q + u0 * BQ * q_st, q_st, Tq - u0 * BQ, D);
            att_load_rows<BQ>(Gs, dy + u0 * BQ * dy_st, dy_st, Tq - u0 * BQ, D);
        }
        __pipeline_commit();

        float dka[ND][4], dva[ND][4];  // rows (keys) g, g + 8 of the warp's 16, columns 8j + 2t, + 1
#pragma unroll
        for (int j = 0; j < ND; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) dka[j][e] = dva[j][e] = 0.0f;
        for (int u = u0; u < nu; ++u) {
            const int q0 = u * BQ, stage = (u - u0) & 1;
            __pipeline_wait_prior(0);
            __syncthreads();  // tile u has landed; everyone is done with tile u - 1 (its stage, Ss)
            if (u + 1 < nu) {
                const int q1 = q0 + BQ;
                att_load_rows<BQ>(Qs + (stage ^ 1) * BQ * P, q + q1 * q_st, q_st, Tq - q1, D);
                att_load_rows<BQ>(Gs + (stage ^ 1) * BQ * P, dy + q1 * dy_st, dy_st, Tq - q1, D);
            }
            __pipeline_commit();
            const real* Qt = Qs + stage * BQ * P;
            const real* Gt = Gs + stage * BQ * P;

            // S^T = k q^T and dP^T = v dy^T: the warp's 16 keys x BQ queries
            float s[NQ][4], dp[NQ][4];
#pragma unroll
            for (int j = 0; j < NQ; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < DP / 16; ++ks) {
                unsigned ka[4], va[4];
                att_load_a<false>(ka, Ks, P, 16 * warp, 16 * ks, lane);
                att_load_a<false>(va, Vs, P, 16 * warp, 16 * ks, lane);
                att_mma_strip<BF16, false>(s, ka, Qt, P, 16 * ks, lane);
                att_mma_strip<BF16, false>(dp, va, Gt, P, 16 * ks, lane);
            }
            // P^T = 2^(scale log2e s - log2e lse) (0 where masked), dS^T = P^T (dP^T - delta), in s and dp
            const bool masked = q0 + BQ > Tq || wk + 16 > Tk || (causal && wk + 15 > q0);  // the warp's choice
#pragma unroll
            for (int j = 0; j < NQ; ++j)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int qi = q0 + 8 * j + 2 * t + c;
                    const float lq = qi < Tq ? lse[qi] * ATT_LOG2E : 0.0f, dl = qi < Tq ? delta[qi] : 0.0f;
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const int e = 2 * r + c, kj = wk + g + 8 * r;
                        const bool ok = !masked || (qi < Tq && kj < Tk && (!causal || kj <= qi));
                        s[j][e] = ok ? exp2f(s[j][e] * sl2 - lq) : 0.0f;
                        if (ATT_DROPOUT) {  // dS^T from P and the kept dP times drop_scale; dv's P o M
                            const bool keep = dropout_keep(drop_seed, drop_col + (unsigned long long)qi * Tk + g + 8 * r, drop_p);
                            dp[j][e] = s[j][e] * ((keep ? dp[j][e] * drop_scale : 0.0f) - dl);
                            s[j][e] = keep ? s[j][e] : 0.0f;
                        } else {
                            dp[j][e] = s[j][e] * (dp[j][e] - dl);
                        }
                    }
                }
            // dv += P^T dy, dk += dS^T q: P^T and dS^T as A from the registers; dy and q rows (queries) as B
            unsigned pa[NQ / 2][4], sa[NQ / 2][4];
            att_to_a<NQ>(pa, s);
            att_to_a<NQ>(sa, dp);
#pragma unroll
            for (int kk = 0; kk < NQ / 2; ++kk) {
                att_mma_strip<BF16, true>(dva, pa[kk], Gt, P, 16 * kk, lane);
                att_mma_strip<BF16, true>(dka, sa[kk], Qt, P, 16 * kk, lane);
            }
            // dS^T (rounded, as the dk product read it) to Ss for dq
#pragma unroll
            for (int kk = 0; kk < NQ / 2; ++kk)
#pragma unroll
                for (int x = 0; x < 4; ++x)  // a[x]: row g + 8 (x % 2), queries 16 kk + 8 (x / 2) + 2t, + 1
                    *reinterpret_cast<unsigned*>(Ss + (16 * warp + g + 8 * (x % 2)) * SP + 16 * kk + 8 * (x / 2) +
                                                 2 * t) = sa[kk][x];
            __syncthreads();

            // this tile's dq = scale dS k: warp rows 16 (warp % QW) .., column pairs warp / QW + WN i
            const int wm = 16 * (warp % QW), wn = warp / QW;
            float dqa[NPAIR][2][4];
#pragma unroll
            for (int i = 0; i < NPAIR; ++i)
#pragma unroll
                for (int x = 0; x < 2; ++x)
#pragma unroll
                    for (int e = 0; e < 4; ++e) dqa[i][x][e] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                unsigned a[4];
                att_load_a<true>(a, Ss, SP, wm, 16 * kk, lane);
#pragma unroll
                for (int i = 0; i < NPAIR; ++i)
                    if (wn + WN * i < DP / 16) {
                        unsigned kb[2][2];
                        att_load_b2<true>(kb, Ks, P, 16 * (wn + WN * i), 16 * kk, lane);
                        mma_m16n8k16<BF16>(dqa[i][0], a, kb[0]);
                        mma_m16n8k16<BF16>(dqa[i][1], a, kb[1]);
                    }
            }
#pragma unroll
            for (int i = 0; i < NPAIR; ++i)
#pragma unroll
                for (int x = 0; x < 2; ++x)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int qi = q0 + wm + g + 8 * (e / 2), d = 16 * (wn + WN * i) + 8 * x + 2 * t + e % 2;
                        if (qi < Tq && d < D) atomicAdd(dq_acc + (long long)qi * D + d, dqa[i][x][e] * scale);
                    }
        }
        __pipeline_wait_prior(0);  // a block whose keys no query tile sees (u0 >= nu) still has K and V in flight
        // dk (times scale) and dv, rounded once: rows wk + g + 8 r, columns 8j + 2t, + 1
        dk += ((long long)blockIdx.y * Tk) * D;
        dv += ((long long)blockIdx.y * Tk) * D;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int kj = wk + g + 8 * r;
            if (kj < Tk)
#pragma unroll
                for (int j = 0; j < ND; ++j)
                    if (8 * j < D) {
                        *reinterpret_cast<unsigned*>(dk + (long long)kj * D + 8 * j + 2 * t) =
                            att_pack(dka[j][2 * r] * scale, dka[j][2 * r + 1] * scale);
                        *reinterpret_cast<unsigned*>(dv + (long long)kj * D + 8 * j + 2 * t) =
                            att_pack(ATT_DROPOUT ? dva[j][2 * r] * drop_scale : dva[j][2 * r],
                                     ATT_DROPOUT ? dva[j][2 * r + 1] * drop_scale : dva[j][2 * r + 1]);
                    }
        }
    }
#endif
}
