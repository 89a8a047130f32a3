// gemm_sim.cuh: gemm_direct's form on the simulator (gemm.cu includes it under __CUDA_ARCH_SIM__ unless
// GPU_DIRECT_FORM asks for the GPU's form): one simulated thread computes a DIRECT_SIM_TM x DIRECT_SIM_TN tile of C
// (48 x 64 floats, 48 x 32 doubles) with a register-blocked micro-kernel, the structure of a CPU BLAS (GotoBLAS,
// BLIS) inside one thread.
//
// The micro-kernel (micro) keeps an MR x 1-vector tile of C in registers: MR = 6 rows of one 64-byte vector (16
// floats, 8 doubles; two ymm registers each on AVX2: 12 accumulators, two for op(B)'s row and one for the broadcast
// op(A) element, of AVX2's 16), and walks k innermost: per k it loads op(B)'s row k (the tile's 64 bytes) and
// broadcasts op(A)[r, k] to each row r for one vector multiply and one add (-ffp-contract=off: no fused
// multiply-add, the CPU issues two of each a cycle). Each C element is summed in the order k = 0..K-1 from 0 as
// gemm_naive sums it, so results are gemm_naive's bit for bit.
// Operands are read where they lie when the micro-kernel can take them so (a plain float or double op(A) by its
// strides whatever the transposes; op(B)'s rows when B is not transposed and the tile's 64 bytes lie inside C's
// width); else they are packed into this OS thread's buffers (static thread_local: gemm_direct has no barrier, so a
// simulated thread runs start to end without another one of its block in between): op(B) transposed (its columns'
// runs turned into rows, load_runs_transposed), a micro-tile narrower than 64 bytes at C's right edge (zero
// padded), or shorter than MR rows at its bottom edge, and 16-bit inputs (converted to float once per KC values
// of k). K is walked in KC = 256 steps (a packed op(B) sliver of 16 KB stays in L1); the thread's partial sums
// wait between them in its tile buffer, whose epilogue applies alpha and beta (beta == 0 reads no C).
// Needs common.cuh, and gemm.cu's DIRECT_SIM_* sizes.
#pragma once

