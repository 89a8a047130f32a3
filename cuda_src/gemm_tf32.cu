// gemm_tf32.cu: GEMM v2 on the TF32 tensor cores, C = alpha * op(A) @ op(B) + beta * C on row-major float
// matrices, with the signature, variant names (<ta><tb>_<copy>), bounds handling and cp.async pipeline of
// gemm_v2.cu (gemm_pipeline.cuh); the tensor cores through mma.cuh (mma.sync, ldmatrix; wgmma).
//
// gemm_tf32_large: TF32 tensor cores through mma.sync m16n8k8 (mma.cuh), float accumulation, float only,
//   sm_80+ (elsewhere an empty body; the launcher refuses it). Block 128x256, 256 threads (2 x 4 warps of
//   64 x 64: 4 x 8 mma tiles of 16 x 8, 128 accumulators a thread), K in steps of 16, 3 stages of
//   unpadded, swizzled tiles in 72 KB of dynamic shared memory (Tf32Tile: conflict-free for every load
//   below). Per K step a warp does 64 mma.sync fed by shared loads with no register moves: a K-contiguous
//   operand through ldmatrix (one x4 per 16 x 8 tile of A or per 8 columns of B and both k-steps), a k-major
//   one through 8-byte loads of two adjacent rows (as mma's A) or 4-byte loads (as mma's B); which GEMM
//   operand plays mma's A is chosen per variant (nn: B, so that each layout feeds the side it suits; the
//   accumulators then hold C transposed). The tensor cores read the top 19 bits of each float (TF32 by
//   truncation toward zero: a cvt.rna rounding would cost one instruction per fragment register, 64 per 64
//   mma). Epilogue from registers: float2 stores (two adjacent columns of a lane) in interior tiles when C
//   and ldc allow 8-byte alignment, checked scalar stores elsewhere; beta == 0 never reads C.
// gemm_tf32_wgmma: the same product through Hopper's warpgroup MMA (sm_90a; nn, nt, tt only): gemm_wgmma.cuh's
//   body (its header states the thread mapping): 2 warpgroups, one wgmma m64n256k8 each per 8 of K with A
//   from registers and B from the stages through a descriptor, 5 stages in 121 KB.
#include "common.cuh"
#include "gemm_common.cuh"
#include "gemm_pipeline.cuh"
#include "gemm_wgmma.cuh"
#include "mma.cuh"

// ---------------------------------------------------------------------------------------------------
// gemm_tf32_large: TF32 tensor cores through mma.sync (mma.cuh; float only, sm_80+ on the cuda backend)
// ---------------------------------------------------------------------------------------------------
#define TF32_BM 128
#define TF32_BN 256
#define TF32_STAGES 3
typedef V2Config<TF32_BM, TF32_BN, 2, 4, 2, 4, TF32_STAGES> V2Tf32;  // 2 x 4 warps of 64 x 64

// A TF32 stage tile, unpadded, swizzled so that every fragment load below is free of bank conflicts while
// 16-byte chunks stay whole (16-byte cp.async still copies them): K-contiguous tiles (s[o][k], 4 chunks a
// row) XOR row o's chunk index with o / 2 % 4, so the 8 rows of one ldmatrix matrix (o .. o + 7, one
// chunk each) fall in 8 distinct 16-byte bank groups; k-major tiles (s[k][o]) XOR index o with 8 (k % 4),
// so the four lanes t of a group, reading rows k = t (+ 4, 8, 12), fall in distinct banks.
template <int OUTER, bool KMAJOR_>
struct Tf32Tile {
    static constexpr bool KMAJOR = KMAJOR_;
    static constexpr int ROWS = KMAJOR ? BK : OUTER, COLS = KMAJOR ? OUTER : BK;
    static constexpr int PITCH = COLS, ELEMS = ROWS * PITCH;
    static constexpr int PERIOD = KMAJOR ? 4 : 8;  // offset(r + PERIOD, c) = offset(r, c) + PERIOD * PITCH
    static __device__ __forceinline__ int offset(int r, int c) {
        return r * PITCH + (KMAJOR ? c ^ (r & 3) << 3 : c ^ (r & 6) << 1);
    }
};

