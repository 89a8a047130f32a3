// gemm_half.cu: GEMM on the 16-bit tensor cores, C = alpha * op(A) @ op(B) + beta * C with A and B float16 or
// bfloat16 (`real`: __half or __nv_bfloat16), products accumulated in float, and C of `out_real` (the input
// type, the default, or float: cuBLAS's GemmEx with CUBLAS_COMPUTE_32F). alpha and beta are floats; each C
// element is alpha * acc + beta * C computed in float and rounded once (to nearest even) into out_real;
// beta == 0 never reads C. Row-major matrices with leading dimensions and batch strides, the signature,
// variant names (<ta><tb>_<copy>), bounds handling and cp.async pipeline of gemm_v2.cu (gemm_pipeline.cuh:
// 16-byte copies, or for unaligned views one 16-bit load and shared store per element); the tensor cores
// through mma.cuh. Built for float or double the bodies are empty (the planner never launches them so).
//
// gemm_half_mma: mma.sync m16n8k16 (sm_80+; elsewhere an empty body the planner refuses). Block 128 x 256,
//   256 threads = 2 x 4 warps of 64 x 64 (4 x 8 mma tiles of 16 x 8, 128 float accumulators a thread), K in
//   steps of 32 through HALF_STAGES cp.async stages of HalfTiles in dynamic shared memory. Per K step a warp
//   loads all its fragments with ldmatrix (8 x4 for A: one per 16 x 16 tile and k-step; 8 x4 for B: one per
//   8 columns and both k-steps), .trans for an operand stored k-major, so every orientation feeds both
//   operands straight from shared memory; then 64 mma.sync. Epilogue from registers: two adjacent columns of
//   a lane as one store (a float2, or two 16-bit values) in interior tiles when C and ldc allow it, checked
//   scalar stores elsewhere.
// gemm_half_wgmma: Hopper's warpgroup MMA (sm_90a; every orientation): gemm_wgmma.cuh's body, whose header
//   states the thread mapping: 2 warpgroups, one wgmma m64n256k16 each per 16 of K with A' from registers
//   (ldmatrix, either layout) and B' (256 rows of N', K-contiguous with the 64-byte swizzle, or for tn
//   MN-major with the 128-byte swizzle, imm-trans-b 1) from the stages through a descriptor,
//   HALF_WGMMA_STAGES stages; nn computes D = C^T (A' = B^T, B' = A).
// gemm_half_splitk_reduce: grid-stride over M x N: C = alpha * (W[0] + W[1] + ... + W[S-1]) + beta * C in float,
//   summed in slice order (no atomics: the bits depend on the shape alone), rounded once into out_real (beta == 0
//   reads no C). W holds the S float partial products of a split-K product, each from gemm_half_mma or
//   gemm_half_wgmma built with out_real = float over one K slice (the launcher runs the slices as a batch).
#include <type_traits>  // std::is_same

#include "common.cuh"
#include "gemm_pipeline.cuh"
#include "gemm_wgmma.cuh"
#include "mma.cuh"

#ifndef out_real
#define out_real real
#endif

#define HALF_BM 128
#define HALF_BN 256
#define HALF_STAGES 4
#define HALF_WGMMA_STAGES 5

#define GEMM_HALF_PARAMS int M, int N, int K, float alpha, const real* __restrict__ A, int lda, const real* __restrict__ B, int ldb, float beta, out_real* __restrict__ C, int ldc, long long stride_a, long long stride_b, long long stride_c
#define GEMM_HALF_ARGS M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stride_a, stride_b, stride_c