namespace gemm_sim {

constexpr int MR = DIRECT_SIM_MR;                 // micro-tile rows
constexpr int KC = DIRECT_SIM_KC;                 // values of k a step
constexpr int TM = DIRECT_SIM_TM;                 // a thread's rows
constexpr int VB = DIRECT_SIM_ROW_BYTES;          // a micro-tile row's bytes
// The CPU's vector: GCC keeps an array of wider vector_size types in memory, not registers (a 64-byte row as one
// vector on AVX2 spilled every accumulator), so a row is VB / NB of these.
#if defined(__AVX512F__)
constexpr int NB = 64;
#else
constexpr int NB = 32;
#endif
static_assert(TM % MR == 0, "whole micro-tiles");

template <class Acc> struct Sizes {
    static constexpr int NR = VB / sizeof(Acc);   // micro-tile columns: 16 floats, 8 doubles
    static constexpr int TN = NR * DIRECT_SIM_TN_VECTORS;  // a thread's columns
};

// c[0..MR)[0..NR) (rows ldc apart) = (first ? 0 : c) + sum over k < kc of op(A)[r, k] * op(B)[k, :], each element
// in k order, one rounding per multiply and per add. op(A)[r, k] = a[k * a_step + r] (A_COLS: the tile's rows
// are consecutive, as in a transposed A or a packed sliver) or a[r * a_step + k]; op(B)'s row k is b + k * bk.
template <bool A_COLS, class Acc>
static inline __attribute__((always_inline)) void micro(int kc, const Acc* __restrict__ a, long long a_step,
                                                        const Acc* __restrict__ b, long long bk,
                                                        Acc* __restrict__ c, int ldc, bool first) {
    typedef Acc vec __attribute__((vector_size(NB)));
    constexpr int NV = VB / NB, W = NB / sizeof(Acc);  // a row's native vectors, their elements
    vec acc[MR][NV];
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) {
            if (first) acc[r][v] = vec{};
            else memcpy(&acc[r][v], c + r * ldc + v * W, NB);
        }
    for (int k = 0; k < kc; ++k) {
        vec bv[NV];
        for (int v = 0; v < NV; ++v) memcpy(&bv[v], b + k * bk + v * W, NB);
        for (int r = 0; r < MR; ++r) {
            const Acc x = A_COLS ? a[k * a_step + r] : a[r * a_step + k];
            for (int v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) memcpy(c + r * ldc + v * W, &acc[r][v], NB);
}

// The slivers of op(A) from row r0 (a multiple of MR) to `rows`, k0 .. k0 + kc: out + (r / MR) * KC * MR holds row
// r's sliver as [kk][MR], zero past `rows` (those rows are not stored).
template <bool TA, class T, class Acc>
static void pack_a(const T* __restrict__ A, int lda, int r0, int rows, int k0, int kc, Acc* __restrict__ out) {
    const int padded = (rows + MR - 1) / MR * MR;
    if constexpr (TA) {  // op(A)'s column k is a run along the rows: each read once, k outermost
        Acc run[TM];
        for (int kk = 0; kk < kc; ++kk) {
            load_run_as(A + (long long)(k0 + kk) * lda + r0, run, rows - r0);
            for (int r = rows; r < padded; ++r) run[r - r0] = 0;
            for (int r = r0; r < padded; ++r) out[(r / MR) * KC * MR + kk * MR + r % MR] = run[r - r0];
        }
    } else {  // op(A)'s row r is a run along k: converted as a run, then spread
        Acc run[KC];
        for (int r = r0; r < padded; ++r) {
            Acc* o = out + (r / MR) * KC * MR + r % MR;
            if (r < rows) {
                load_run_as(A + (long long)r * lda + k0, run, kc);
                for (int kk = 0; kk < kc; ++kk) o[kk * MR] = run[kk];
            } else {
                for (int kk = 0; kk < kc; ++kk) o[kk * MR] = 0;
            }
        }
    }
}

// out[kk][0..NR) = op(B)[k0 + kk, c0 + 0..NR) for kk < kc; columns at or past N zero (TB: N - 1's, not stored).
template <bool TB, class T, class Acc>
static void pack_b(const T* __restrict__ B, int ldb, int c0, int N, int k0, int kc,
                   Acc (*__restrict__ out)[Sizes<Acc>::NR]) {
    constexpr int NR = Sizes<Acc>::NR;
    if constexpr (TB) {  // op(B)'s columns are runs along k, read as the rows of their transpose
        long long at[NR];
        for (int j = 0; j < NR; ++j) at[j] = (long long)min(c0 + j, N - 1) * ldb;
        load_runs_transposed(B + k0, at, kc, out);
    } else {
        const int live = min(NR, N - c0);
        for (int kk = 0; kk < kc; ++kk) {
            const T* p = B + (long long)(k0 + kk) * ldb + c0;
            if (live == NR) {
                load_run_as(p, out[kk]);
            } else {
                for (int j = 0; j < NR; ++j) out[kk][j] = j < live ? load_as(p[j]) : (Acc)0;
            }
        }
    }
}

// The thread's tile of C: rows row0 .. row0 + TM, columns col0 .. col0 + TN, as far as C reaches; A, B, C already
// at this batch's matrices. C[r, c] = alpha * sum_k op(A)[r, k] op(B)[k, c] (+ beta * C[r, c] unless beta == 0),
// rounded once into O.
template <bool TA, bool TB, class T, class Acc, class O>
static void tile(int M, int N, int K, Acc alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
                 Acc beta, O* __restrict__ C, int ldc, int row0, int col0) {
    constexpr int NR = Sizes<Acc>::NR, TN = Sizes<Acc>::TN;
    constexpr bool widen = sizeof(T) != sizeof(Acc);  // 16-bit inputs: packed as floats
    alignas(64) static thread_local Acc cbuf[TM * TN];  // the tile's sums, rows TN apart
    alignas(64) static thread_local Acc ap[TM * KC];    // packed op(A) slivers: ap + i * KC * MR is sliver i's [kk][MR]
    alignas(64) static thread_local Acc bp[KC][NR];     // a packed op(B) sliver
    const int rows = min(TM, M - row0), cols = min(TN, N - col0);
    const int mt = (rows + MR - 1) / MR, nt = (cols + NR - 1) / NR;
    A += TA ? row0 : (long long)row0 * lda;  // the tile's first row of op(A), column 0
    if (K == 0)  // the 16-bit launch that scales C alone (blas3: alpha == 0 or K == 0)
        for (int i = 0; i < mt * MR * TN; ++i) cbuf[i] = 0;
    for (int k0 = 0; k0 < K; k0 += KC) {
        const int kc = min(KC, K - k0);
        const bool first = k0 == 0;
        // op(A): slivers packed when 16-bit (all) or shorter than MR (the last), else read in place (packing a
        // transposed A too cost more than it saved: float 256^3 tn 0.59 -> 0.89 ms)
        const int packed_from = widen ? 0 : rows / MR;
        if (packed_from < mt) pack_a<TA>(A, lda, packed_from * MR, rows, k0, kc, ap);
        const T* a_k0 = A + (TA ? (long long)k0 * lda : k0);
        for (int j = 0; j < nt; ++j) {
            const int c0 = col0 + j * NR;
            const Acc* b;
            long long bk;
            if constexpr (!TB && !widen) {
                if (c0 + NR <= N) {  // op(B)'s rows in place
                    b = reinterpret_cast<const Acc*>(B) + (long long)k0 * ldb + c0;
                    bk = ldb;
                } else {
                    pack_b<TB>(B, ldb, c0, N, k0, kc, bp);
                    b = bp[0], bk = NR;
                }
            } else {
                pack_b<TB>(B, ldb, c0, N, k0, kc, bp);
                b = bp[0], bk = NR;
            }
            Acc* c = cbuf + j * NR;
            for (int i = 0; i < mt; ++i, c += MR * TN) {
                if (i >= packed_from)
                    micro<true>(kc, ap + i * KC * MR, MR, b, bk, c, TN, first);
                else if constexpr (!widen)
                    micro<TA>(kc, reinterpret_cast<const Acc*>(a_k0) + (long long)i * MR * (TA ? 1 : lda), lda, b, bk,
                              c, TN, first);
            }
        }
    }
    // The epilogue: C's rows as runs, each value rounded as store_c rounds it.
    for (int r = 0; r < rows; ++r) {
        O* __restrict__ c = C + (long long)(row0 + r) * ldc + col0;
        const Acc* s = cbuf + r * TN;
        if (beta == (Acc)0)
            for (int j = 0; j < cols; ++j) c[j] = convert<O>(alpha * s[j]);
        else
            for (int j = 0; j < cols; ++j) c[j] = convert<O>(alpha * s[j] + beta * load_as(c[j]));
    }
}

}  // namespace gemm_sim
