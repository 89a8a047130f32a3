// attention.cu: fused scaled dot-product attention, y = softmax(scale q k^T [+ causal mask]) v, with
// FlashAttention-2's algorithm (Dao 2023): no Tq x Tk matrix ever reaches device memory, in either direction.
// q (B, H, Tq, D), k and v (B, H, Tk, D) with any strides over b, h, t (d contiguous); the head dim D
// (a multiple of 8) is padded with zeros to ATT_DP (a multiple of 16) in shared memory. A causal mask is
// PyTorch's (top-left): query i sees keys j <= i. Built for float or double (`real`: every sum in real);
// the launcher (nn/kernels_attention.py) picks the tiles and passes them as defines (one compile per head-dim
// bucket), ATT_* below being nvcc's defaults.
//
// attention_forward: grid (ceil(Tq / BQ), B * H), block TY x TX threads (ATT_THREADS; thread t = TX ty + tx).
//   A block keeps its BQ queries in shared memory and streams K/V tiles of BK keys through two shared
//   stages (cp.async on sm_80+: tile t + 1 lands while tile t is computed); causal blocks stop at the
//   diagonal's tile. Per tile, thread (ty, tx) computes the scores of rows ty + TY i (i < BQ / TY) and
//   keys tx + TX j (j < BK / TX), and the per-row maxima meet in shared memory (one value per thread and
//   row); every thread of a row then takes the same running max m, rescales its partial row sum l and its
//   accumulator by e^(m_old - m), and writes P = e^(s - m) to shared memory; the accumulator of rows
//   ty + TY i, columns tx + TX j (j < DP / TX) adds P V. At the end the TX partial sums of a row are added
//   in a fixed order, y = acc / l is stored (rounded once) and lse = m + log l (the logsumexp, in
//   compute_t<real>) is kept for backward.
// attention_backward_prep: one thread per (b, h, query) row, grid-stride: delta = rowsum(dy * y) (for
//   dS = P (dP - delta)) in compute_t<real>, and the row of the dq accumulator zeroed.
// attention_backward: grid (ceil(Tk / BK), B * H), block TY x TX. A block keeps its BK keys' K and V rows in
//   shared memory and streams tiles of BQ queries (q, dy; two cp.async stages), from the first query tile
//   the causal mask lets see its keys. Per tile, thread (ty, tx) recomputes the scores and dP = dy v^T of
//   keys ty + TY i and queries tx + TX j, P = e^(scale s - lse) and dS = P (dP - delta) into shared memory;
//   then it adds P^T dy and dS^T q into its dv and dk rows ty + TY i, columns tx + TX j (registers, stored
//   once at the end, dk times scale), and computes rows ty + TY a of this tile's dq = scale dS k, columns
//   tx + TX j, which it adds into the dq accumulator with atomicAdd (the tiles of different key blocks
//   meet there, in no fixed order: dq's last bits may vary run to run).
//
// Dropout (ATT_DROPOUT = 1, a build of its own, as FlashAttention's): the probabilities P (normalized
// before dropout: l and lse are dropout's free) are zeroed where dropout_rng.cuh's draw says so, keyed by the
// seed and the offset read from device memory, element (bh, i, j) at counter offset + (bh Tq + i) Tk + j, and
// the kept ones scaled by drop_scale = 1 / (1 - drop_p): forward y = (P o M) V drop_scale / l; backward
// regenerates the same mask tile by tile (no mask in memory): dv = drop_scale (P o M)^T dy and
// dS = P (drop_scale M o dP - delta) (delta = rowsum(dy y) still, y being the dropped output).
//
// The simulator runs its own form of both kernels (cuda_src/attention_sim.cuh, built with ATT_SIM_ROWS: one
// thread a block walking whole rows, no barriers; the GPU's tiles run there only in the tests). Before it, it
// built these kernels with TX = 1 (ATT_TX) so that a thread's keys (queries) are consecutive and its loops over
// them vectorize on the CPU, and ATT_KT = 1: the operand the score loop reads along its keys (K forward, q and
// dy backward) also lands d-major in shared memory (a plain transposing copy, the simulator having no cp.async
// to lose); nn.kernels.attention.sim_tiled_tiles keeps that configuration under test.
#include <cuda_pipeline.h>