// An mma's A operand P (16 x 8 tiles) and B operand Q (8 x 8) each come from one of the GEMM's operands. A
// warp owns 64 indices of each: FP = 4 tiles of P, FQ = 8 of Q; mma k-step ks covers k = 8ks .. 8ks + 7 of
// the stage. P's index of lane group g's row g + 8h in tile ip: 16 ip + 8h + g from a K-contiguous tile
// (ldmatrix, as mma.cuh lays out), 16 ip + 2g + h from a k-major one (rows g and g + 8 of one k are
// adjacent: one 8-byte load). Q's index of column g in tile jq: 8 jq + g.
template <class Tile>
__device__ __forceinline__ int tf32_p_index(int ip, int h, int g) {
    return Tile::KMAJOR ? 16 * ip + 2 * g + h : 16 * ip + 8 * h + g;
}

// p[ip][ks] = mma's A registers of P tile ip, k-step ks (o0: the warp's first index in the stage tile s).
// K-contiguous: one ldmatrix_x4 each, lane 8j + i naming row i of matrix j = (rows + 8 (j % 2), chunk
// 2ks + j / 2). K-major: two 8-byte loads at k = 8ks + t and + 4; in a half warp g gives the word pair's
// bits 0-1 and t ^ ip its bits 2-3: 16 lanes, 16 bank pairs.
template <class Tile, int FP>
__device__ __forceinline__ void tf32_load_p(unsigned (&p)[FP][2][4], const float* s, int o0, int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int ip = 0; ip < FP; ++ip)
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            if constexpr (Tile::KMAJOR) {  // offset(r + 4, o + 32) = offset(r, o) + 4 PITCH + 32
                const float* row = s + Tile::offset(t, o0 + tf32_p_index<Tile>(ip % 2, 0, g)) + 32 * (ip / 2) +
                                   8 * ks * Tile::PITCH;
                const float2 x = *reinterpret_cast<const float2*>(row);
                const float2 y = *reinterpret_cast<const float2*>(row + 4 * Tile::PITCH);
                p[ip][ks][0] = __float_as_uint(x.x); p[ip][ks][1] = __float_as_uint(x.y);
                p[ip][ks][2] = __float_as_uint(y.x); p[ip][ks][3] = __float_as_uint(y.y);
            } else {
                const int j = lane / 8;
                ldmatrix_x4(p[ip][ks], s + Tile::offset(o0 + 16 * ip + 8 * (j % 2) + lane % 8, 8 * ks + 4 * (j / 2)));
            }
        }
}

// q[jq][ks] = mma's B registers of Q tile jq, k-step ks. K-contiguous: one ldmatrix_x4 for both k-steps
// (matrix j = chunk j of the 8 columns). K-major: 4-byte loads at k = 8ks + t and + 4; g gives the bank's
// bits 0-2 and t ^ jq its bits 3-4: 32 lanes, 32 banks.
template <class Tile, int FQ>
__device__ __forceinline__ void tf32_load_q(unsigned (&q)[FQ][2][2], const float* s, int o0, int lane) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int jq = 0; jq < FQ; ++jq) {
        if constexpr (Tile::KMAJOR) {
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                const float* row = s + Tile::offset(t, o0 + 8 * (jq % 4) + g) + 32 * (jq / 4) + 8 * ks * Tile::PITCH;
                q[jq][ks][0] = __float_as_uint(row[0]);
                q[jq][ks][1] = __float_as_uint(row[4 * Tile::PITCH]);
            }
        } else {
            unsigned r[4];
            ldmatrix_x4(r, s + Tile::offset(o0 + 8 * jq + lane % 8, 4 * (lane / 8)));
            q[jq][0][0] = r[0]; q[jq][0][1] = r[1];
            q[jq][1][0] = r[2]; q[jq][1][1] = r[3];
        }
    }
}

// The epilogue of both TF32 kernels, from registers: tile(ip, jq)[e] (a pointer to mma.m16n8k8's D
// registers of P tile ip and Q tile jq) is D at P index p0 + tf32_p_index(ip, e / 2, g) and Q index
// q0 + 8 jq + 2t + e % 2 (lane 4g + t), and D is C, or C^T when SWAP. A lane's two D elements e, e + 1
// (not swapped) or e, e + 2 (swapped: P k-major) sit side by side in a row of C: interior tiles store
// them as one float2 where C and ldc allow it; edge tiles and unaligned C store checked scalars.
// beta == 0 never reads C. (g and t come from the kernel's start: computed after a wgmma main loop,
// ptxas serializes its wgmma, C7515.)
template <class TileP, bool SWAP, int FP, int FQ, class Tile>
__device__ __forceinline__ void tf32_store_d(Tile tile, float* __restrict__ C, int ldc, float alpha, float beta,
                                             int p0, int q0, int g, int t, bool edge, int m_left, int n_left) {
    if (!edge && reinterpret_cast<size_t>(C) % 8 == 0 && ldc % 2 == 0) {
#pragma unroll
        for (int i = 0; i < FP; ++i)
#pragma unroll
            for (int j = 0; j < FQ; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int pi = p0 + tf32_p_index<TileP>(i, SWAP ? 0 : h, g), qi = q0 + 8 * j + 2 * t + (SWAP ? h : 0);
                    const long long idx = SWAP ? (long long)qi * ldc + pi : (long long)pi * ldc + qi;  // 256-row tiles
                    store_c_vec<float2>(C, idx, alpha, tile(i, j) + (SWAP ? h : 2 * h), SWAP ? 2 : 1, beta);
                }
        return;
    }
#pragma unroll
    for (int i = 0; i < FP; ++i)
#pragma unroll
        for (int j = 0; j < FQ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int pi = p0 + tf32_p_index<TileP>(i, e / 2, g), qi = q0 + 8 * j + 2 * t + e % 2;
                const int r = SWAP ? qi : pi, c = SWAP ? pi : qi;
                if (r < m_left && c < n_left) store_c(C, (long long)r * ldc + c, alpha, tile(i, j)[e], beta);
            }
}