// A stage tile of 16-bit values (BK = 32 of K: 64 bytes a row when K-contiguous), unpadded, swizzled by whole
// 16-byte chunks (8 values) so that every ldmatrix below is free of bank conflicts: K-contiguous tiles
// (s[o][k], 4 chunks a row) XOR row o's chunk index with o / 2 % 4 (the 8 rows of one matrix fall in 8
// distinct 16-byte bank groups; it is also the 64-byte swizzle wgmma reads, as gemm_tf32.cu's Tf32Tile);
// k-major tiles (s[k][o], rows of 256 or 512 bytes) XOR the chunk index with k % 8 (the 8 K rows of one
// transposed matrix, same chunk, fall in 8 distinct bank groups).
template <int OUTER, bool KMAJOR_>
struct HalfTile {
    static constexpr bool KMAJOR = KMAJOR_;
    static constexpr int ROWS = KMAJOR ? BK : OUTER, COLS = KMAJOR ? OUTER : BK;
    static constexpr int PITCH = COLS, ELEMS = ROWS * PITCH, PERIOD = 8;
    static __device__ __forceinline__ int offset(int r, int c) {
        return r * PITCH + (c ^ (KMAJOR ? (r & 7) << 3 : (r & 6) << 2));
    }
};

// a = mma.m16n8k16's A registers of the 16 x 16 tile at outer index o (its 16 rows o .. o + 15), k-step ks
// (k = 16 ks .. 16 ks + 15 of the stage): one ldmatrix_x4, lane 8j + i naming row i of matrix j = (rows
// o + 8 (j % 2) .., k 16 ks + 8 (j / 2) ..): as stored when K-contiguous, transposed when k-major.
template <class Tile>
__device__ __forceinline__ void half_load_a(unsigned (&a)[4], const real* s, int o, int ks, int lane) {
    const int i = lane % 8, j = lane / 8;
    if constexpr (Tile::KMAJOR)
        ldmatrix_x4_trans(a, s + Tile::offset(16 * ks + 8 * (j / 2) + i, o + 8 * (j % 2)));
    else
        ldmatrix_x4(a, s + Tile::offset(o + 8 * (j % 2) + i, 16 * ks + 8 * (j / 2)));
}

// b[ks] = mma.m16n8k16's B registers of the 8 columns o .. o + 7 for both k-steps: one ldmatrix_x4 whose
// matrix j holds k = 8j .. 8j + 7.
template <class Tile>
__device__ __forceinline__ void half_load_b(unsigned (&b)[2][2], const real* s, int o, int lane) {
    const int i = lane % 8, j = lane / 8;
    unsigned r[4];
    if constexpr (Tile::KMAJOR)
        ldmatrix_x4_trans(r, s + Tile::offset(8 * j + i, o));
    else
        ldmatrix_x4(r, s + Tile::offset(o + i, 8 * j));
    b[0][0] = r[0]; b[0][1] = r[1];
    b[1][0] = r[2]; b[1][1] = r[3];
}

// Two adjacent elements of C, stored (and loaded, when beta != 0) as one 2-element vector.
template <class O> struct alignas(2 * sizeof(O)) HalfPair { O v[2]; };

// C[idx + w] = alpha d[w] + beta C[idx + w] for w = 0, 1, in float, rounded once into O; beta == 0 reads no C.
template <class O>
__device__ __forceinline__ void half_store_pair(O* __restrict__ C, long long idx, float alpha, const float* d,
                                                float beta) {
    HalfPair<O> out;
    if (beta == 0.0f) {
        out.v[0] = convert<O>(alpha * d[0]);
        out.v[1] = convert<O>(alpha * d[1]);
    } else {
        const HalfPair<O> old = *reinterpret_cast<const HalfPair<O>*>(C + idx);
        out.v[0] = convert<O>(alpha * d[0] + beta * load_as(old.v[0]));
        out.v[1] = convert<O>(alpha * d[1] + beta * load_as(old.v[1]));
    }
    *reinterpret_cast<HalfPair<O>*>(C + idx) = out;
}

template <class O>
__device__ __forceinline__ void half_store_one(O* __restrict__ C, long long idx, float alpha, float d, float beta) {
    C[idx] = convert<O>(beta == 0.0f ? alpha * d : alpha * d + beta * load_as(C[idx]));
}