#include "common.cuh"
#include "dropout_rng.cuh"
#if defined(__CUDA_ARCH_SIM__)
#include <atomic>
#endif

#ifndef ATT_TX
#define ATT_TX 16  // threads along keys (forward scores), queries (backward scores) and head-dim columns
#endif
#ifndef ATT_TY
#define ATT_TY 8  // threads along queries (forward) or keys (backward)
#endif
// the tiles' defaults are gpu_tiles' for ATT_DP = 64 (float, and double's half as large)
#ifndef ATT_FWD_BQ
#define ATT_FWD_BQ (sizeof(real) == 8 ? 32 : 64)  // forward: queries a block keeps
#endif
#ifndef ATT_FWD_BK
#define ATT_FWD_BK (sizeof(real) == 8 ? 32 : 64)  // forward: keys a streamed tile holds
#endif
#ifndef ATT_BWD_BK
#define ATT_BWD_BK (sizeof(real) == 8 ? 32 : 64)  // backward: keys a block keeps
#endif
#ifndef ATT_BWD_BQ
#define ATT_BWD_BQ (sizeof(real) == 8 ? 16 : 32)  // backward: queries a streamed tile holds
#endif
#ifndef ATT_KT
#define ATT_KT 0  // 1: the score loop's key-side operand is also stored d-major (the simulator)
#endif
#ifndef ATT_DROPOUT
#define ATT_DROPOUT 0  // 1: dropout on the probabilities (the header's last paragraph)
#endif
#ifndef ATT_THREADS
#define ATT_THREADS 128  // ATT_TX * ATT_TY (a literal: __launch_bounds__ takes it)
#endif
#include "attention_tiles.cuh"
static_assert(ATT_THREADS == ATT_TX * ATT_TY, "ATT_THREADS is ATT_TX * ATT_TY");
#if defined(__CUDA_ARCH_SIM__) && defined(ATT_SIM_ROWS)
#include "attention_sim.cuh"  // the simulator's form (one thread a block), which the kernels below call there
#endif

// The same tile stored d-major, s[d * ROWS + r] (ATT_KT: the simulator's plain copy; thread t: rows t,
// t + THREADS ...).
template <int ROWS>
__device__ __forceinline__ void att_load_rows_t(real* s, const real* g, long long ld, int rows_left, int D) {
    const int n = rows_left < ROWS ? (rows_left > 0 ? rows_left : 0) : ROWS;
    for (int d = threadIdx.x; d < ATT_DP; d += ATT_THREADS) {
        real* col = s + d * ROWS;
        if (d < D)
            for (int r = 0; r < n; ++r) col[r] = g[r * ld + d];
        for (int r = d < D ? n : 0; r < ROWS; ++r) col[r] = convert<real>(0.0f);
    }
}

__device__ __forceinline__ acc_real att_max(acc_real a, acc_real b) { return a > b ? a : b; }

// p[j] = e^(x[j]) for a thread's run of N values (x = -inf gives 0). On the simulator, float: vector_math.h's
// exp of 16 values at a time (a scalar expf is a call the CPU cannot overlap; within 1 ulp, as expf's 2).
template <int N>
__device__ __forceinline__ void att_exp_run(const acc_real (&x)[N], acc_real (&p)[N]) {
#if defined(__CUDA_ARCH_SIM__)
    if constexpr (sizeof(acc_real) == 4 && N % 16 == 0) {
        for (int j = 0; j < N; j += 16) {
            gpublas_sim::float16v v;
            memcpy(&v, x + j, sizeof v);
            v = exp(v);
            memcpy(p + j, &v, sizeof v);
        }
        return;
    }
#endif
#pragma unroll
    for (int j = 0; j < N; ++j) p[j] = ew_exp(x[j]);
}