// Block 128 x 256, 8 warps (2 x 4) of 64 x 64; P = A and Q = B, except when A is K-contiguous and B k-major
// (nn), where P = B and Q = A (the accumulators then hold C transposed). acc[ip][jq][e] is D of P tile ip
// and Q tile jq at P index tf32_p_index(ip, e / 2, g), Q index 8 jq + 2t + e % 2.
// (T is real: a template parameter, so that the float-only body is discarded, not compiled, for double.)
template <bool TA, bool TB, bool VEC, class T>
__device__ __forceinline__ void gemm_tf32_body(int M, int N, int K, T alpha, const T* __restrict__ A, int lda,
                                               const T* __restrict__ B, int ldb, T beta, T* __restrict__ C, int ldc,
                                               long long stride_a, long long stride_b, long long stride_c) {
#if defined(GPUBLAS_HAS_MMA_TF32)
    if constexpr (sizeof(T) == 4) {
        typedef V2Tf32 Cfg;
        typedef Tf32Tile<Cfg::BM, TA> TileA;   // s[k][m] (A stored K x M) or s[m][k]
        typedef Tf32Tile<Cfg::BN, !TB> TileB;  // s[k][n] (B stored K x N) or s[n][k]
        constexpr bool SWAP = !TA && !TB;
        typedef typename V2Pick<SWAP, TileA, TileB>::type TileP;
        typedef typename V2Pick<SWAP, TileB, TileA>::type TileQ;
        static_assert(Cfg::WTM == 64 && Cfg::WTN == 64, "P and Q take either side of a square warp tile");
        constexpr int FP = 4, FQ = 8;
        extern __shared__ __align__(16) float v2_tf32_smem[];  // STAGES x (A tile, then B tile)
        auto As = reinterpret_cast<float (*)[TileA::ELEMS]>(v2_tf32_smem);
        auto Bs = reinterpret_cast<float (*)[TileB::ELEMS]>(v2_tf32_smem + Cfg::STAGES * TileA::ELEMS);
        const V2Block<Cfg, TA, TB> blk(M, N, A, lda, B, ldb, C, ldc, stride_a, stride_b, stride_c);
        const int m_left = blk.m_left, n_left = blk.n_left;
        const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
        const int p0 = SWAP ? blk.wn : blk.wm, q0 = SWAP ? blk.wm : blk.wn;

        float acc[FP][FQ][4];
#pragma unroll
        for (int i = 0; i < FP; ++i)
#pragma unroll
            for (int j = 0; j < FQ; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

        v2_mainloop<Cfg, TileA, TileB, BK, VEC>(
            M, N, K, A, lda, B, ldb, m_left, n_left, As, Bs, [&](const float* sa, const float* sb) {
                unsigned p[FP][2][4], q[FQ][2][2];
                tf32_load_p<TileP, FP>(p, SWAP ? sb : sa, p0, lane);
                tf32_load_q<TileQ, FQ>(q, SWAP ? sa : sb, q0, lane);
#pragma unroll
                for (int ks = 0; ks < 2; ++ks)
#pragma unroll
                    for (int i = 0; i < FP; ++i)
#pragma unroll
                        for (int j = 0; j < FQ; ++j) mma_tf32_m16n8k8(acc[i][j], p[i][ks], q[j][ks]);
            });

        tf32_store_d<TileP, SWAP, FP, FQ>([&](int i, int j) { return acc[i][j]; }, C, ldc, alpha, beta, p0, q0, g,
                                          t, blk.edge(), m_left, n_left);
    }
#endif
}

// One block per SM (up to 255 registers a thread: 128 accumulators and 64 fragment registers).
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_nn_vec(GEMM_V2_PARAMS) { gemm_tf32_body<false, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_nt_vec(GEMM_V2_PARAMS) { gemm_tf32_body<false, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_tn_vec(GEMM_V2_PARAMS) { gemm_tf32_body<true, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_tt_vec(GEMM_V2_PARAMS) { gemm_tf32_body<true, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_nn_elem(GEMM_V2_PARAMS) { gemm_tf32_body<false, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_nt_elem(GEMM_V2_PARAMS) { gemm_tf32_body<false, true, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_tn_elem(GEMM_V2_PARAMS) { gemm_tf32_body<true, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_tt_elem(GEMM_V2_PARAMS) { gemm_tf32_body<true, true, false>(GEMM_V2_ARGS); }

// ---------------------------------------------------------------------------------------------------
// gemm_tf32_wgmma: TF32 tensor cores through Hopper's wgmma (gemm_wgmma.cuh's body; float only, sm_90a on
// the cuda backend, elsewhere an empty body the launcher refuses)
// ---------------------------------------------------------------------------------------------------
// gemm_wgmma.cuh states the thread mapping. TF32 wgmma reads B' K-major only, so tn (no K-contiguous
// operand) is not built: the launcher refuses it ('tf32' takes it). A' through tf32_load_p (2 ldmatrix or 4
// LDS.64 a K step of 16), WGMMA_STAGES stages of Tf32Tiles in 121 KB, the epilogue tf32_store_d's.
#define WGMMA_STAGES 5

// gemm_wgmma.cuh's pieces for TF32 (float C; the planner scales C itself when K is 0).
struct Tf32Wgmma {
    static constexpr bool K_ZERO = false;
    template <class Tile>
    static __device__ __forceinline__ void load_a(unsigned (&a)[2][4], const float* s, int o, int lane) {
        tf32_load_p<Tile, 1>(reinterpret_cast<unsigned (&)[1][2][4]>(a), s, o, lane);
    }
    template <bool TRANS_B>
    static __device__ __forceinline__ void mma(float (&d)[128], const unsigned (&a)[4], unsigned long long desc) {
        static_assert(!TRANS_B, "TF32 wgmma reads B K-major only");
        wgmma_m64n256k8_tf32_rs(d, a, desc);
    }
    template <class TileP, bool SWAP, class Tile>
    static __device__ __forceinline__ void store(Tile tile, float* __restrict__ C, int ldc, float alpha, float beta,
                                                 int p0, int g, int t, bool edge, int m_left, int n_left) {
        tf32_store_d<TileP, SWAP, 1, 32>(tile, C, ldc, alpha, beta, p0, 0, g, t, edge, m_left, n_left);
    }
};

template <bool TA, bool TB, bool VEC, class T>
__device__ __forceinline__ void gemm_wgmma_body(int M, int N, int K, T alpha, const T* __restrict__ A, int lda,
                                                const T* __restrict__ B, int ldb, T beta, T* __restrict__ C, int ldc,
                                                long long stride_a, long long stride_b, long long stride_c) {
#if defined(GPUBLAS_HAS_WGMMA)
    if constexpr (sizeof(T) == 4 && !(TA && !TB)) {
        extern __shared__ __align__(16) unsigned char v2_wgmma_smem[];
        typedef WgmmaConfig<TA, TB, WGMMA_STAGES> Cfg;
        wgmma_gemm<Cfg, Tf32Tile<Cfg::BM, TA>, Tf32Tile<Cfg::BN, !TB>, TA, TB, VEC, Tf32Wgmma>(
            v2_wgmma_smem, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stride_a, stride_b, stride_c);
    }
#endif
}

// One block per SM (128 accumulators a thread; 121 KB of shared memory). No tn: see above.
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_wgmma_nn_vec(GEMM_V2_PARAMS) { gemm_wgmma_body<false, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_wgmma_nt_vec(GEMM_V2_PARAMS) { gemm_wgmma_body<false, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_wgmma_tt_vec(GEMM_V2_PARAMS) { gemm_wgmma_body<true, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_wgmma_nn_elem(GEMM_V2_PARAMS) { gemm_wgmma_body<false, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_wgmma_nt_elem(GEMM_V2_PARAMS) { gemm_wgmma_body<false, true, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_wgmma_tt_elem(GEMM_V2_PARAMS) { gemm_wgmma_body<true, true, false>(GEMM_V2_ARGS); }