// The epilogue of both kernels: tile(i, j) points at mma.m16n8's D registers of P tile i and Q tile j, D
// element e sitting at P index p0 + 16 i + 8 (e / 2) + g and Q index q0 + 8 j + 2t + e % 2 (lane 4g + t);
// D is C, or C^T when SWAP. Not swapped, a lane's elements e, e + 1 are adjacent in a row of C: interior
// tiles store them as one pair where C and ldc allow it. Edges, unaligned C and C^T: checked scalars.
template <bool SWAP, int FP, int FQ, class Tile, class O>
__device__ __forceinline__ void half_store_d(Tile tile, O* __restrict__ C, int ldc, float alpha, float beta, int p0,
                                             int q0, int g, int t, bool edge, int m_left, int n_left) {
    if (!SWAP && !edge && reinterpret_cast<size_t>(C) % (2 * sizeof(O)) == 0 && ldc % 2 == 0) {
#pragma unroll
        for (int i = 0; i < FP; ++i)
#pragma unroll
            for (int j = 0; j < FQ; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    half_store_pair(C, (long long)(p0 + 16 * i + 8 * h + g) * ldc + q0 + 8 * j + 2 * t, alpha,
                                    tile(i, j) + 2 * h, beta);
        return;
    }
#pragma unroll
    for (int i = 0; i < FP; ++i)
#pragma unroll
        for (int j = 0; j < FQ; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int pi = p0 + 16 * i + 8 * (e / 2) + g, qi = q0 + 8 * j + 2 * t + e % 2;
                const int r = SWAP ? qi : pi, c = SWAP ? pi : qi;
                if (r < m_left && c < n_left) half_store_one(C, (long long)r * ldc + c, alpha, tile(i, j)[e], beta);
            }
}

// ---------------------------------------------------------------------------------------------------
// gemm_half_mma: mma.sync m16n8k16 (sm_80+)
// ---------------------------------------------------------------------------------------------------
// acc[i][j][e]: D = C of A tile i (rows wm + 16 i ..) and B tile j (columns wn + 8 j ..), mma.m16n8's layout.
template <bool TA, bool TB, bool VEC, class T, class O>
__device__ __forceinline__ void gemm_half_body(int M, int N, int K, float alpha, const T* __restrict__ A, int lda,
                                               const T* __restrict__ B, int ldb, float beta, O* __restrict__ C,
                                               int ldc, long long stride_a, long long stride_b, long long stride_c) {
#if defined(GPUBLAS_HAS_MMA_TF32)
    if constexpr (sizeof(T) == 2) {
        constexpr bool BF16 = std::is_same<T, __nv_bfloat16>::value;
        typedef V2Config<HALF_BM, HALF_BN, 2, 4, 2, 4, HALF_STAGES> Cfg;  // 2 x 4 warps of 64 x 64
        typedef HalfTile<Cfg::BM, TA> TileA;   // s[k][m] (A stored K x M) or s[m][k]
        typedef HalfTile<Cfg::BN, !TB> TileB;  // s[k][n] (B stored K x N) or s[n][k]
        constexpr int FP = 4, FQ = 8;
        extern __shared__ __align__(16) unsigned short v2_half_smem[];  // STAGES x (A tile, then B tile)
        auto As = reinterpret_cast<T (*)[TileA::ELEMS]>(v2_half_smem);
        auto Bs = reinterpret_cast<T (*)[TileB::ELEMS]>(v2_half_smem + Cfg::STAGES * TileA::ELEMS);
        const V2Block<Cfg, TA, TB> blk(M, N, A, lda, B, ldb, C, ldc, stride_a, stride_b, stride_c);
        const int m_left = blk.m_left, n_left = blk.n_left;
        const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

        float acc[FP][FQ][4];
#pragma unroll
        for (int i = 0; i < FP; ++i)
#pragma unroll
            for (int j = 0; j < FQ; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

        auto compute = [&](const T* sa, const T* sb) {
            unsigned a[FP][2][4], b[FQ][2][2];
#pragma unroll
            for (int i = 0; i < FP; ++i)
#pragma unroll
                for (int ks = 0; ks < 2; ++ks) half_load_a<TileA>(a[i][ks], sa, blk.wm + 16 * i, ks, lane);
#pragma unroll
            for (int j = 0; j < FQ; ++j) half_load_b<TileB>(b[j], sb, blk.wn + 8 * j, lane);
#pragma unroll
            for (int ks = 0; ks < 2; ++ks)
#pragma unroll
                for (int i = 0; i < FP; ++i)
#pragma unroll
                    for (int j = 0; j < FQ; ++j) mma_m16n8k16<BF16>(acc[i][j], a[i][ks], b[j][ks]);
        };
        if (K > 0)  // K = 0 (the planner's way to scale C when alpha or K is 0): no stage, no read of A or B
            v2_mainloop<Cfg, TileA, TileB, BK, VEC>(M, N, K, A, lda, B, ldb, m_left, n_left, As, Bs, compute);

        half_store_d<false, FP, FQ>([&](int i, int j) { return acc[i][j]; }, C, ldc, alpha, beta, blk.wm, blk.wn, g,
                                    t, blk.edge(), m_left, n_left);
    }
#endif
}

// One block per SM (up to 255 registers a thread: 128 accumulators and 64 fragment registers).
extern "C" __global__ void __launch_bounds__(256) gemm_half_mma_nn_vec(GEMM_HALF_PARAMS) { gemm_half_body<false, false, true>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_mma_nt_vec(GEMM_HALF_PARAMS) { gemm_half_body<false, true, true>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_mma_tn_vec(GEMM_HALF_PARAMS) { gemm_half_body<true, false, true>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_mma_tt_vec(GEMM_HALF_PARAMS) { gemm_half_body<true, true, true>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_mma_nn_elem(GEMM_HALF_PARAMS) { gemm_half_body<false, false, false>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_mma_nt_elem(GEMM_HALF_PARAMS) { gemm_half_body<false, true, false>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_mma_tn_elem(GEMM_HALF_PARAMS) { gemm_half_body<true, false, false>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_mma_tt_elem(GEMM_HALF_PARAMS) { gemm_half_body<true, true, false>(GEMM_HALF_ARGS); }

// ---------------------------------------------------------------------------------------------------
// gemm_half_wgmma: Hopper's warpgroup MMA (gemm_wgmma.cuh's body; sm_90a)
// ---------------------------------------------------------------------------------------------------
// gemm_wgmma.cuh states the thread mapping. 16-bit wgmma reads B' in either major order, so every
// orientation runs: nt, tt with B' = B K-contiguous, nn with B' = A K-contiguous (D = C^T), and tn with B'
// = B stored K x N in a HalfTileMN (wgmma's MN-major layout, imm-trans-b 1). A' through half_load_a (one
// ldmatrix, .trans when k-major, per k-step), HALF_WGMMA_STAGES stages, the epilogue half_store_d's.

// The k-major B' tile of tn (s[k][n]: BK = 32 K rows of OUTER N values) in the layout wgmma reads MN-major
// (mma.cuh's wgmma_desc_sw128_mn): 1024-byte atoms of 8 K rows x 64 N values, row k % 8 of an atom 128 bytes
// with its 16-byte chunks XORed with k % 8 (the 128-byte swizzle; as HalfTile's k-major XOR, so the 16-byte
// cp.async copies stay whole and 8 consecutive chunks of a row fill the 32 banks); the OUTER / 64 atoms of
// one 8-row K group side by side (LBO: 1024 bytes apart), K groups 8 OUTER values apart (SBO); k-step ks
// (K rows 16 ks ..: two groups) starts 2 SBO in.
template <int OUTER>
struct HalfTileMN {
    static constexpr bool KMAJOR = true;
    static constexpr int ROWS = BK, COLS = OUTER, PITCH = COLS, ELEMS = ROWS * PITCH, PERIOD = 8;
    static constexpr unsigned LBO = 64 * 8 * 2, SBO = 8 * OUTER * 2;  // bytes
    static_assert(OUTER % 64 == 0, "whole atoms along N");
    static __device__ __forceinline__ int offset(int r, int c) {
        return (r >> 3) * (8 * PITCH) + (c >> 6) * 512 + (r & 7) * 64 + ((c & 63) ^ (r & 7) << 3);
    }
    static __device__ __forceinline__ unsigned long long wgmma_desc(unsigned addr, int ks) {
        return wgmma_desc_sw128_mn(addr + 2 * SBO * ks, LBO, SBO);
    }
};

// gemm_wgmma.cuh's pieces for 16-bit inputs (C of O; the planner launches K = 0 to scale C).
template <bool BF16>
struct HalfWgmma {
    static constexpr bool K_ZERO = true;
    template <class Tile>
    static __device__ __forceinline__ void load_a(unsigned (&a)[2][4], const real* s, int o, int lane) {
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) half_load_a<Tile>(a[ks], s, o, ks, lane);
    }
    template <bool TRANS_B>
    static __device__ __forceinline__ void mma(float (&d)[128], const unsigned (&a)[4], unsigned long long desc) {
        wgmma_m64n256k16_rs<BF16, TRANS_B>(d, a, desc);
    }
    template <class TileP, bool SWAP, class Tile, class O>
    static __device__ __forceinline__ void store(Tile tile, O* __restrict__ C, int ldc, float alpha, float beta, int p0,
                                                 int g, int t, bool edge, int m_left, int n_left) {
        half_store_d<SWAP, 1, 32>(tile, C, ldc, alpha, beta, p0, 0, g, t, edge, m_left, n_left);
    }
};

template <bool TA, bool TB, bool VEC, class T, class O>
__device__ __forceinline__ void gemm_half_wgmma_body(int M, int N, int K, float alpha, const T* __restrict__ A,
                                                     int lda, const T* __restrict__ B, int ldb, float beta,
                                                     O* __restrict__ C, int ldc, long long stride_a,
                                                     long long stride_b, long long stride_c) {
#if defined(GPUBLAS_HAS_WGMMA)
    if constexpr (sizeof(T) == 2) {
        extern __shared__ __align__(16) unsigned char v2_half_wgmma_smem[];
        typedef WgmmaConfig<TA, TB, HALF_WGMMA_STAGES> Cfg;
        typedef HalfTile<Cfg::BM, TA> TileA;  // s[k][m] (A stored K x M) or s[m][k]
        typedef typename V2Pick<TA && !TB, HalfTile<Cfg::BN, !TB>, HalfTileMN<Cfg::BN>>::type TileB;  // tn: MN-major
        wgmma_gemm<Cfg, TileA, TileB, TA, TB, VEC, HalfWgmma<std::is_same<T, __nv_bfloat16>::value>>(
            v2_half_wgmma_smem, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stride_a, stride_b, stride_c);
    }
#endif
}

// One block per SM (128 accumulators a thread).
extern "C" __global__ void __launch_bounds__(256) gemm_half_wgmma_nn_vec(GEMM_HALF_PARAMS) { gemm_half_wgmma_body<false, false, true>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_wgmma_nt_vec(GEMM_HALF_PARAMS) { gemm_half_wgmma_body<false, true, true>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_wgmma_tn_vec(GEMM_HALF_PARAMS) { gemm_half_wgmma_body<true, false, true>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_wgmma_tt_vec(GEMM_HALF_PARAMS) { gemm_half_wgmma_body<true, true, true>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_wgmma_nn_elem(GEMM_HALF_PARAMS) { gemm_half_wgmma_body<false, false, false>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_wgmma_nt_elem(GEMM_HALF_PARAMS) { gemm_half_wgmma_body<false, true, false>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_wgmma_tn_elem(GEMM_HALF_PARAMS) { gemm_half_wgmma_body<true, false, false>(GEMM_HALF_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_half_wgmma_tt_elem(GEMM_HALF_PARAMS) { gemm_half_wgmma_body<true, true, false>(GEMM_HALF_ARGS); }

extern "C" __global__ void gemm_half_splitk_reduce(int M, int N, int splits, float alpha, const float* __restrict__ W,
                                                   float beta, out_real* __restrict__ C, int ldc) {
    const long long mn = (long long)M * N;
    GRID_STRIDE_LOOP(long long, idx, mn) {
        float sum = W[idx];
        for (int s = 1; s < splits; ++s) sum += W[s * mn + idx];
        half_store_one(C, idx / N * ldc + idx % N, alpha, sum, beta);
    }
}