#if defined(__CUDA_ARCH_SIM__)
static std::atomic<int> att_row_locks[256];  // the simulator's row locks (att_add_row), by address
#endif

// dst[tx + TX j] += scale v[j] for the columns below D, atomically (rows of other blocks meet there). On the
// simulator a thread holds whole rows (TX = 1): one spin lock per row around plain adds instead of an atomic
// compare-and-swap loop per element (each ~10 ns on the CPU, the backward's largest cost before).
template <int CO>
__device__ __forceinline__ void att_add_row(acc_real* dst, const acc_real (&v)[CO], acc_real scale, int D, int tx) {
#if defined(__CUDA_ARCH_SIM__)
    if (ATT_TX == 1) {
        std::atomic<int>& lock = att_row_locks[(reinterpret_cast<uintptr_t>(dst) >> 8) & 255];
        while (lock.exchange(1, std::memory_order_acquire)) {}
        for (int j = 0; j < CO; ++j)
            if (j < D) dst[j] += v[j] * scale;
        lock.store(0, std::memory_order_release);
        return;
    }
#endif
#pragma unroll
    for (int j = 0; j < CO; ++j)
        if (tx + ATT_TX * j < D) atomicAdd(dst + tx + ATT_TX * j, v[j] * scale);
}

// ---------------------------------------------------------------------------------------------------
// attention_forward
// ---------------------------------------------------------------------------------------------------
// Shared memory: Qs (BQ x PITCH), Ks (2 stages: BK x PITCH, or d-major DP x BK with ATT_KT), Vs (2 stages of
// BK x PITCH), Ps (BQ x (BK + VW)), Rs (BQ x TX): nn/kernels_attention.py's _fwd_shared adds the same up.
extern "C" __global__ void __launch_bounds__(ATT_THREADS, 1)
attention_forward(const real* __restrict__ q, const real* __restrict__ k, const real* __restrict__ v,
                  real* __restrict__ o, compute_t<real>* __restrict__ lse, int H, int Tq, int Tk, int D,
                  compute_t<real> scale, int causal, float drop_p, compute_t<real> drop_scale, long long drop_seed,
                  const long long* __restrict__ drop_offset, long long q_sb, long long q_sh, long long q_st,
                  long long k_sb, long long k_sh, long long k_st, long long v_sb, long long v_sh, long long v_st,
                  long long o_sb, long long o_sh, long long o_st) {
#if defined(__CUDA_ARCH_SIM__) && defined(ATT_SIM_ROWS)
    att_sim_forward(q, k, v, o, lse, H, Tq, Tk, D, scale, causal, drop_p, drop_scale, drop_seed, drop_offset, q_sb, q_sh,
                    q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st, o_sb, o_sh, o_st);
#else
    constexpr int BQ = ATT_FWD_BQ, BK = ATT_FWD_BK, TX = ATT_TX, TY = ATT_TY, DP = ATT_DP, P = ATT_PITCH;
    constexpr int RQ = BQ / TY, CS = BK / TX, CO = DP / TX, PP = BK + ATT_VW;
    constexpr int KE = ATT_KT ? DP * BK : BK * P;  // one stage of Ks
    static_assert(BQ % TY == 0 && BK % TX == 0 && DP % TX == 0, "the threads tile the block");
    const acc_real NEG_INF = -(acc_real)INFINITY;
    extern __shared__ __align__(16) unsigned char att_fwd_smem[];
    real* Qs = reinterpret_cast<real*>(att_fwd_smem);
    real* Ks = Qs + BQ * P;
    real* Vs = Ks + 2 * KE;
    real* Ps = Vs + 2 * BK * P;
    acc_real* Rs = reinterpret_cast<acc_real*>(Ps + BQ * PP);
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    const int b = blockIdx.y / H, h = blockIdx.y % H, q0 = blockIdx.x * BQ;
    q += b * q_sb + h * q_sh + q0 * q_st;
    k += b * k_sb + h * k_sh;
    v += b * v_sb + h * v_sh;
    o += b * o_sb + h * o_sh + q0 * o_st;
    lse += (long long)blockIdx.y * Tq + q0;
    const int k_end = causal && q0 + BQ < Tk ? q0 + BQ : Tk;  // keys past it are masked in every row here
    const int nt = (k_end + BK - 1) / BK;
    // dropout: the counter of element (row q0 + r, key j) is drop_row + r Tk + j
    const unsigned long long drop_row = ATT_DROPOUT ? *drop_offset + ((unsigned long long)blockIdx.y * Tq + q0) * Tk : 0;

    att_load_rows<BQ>(Qs, q, q_st, Tq - q0, D);
    if (ATT_KT) att_load_rows_t<BK>(Ks, k, k_st, Tk, D);
    else att_load_rows<BK>(Ks, k, k_st, Tk, D);
    att_load_rows<BK>(Vs, v, v_st, Tk, D);
    __pipeline_commit();

    acc_real m[RQ], l[RQ], acc[RQ][CO];
#pragma unroll
    for (int i = 0; i < RQ; ++i) {
        m[i] = NEG_INF;
        l[i] = 0;
#pragma unroll
        for (int j = 0; j < CO; ++j) acc[i][j] = 0;
    }
    for (int t = 0; t < nt; ++t) {
        const int k0 = t * BK, stage = t & 1;
        __pipeline_wait_prior(0);  // tile t has landed (this thread's copies) ...
        __syncthreads();           // ... everyone's, and everyone is done with tile t - 1's stage
        if (t + 1 < nt) {
            const int next = stage ^ 1;
            if (ATT_KT) att_load_rows_t<BK>(Ks + next * KE, k + (k0 + BK) * k_st, k_st, Tk - k0 - BK, D);
            else att_load_rows<BK>(Ks + next * KE, k + (k0 + BK) * k_st, k_st, Tk - k0 - BK, D);
            att_load_rows<BK>(Vs + next * BK * P, v + (k0 + BK) * v_st, v_st, Tk - k0 - BK, D);
        }
        __pipeline_commit();
        const real* Kt = Ks + stage * KE;
        const real* Vt = Vs + stage * BK * P;

        // scores s = scale q k^T of rows ty + TY i, keys tx + TX j; masked ones -inf; row maxima to Rs
        acc_real s[RQ][CS];
#pragma unroll
        for (int i = 0; i < RQ; ++i)
#pragma unroll
            for (int j = 0; j < CS; ++j) s[i][j] = 0;
#pragma unroll 4
        for (int d = 0; d < DP; ++d) {
            acc_real qv[RQ], kv[CS];
#pragma unroll
            for (int i = 0; i < RQ; ++i) qv[i] = load_as(Qs[(ty + TY * i) * P + d]);
#pragma unroll
            for (int j = 0; j < CS; ++j) kv[j] = load_as(ATT_KT ? Kt[d * BK + tx + TX * j] : Kt[(tx + TX * j) * P + d]);
#pragma unroll
            for (int i = 0; i < RQ; ++i)
#pragma unroll
                for (int j = 0; j < CS; ++j) s[i][j] += qv[i] * kv[j];
        }
#pragma unroll
        for (int i = 0; i < RQ; ++i) {
            const int qi = q0 + ty + TY * i;
            acc_real pm = NEG_INF;
#pragma unroll
            for (int j = 0; j < CS; ++j) {
                const int kj = k0 + tx + TX * j;
                s[i][j] = kj < Tk && (!causal || kj <= qi) ? s[i][j] * scale : NEG_INF;
                pm = att_max(pm, s[i][j]);
            }
            Rs[(ty + TY * i) * TX + tx] = pm;
        }
        __syncthreads();

        // the row's new max m; alpha = e^(m_old - m) rescales l and acc; P = e^(s - m) to Ps
        acc_real alpha[RQ];
#pragma unroll
        for (int i = 0; i < RQ; ++i) {
            const int r = ty + TY * i;
            acc_real mx = m[i];
#pragma unroll
            for (int x = 0; x < TX; ++x) mx = att_max(mx, Rs[r * TX + x]);
            const acc_real base = mx == NEG_INF ? (acc_real)0 : mx;  // a row masked so far: P = 0, alpha = 0
            alpha[i] = ew_exp(m[i] - base);
            m[i] = mx;
            acc_real x[CS], p[CS], sum = 0;
#pragma unroll
            for (int j = 0; j < CS; ++j) x[j] = s[i][j] - base;
            att_exp_run(x, p);
#pragma unroll
            for (int j = 0; j < CS; ++j) {
                sum += p[j];  // l sums P before dropout
                if (ATT_DROPOUT && !dropout_keep(drop_seed, drop_row + (unsigned long long)r * Tk + k0 + tx + TX * j, drop_p))
                    p[j] = 0;
                Ps[r * PP + tx + TX * j] = convert<real>(p[j]);
            }
            l[i] = l[i] * alpha[i] + sum;
        }
        __syncthreads();

        // acc = alpha acc + P V
#pragma unroll
        for (int i = 0; i < RQ; ++i)
#pragma unroll
            for (int j = 0; j < CO; ++j) acc[i][j] *= alpha[i];
#pragma unroll 2
        for (int kk = 0; kk < BK; ++kk) {
            acc_real pv[RQ], vv[CO];
#pragma unroll
            for (int i = 0; i < RQ; ++i) pv[i] = load_as(Ps[(ty + TY * i) * PP + kk]);
#pragma unroll
            for (int j = 0; j < CO; ++j) vv[j] = load_as(Vt[kk * P + tx + TX * j]);
#pragma unroll
            for (int i = 0; i < RQ; ++i)
#pragma unroll
                for (int j = 0; j < CO; ++j) acc[i][j] += pv[i] * vv[j];
        }
    }
    // every thread is past the last tile's reads of Rs (the barrier before P V): the partial sums go there
#pragma unroll
    for (int i = 0; i < RQ; ++i) Rs[(ty + TY * i) * TX + tx] = l[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < RQ; ++i) {
        const int r = ty + TY * i;
        acc_real sum = 0;
#pragma unroll
        for (int x = 0; x < TX; ++x) sum += Rs[r * TX + x];
        if (r < Tq - q0) {
            const acc_real inv = ATT_DROPOUT ? drop_scale / sum : (acc_real)1 / sum;
#pragma unroll
            for (int j = 0; j < CO; ++j)
                if (tx + TX * j < D) o[r * o_st + tx + TX * j] = convert<real>(acc[i][j] * inv);
            if (tx == 0) lse[r] = m[i] + ew_log(sum);
        }
    }
#endif
}

