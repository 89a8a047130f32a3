// gemm_pipeline.cuh: the pieces GEMM v2's kernels (gemm_v2.cu: FMA pipes; gemm_tf32.cu: tensor cores) are
// built from, as CUTLASS's multistage mainloop is: the kernel signature, 16-byte vectors, block/warp
// configurations, the per-thread cp.async plan of a stage tile (V2Loader) and the mainloop that runs the
// STAGES-deep shared-memory pipeline with one __syncthreads per K step. `real` is float or double.
// A stage tile type (gemm_v2.cu's V2Tile, gemm_tf32.cu's Tf32Tile) gives ROWS x COLS as stored in global
// memory (COLS contiguous), KMAJOR (the M or N index contiguous), PITCH, ELEMS, offset(r, c) (where element
// (r, c) sits) and PERIOD (offset(r + PERIOD, c) = offset(r, c) + PERIOD * PITCH).
#pragma once
#include <cuda_pipeline.h>

#include "mma.cuh"  // fence_proxy_async_shared

#define GEMM_V2_PARAMS int M, int N, int K, real alpha, const real* __restrict__ A, int lda, const real* __restrict__ B, int ldb, real beta, real* __restrict__ C, int ldc, long long stride_a, long long stride_b, long long stride_c
#define GEMM_V2_ARGS M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stride_a, stride_b, stride_c

template <class T> struct V2Vec { typedef uint4 type; };  // 16-bit storage types: 16 bytes as they are
template <> struct V2Vec<float> { typedef float4 type; };
template <> struct V2Vec<double> { typedef double2 type; };
typedef V2Vec<real>::type vec16;
constexpr int VW = 16 / sizeof(real);  // elements in one 16-byte vector
constexpr int BK = 64 / sizeof(real);  // K step: 16 floats, 8 doubles or 32 16-bit values

template <bool SECOND, class First, class Second> struct V2Pick { typedef First type; };
template <class First, class Second> struct V2Pick<true, First, Second> { typedef Second type; };

// BM x BN of C per block, WARPS_M x WARPS_N warps; a warp's lanes are 8 along M x 4 along N and each lane
// owns GM x GN groups of 4 x 4 elements: warp tile (32 GM) x (16 GN), thread tile (4 GM) x (4 GN).
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int GM, int GN, int STAGES_>
struct V2Config {
    static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
    static constexpr int WTM = 32 * GM, WTN = 16 * GN, TM = 4 * GM, TN = 4 * GN;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static_assert(WARPS_M * WTM == BM && WARPS_N * WTN == BN, "the warps tile the block");
};
// A block's place in the GEMM: advances A, B and C to its tile (blockIdx.y along M, .x along N) and batch
// (blockIdx.z); what is left of M and N from the tile's corner; the warp's offset (wm, wn) in the tile.
template <class Cfg, bool TA, bool TB>
struct V2Block {
    int m_left, n_left, wm, wn;
    template <class PA, class PB, class PC>  // the kernel's pointers, __restrict__ as they are
    __device__ __forceinline__ V2Block(int M, int N, PA& A, int lda, PB& B, int ldb, PC& C, int ldc,
                                       long long stride_a, long long stride_b, long long stride_c) {
        const int row0 = blockIdx.y * Cfg::BM, col0 = blockIdx.x * Cfg::BN, warp = threadIdx.x / 32;
        A += blockIdx.z * stride_a + (TA ? (long long)row0 : (long long)row0 * lda);
        B += blockIdx.z * stride_b + (TB ? (long long)col0 * ldb : (long long)col0);
        C += blockIdx.z * stride_c + (long long)row0 * ldc + col0;
        m_left = M - row0;
        n_left = N - col0;
        wm = warp / Cfg::WARPS_N * Cfg::WTM;
        wn = warp % Cfg::WARPS_N * Cfg::WTN;
    }
    __device__ __forceinline__ bool edge() const { return m_left < Cfg::BM || n_left < Cfg::BN; }
};

// The cp.async copies of one operand's stage tiles (ROWS x COLS, COLS contiguous in global memory). Thread
// t copies vectors t, t + THREADS, ...: consecutive threads take consecutive vectors of a row (coalesced),
// so a thread's copies share one column c0 and step STEP_ROWS rows: everything per copy but the stage's
// position is computed once. `src` walks along K one stage at a time. Copies outside the matrix's M (N)
// extent (known per copy from the start) and, in the K residue stage only, outside K fill their 16 (4)
// bytes with zeros and read nothing (cp.async's zero fill: the same instruction, no branch). One-element
// copies of 16-bit values (below cp.async's 4 bytes) are an ordinary load and shared store instead.
template <class Tile, int THREADS, bool VEC>
struct V2Loader {
    static constexpr int W = VEC ? VW : 1, PER_ROW = Tile::COLS / W, STEP_ROWS = THREADS / PER_ROW;
    static constexpr int COPIES = Tile::ROWS / STEP_ROWS;
    static constexpr bool STORES = W * sizeof(real) < 4;  // below cp.async's 4 bytes: a load and a shared store
    static constexpr int UNROLL = STORES ? 4 : COPIES;    // loads in flight hold registers: 4 at a time
    static_assert(THREADS % PER_ROW == 0 && Tile::ROWS % STEP_ROWS == 0, "the copies divide among the threads");
    const real* src;    // this thread's first element of the next stage
    int ld, r0, c0;     // leading dimension; this thread's first row and its column in the tile
    int dst0;           // Tile::offset(r0, c0)
    unsigned inside;    // bit i: copy i's M (N) index is inside the matrix