// ---------------------------------------------------------------------------------------------------
// attention_backward_prep: delta = rowsum(dy * y); the dq accumulator's rows zeroed
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void attention_backward_prep(const real* __restrict__ dy, const real* __restrict__ y,
                                                   compute_t<real>* __restrict__ delta,
                                                   compute_t<real>* __restrict__ dq_acc, int H, int Tq, int D,
                                                   long long dy_sb, long long dy_sh, long long dy_st, long long y_sb,
                                                   long long y_sh, long long y_st, long long rows) {
    GRID_STRIDE_LOOP(long long, row, rows) {
        const long long bh = row / Tq, i = row - bh * Tq, b = bh / H, h = bh - b * H;
        const real* g = dy + b * dy_sb + h * dy_sh + i * dy_st;
        const real* x = y + b * y_sb + h * y_sh + i * y_st;
        acc_real sum = 0;
        for (int d = 0; d < D; ++d) sum += load_as(g[d]) * load_as(x[d]);
        delta[row] = sum;
        for (int d = 0; d < D; ++d) dq_acc[row * D + d] = 0;
    }
}

// ---------------------------------------------------------------------------------------------------
// attention_backward
// ---------------------------------------------------------------------------------------------------
// Shared memory: Ks, Vs (BK x PITCH each), Qs and Gs (dy) (2 stages of BQ x PITCH each), with ATT_KT also
// QTs and GTs (2 stages of DP x BQ each, d-major), Ps and Ss (dS) (BK x (BQ + VW) each): _bwd_shared in
// nn/kernels_attention.py adds the same up. dk and dv are contiguous (B, H, Tk, D); dq_acc (B, H, Tq, D).
extern "C" __global__ void __launch_bounds__(ATT_THREADS, 1)
attention_backward(const real* __restrict__ q, const real* __restrict__ k, const real* __restrict__ v,
                   const real* __restrict__ dy, const compute_t<real>* __restrict__ lse,
                   const compute_t<real>* __restrict__ delta, compute_t<real>* __restrict__ dq_acc,
                   real* __restrict__ dk, real* __restrict__ dv, int H, int Tq, int Tk, int D, compute_t<real> scale,
                   int causal, float drop_p, compute_t<real> drop_scale, long long drop_seed,
                   const long long* __restrict__ drop_offset, long long q_sb, long long q_sh, long long q_st, long long k_sb, long long k_sh,
                   long long k_st, long long v_sb, long long v_sh, long long v_st, long long dy_sb, long long dy_sh,
                   long long dy_st) {
#if defined(__CUDA_ARCH_SIM__) && defined(ATT_SIM_ROWS)
    att_sim_backward(q, k, v, dy, lse, delta, dq_acc, dk, dv, H, Tq, Tk, D, scale, causal, drop_p, drop_scale, drop_seed,
                     drop_offset, q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st, dy_sb, dy_sh, dy_st);
#else
    constexpr int BQ = ATT_BWD_BQ, BK = ATT_BWD_BK, TX = ATT_TX, TY = ATT_TY, DP = ATT_DP, P = ATT_PITCH;
    constexpr int RK = BK / TY, CQ = BQ / TX, RQ = BQ / TY, CO = DP / TX, PP = BQ + ATT_VW;
    constexpr int TE = ATT_KT ? DP * BQ : 0;  // one stage of QTs / GTs
    static_assert(BQ % TY == 0 && BQ % TX == 0 && BK % TY == 0 && DP % TX == 0, "the threads tile the block");
    extern __shared__ __align__(16) unsigned char att_bwd_smem[];
    real* Ks = reinterpret_cast<real*>(att_bwd_smem);
    real* Vs = Ks + BK * P;
    real* Qs = Vs + BK * P;
    real* Gs = Qs + 2 * BQ * P;
    real* QTs = Gs + 2 * BQ * P;
    real* GTs = QTs + 2 * TE;
    real* Ps = GTs + 2 * TE;
    real* Ss = Ps + BK * PP;
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    const int k0 = blockIdx.x * BK;
    att_backward_rows(q, k, v, dy, lse, delta, dq_acc, H, Tq, D, k0, q_sb, q_sh, k_sb, k_sh, k_st, v_sb, v_sh, v_st,
                      dy_sb, dy_sh);
    dk += ((long long)blockIdx.y * Tk + k0) * D;
    dv += ((long long)blockIdx.y * Tk + k0) * D;
    const int u0 = causal ? k0 / BQ : 0, nu = (Tq + BQ - 1) / BQ;  // query tiles before u0 see none of the keys
    // dropout: the counter of element (query i, key k0 + c) is drop_col + i Tk + c, as the forward's
    const unsigned long long drop_col = ATT_DROPOUT ? *drop_offset + (unsigned long long)blockIdx.y * Tq * Tk + k0 : 0;

    att_load_rows<BK>(Ks, k, k_st, Tk - k0, D);
    att_load_rows<BK>(Vs, v, v_st, Tk - k0, D);
    if (u0 < nu) {
        att_load_rows<BQ>(Qs, q + u0 * BQ * q_st, q_st, Tq - u0 * BQ, D);
        att_load_rows<BQ>(Gs, dy + u0 * BQ * dy_st, dy_st, Tq - u0 * BQ, D);
        if (ATT_KT) {
            att_load_rows_t<BQ>(QTs, q + u0 * BQ * q_st, q_st, Tq - u0 * BQ, D);
            att_load_rows_t<BQ>(GTs, dy + u0 * BQ * dy_st, dy_st, Tq - u0 * BQ, D);
        }
    }
    __pipeline_commit();

    acc_real dka[RK][CO], dva[RK][CO];
#pragma unroll
    for (int i = 0; i < RK; ++i)
#pragma unroll
        for (int j = 0; j < CO; ++j) dka[i][j] = dva[i][j] = 0;
    for (int u = u0; u < nu; ++u) {
        const int q0 = u * BQ, stage = (u - u0) & 1;
        __pipeline_wait_prior(0);
        __syncthreads();  // tile u has landed; everyone is done with tile u - 1 (its stage, Ps, Ss)
        if (u + 1 < nu) {
            const int next = stage ^ 1, q1 = q0 + BQ;
            att_load_rows<BQ>(Qs + next * BQ * P, q + q1 * q_st, q_st, Tq - q1, D);
            att_load_rows<BQ>(Gs + next * BQ * P, dy + q1 * dy_st, dy_st, Tq - q1, D);
            if (ATT_KT) {
                att_load_rows_t<BQ>(QTs + next * TE, q + q1 * q_st, q_st, Tq - q1, D);
                att_load_rows_t<BQ>(GTs + next * TE, dy + q1 * dy_st, dy_st, Tq - q1, D);
            }
        }
        __pipeline_commit();
        const real* Qt = Qs + stage * BQ * P;
        const real* Gt = Gs + stage * BQ * P;
        const real* QTt = QTs + stage * TE;
        const real* GTt = GTs + stage * TE;

        // s = q k^T and dP = dy v^T of keys ty + TY i, queries tx + TX j; P and dS = P (dP - delta) to Ps, Ss
        acc_real s[RK][CQ], dp[RK][CQ];
#pragma unroll
        for (int i = 0; i < RK; ++i)
#pragma unroll
            for (int j = 0; j < CQ; ++j) s[i][j] = dp[i][j] = 0;
#pragma unroll 2
        for (int d = 0; d < DP; ++d) {
            acc_real kv[RK], vv[RK], qv[CQ], gv[CQ];
#pragma unroll
            for (int i = 0; i < RK; ++i) {
                kv[i] = load_as(Ks[(ty + TY * i) * P + d]);
                vv[i] = load_as(Vs[(ty + TY * i) * P + d]);
            }
#pragma unroll
            for (int j = 0; j < CQ; ++j) {
                qv[j] = load_as(ATT_KT ? QTt[d * BQ + tx + TX * j] : Qt[(tx + TX * j) * P + d]);
                gv[j] = load_as(ATT_KT ? GTt[d * BQ + tx + TX * j] : Gt[(tx + TX * j) * P + d]);
            }
#pragma unroll
            for (int i = 0; i < RK; ++i)
#pragma unroll
                for (int j = 0; j < CQ; ++j) {
                    s[i][j] += kv[i] * qv[j];
                    dp[i][j] += vv[i] * gv[j];
                }
        }
        acc_real lq[CQ], dl[CQ];
#pragma unroll
        for (int j = 0; j < CQ; ++j) {
            const int qi = q0 + tx + TX * j;
            lq[j] = qi < Tq ? lse[qi] : (acc_real)0;
            dl[j] = qi < Tq ? delta[qi] : (acc_real)0;
        }
#pragma unroll
        for (int i = 0; i < RK; ++i) {
            const int kj = k0 + ty + TY * i;
            acc_real x[CQ], p[CQ];
#pragma unroll
            for (int j = 0; j < CQ; ++j) {
                const int qi = q0 + tx + TX * j;
                x[j] = qi < Tq && kj < Tk && (!causal || kj <= qi) ? s[i][j] * scale - lq[j] : -(acc_real)INFINITY;
            }
            att_exp_run(x, p);
#pragma unroll
            for (int j = 0; j < CQ; ++j) {
                acc_real dpj = dp[i][j], pk = p[j];  // dropout: dP of the kept ones times drop_scale, dv's P o M
                if (ATT_DROPOUT) {
                    const unsigned long long c = drop_col + (unsigned long long)(q0 + tx + TX * j) * Tk + ty + TY * i;
                    const bool keep = dropout_keep(drop_seed, c, drop_p);
                    dpj = keep ? dpj * drop_scale : (acc_real)0;
                    pk = keep ? pk : (acc_real)0;
                }
                Ps[(ty + TY * i) * PP + tx + TX * j] = convert<real>(pk);
                Ss[(ty + TY * i) * PP + tx + TX * j] = convert<real>(p[j] * (dpj - dl[j]));
            }
        }
        __syncthreads();

        // dv += P^T dy, dk += dS^T q (rows ty + TY i, columns tx + TX j)
#pragma unroll 2
        for (int qq = 0; qq < BQ; ++qq) {
            acc_real pv[RK], sv[RK], gv[CO], qv[CO];
#pragma unroll
            for (int i = 0; i < RK; ++i) {
                pv[i] = load_as(Ps[(ty + TY * i) * PP + qq]);
                sv[i] = load_as(Ss[(ty + TY * i) * PP + qq]);
            }
#pragma unroll
            for (int j = 0; j < CO; ++j) {
                gv[j] = load_as(Gt[qq * P + tx + TX * j]);
                qv[j] = load_as(Qt[qq * P + tx + TX * j]);
            }
#pragma unroll
            for (int i = 0; i < RK; ++i)
#pragma unroll
                for (int j = 0; j < CO; ++j) {
                    dva[i][j] += pv[i] * gv[j];
                    dka[i][j] += sv[i] * qv[j];
                }
        }
        // this tile's dq = scale dS k (rows ty + TY a, columns tx + TX j), added into dq_acc
        acc_real dqa[RQ][CO];
#pragma unroll
        for (int a = 0; a < RQ; ++a)
#pragma unroll
            for (int j = 0; j < CO; ++j) dqa[a][j] = 0;
#pragma unroll 2
        for (int kk = 0; kk < BK; ++kk) {
            acc_real sv[RQ], kv[CO];
#pragma unroll
            for (int a = 0; a < RQ; ++a) sv[a] = load_as(Ss[kk * PP + ty + TY * a]);
#pragma unroll
            for (int j = 0; j < CO; ++j) kv[j] = load_as(Ks[kk * P + tx + TX * j]);
#pragma unroll
            for (int a = 0; a < RQ; ++a)
#pragma unroll
                for (int j = 0; j < CO; ++j) dqa[a][j] += sv[a] * kv[j];
        }
#pragma unroll
        for (int a = 0; a < RQ; ++a) {
            const int qi = q0 + ty + TY * a;
            if (qi < Tq) att_add_row(dq_acc + (long long)qi * D, dqa[a], scale, D, tx);
        }
    }
    __pipeline_wait_prior(0);  // a block whose keys no query tile sees (u0 >= nu) still has K and V in flight
#pragma unroll
    for (int i = 0; i < RK; ++i) {
        const int r = ty + TY * i;
        if (r < Tk - k0)
#pragma unroll
            for (int j = 0; j < CO; ++j)
                if (tx + TX * j < D) {
                    dk[r * D + tx + TX * j] = convert<real>(dka[i][j] * scale);
                    dv[r * D + tx + TX * j] = convert<real>(ATT_DROPOUT ? dva[i][j] * drop_scale : dva[i][j]);
                }
    }
#endif
}