    __device__ __forceinline__ V2Loader(const real* g, int ld_, int outer_left) : ld(ld_) {
        r0 = threadIdx.x / PER_ROW;
        c0 = threadIdx.x % PER_ROW * W;
        src = g + r0 * ld + c0;
        dst0 = Tile::offset(r0, c0);
        inside = 0;
#pragma unroll
        for (int i = 0; i < COPIES; ++i)
            if ((Tile::KMAJOR ? c0 : r0 + i * STEP_ROWS) < outer_left) inside |= 1u << i;
    }
    // Issues one stage's copies into s; CHECK_K: the stage holds only k_left < BK values of K.
    template <bool CHECK_K>
    __device__ __forceinline__ void copy(real* s, int k_left) const {
        const real* g = src;
#pragma unroll UNROLL
        for (int i = 0; i < COPIES; ++i, g += STEP_ROWS * ld) {
            const int r = r0 + i * STEP_ROWS;
            real* dst = s + (STEP_ROWS % Tile::PERIOD ? Tile::offset(r, c0) : dst0 + i * STEP_ROWS * Tile::PITCH);
            const bool ok = (inside >> i & 1) && (!CHECK_K || (Tile::KMAJOR ? r : c0) < k_left);
            if constexpr (STORES) {
                *reinterpret_cast<unsigned short*>(dst) = ok ? *reinterpret_cast<const unsigned short*>(g) : 0;
            } else {
                __pipeline_memcpy_async(dst, g, W * sizeof(real), ok ? 0 : W * sizeof(real));  // else zeros, g unread
            }
        }
    }
    // Moves src k elements along K (k * ld < 2^31: the launcher keeps ld * 128 below it).
    __device__ __forceinline__ void advance(int k) { src += Tile::KMAJOR ? k * ld : k; }
};

// ---------------------------------------------------------------------------------------------------
// The mainloop shared by the FMA and tensor-core kernels: prologue, then per K step wait / barrier /
// issue the copies of a later stage / compute(stage). `compute(sa, sb)` gets the stage's tiles. As in
// CUTLASS, the first stage takes the K residue (K mod STEP, or STEP), so every later stage is whole and
// only the prologue checks K.
// ---------------------------------------------------------------------------------------------------
// ASYNC_READS: compute reads the stages through the async proxy (wgmma), so each thread fences its
// landed copies for it before the barrier, and compute may return with its reads of the stage still in
// flight (wgmma's wait_group 1): they are done when the next compute returns. The copies then run one
// stage less ahead (S - 2 instead of S - 1), so that a buffer is refilled only two K steps after its
// compute began.
template <class Cfg, class TileA, class TileB, int STEP, bool VEC, class Compute, bool ASYNC_READS = false>
__device__ __forceinline__ void v2_mainloop(int M, int N, int K, const real* __restrict__ A, int lda,
                                            const real* __restrict__ B, int ldb, int m_left, int n_left,
                                            real (*As)[TileA::ELEMS], real (*Bs)[TileB::ELEMS], Compute compute) {
    constexpr int S = Cfg::STAGES, AHEAD = ASYNC_READS ? S - 2 : S - 1;  // stages in flight before a compute
    static_assert(AHEAD >= 1, "ASYNC_READS needs 3 stages or more");
    V2Loader<TileA, Cfg::THREADS, VEC> la(A, lda, m_left);
    V2Loader<TileB, Cfg::THREADS, VEC> lb(B, ldb, n_left);
    const int ktiles = (K + STEP - 1) / STEP, kres = K - (ktiles - 1) * STEP;
    la.template copy<true>(As[0], kres);
    lb.template copy<true>(Bs[0], kres);
    la.advance(kres);
    lb.advance(kres);
    __pipeline_commit();
#pragma unroll
    for (int kt = 1; kt < AHEAD; ++kt) {
        if (kt < ktiles) {
            la.template copy<false>(As[kt], STEP);
            lb.template copy<false>(Bs[kt], STEP);
            la.advance(STEP);
            lb.advance(STEP);
        }
        __pipeline_commit();
    }
    int read = 0, write = AHEAD;  // stage buffers: computed now, filled now
    for (int kt = 0; kt < ktiles; ++kt) {
        __pipeline_wait_prior(AHEAD - 1);  // stage kt has landed (this thread's copies) ...
        if constexpr (ASYNC_READS) fence_proxy_async_shared();
        __syncthreads();  // ... everyone's, and everyone is done with stage kt - 1 (kt - 2: ASYNC_READS)
        if (kt + AHEAD < ktiles) {
            la.template copy<false>(As[write], STEP);
            lb.template copy<false>(Bs[write], STEP);
            la.advance(STEP);
            lb.advance(STEP);
        }
        __pipeline_commit();
        compute(As[read], Bs[read]);
        read = read == S - 1 ? 0 : read + 1;
        write = write == S - 1 ? 0 : write + 1;
    }
}
