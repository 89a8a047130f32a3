// gemm_v2.cu: GEMM v2, C = alpha * op(A) @ op(B) + beta * C on row-major matrices, built as CUTLASS's
// multistage mainloop and the warp-tiled SGEMM write-ups build it: a block tile of C, warp tiles inside it,
// register tiles inside those, operands staged through a multi-stage shared-memory pipeline filled with
// cp.async (<cuda_pipeline.h>; the simulator copies synchronously, gpublas/sim/cuda_pipeline.h).
// The dispatcher in gpublas/blas3.py picks a kernel by shape; `real` is float or double (-Dreal=...).
//
// Every kernel has the signature
//   (M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stride_a, stride_b, stride_c)
// with op(A) M x K and op(B) K x N as in gemm.cu; blockIdx.z is the batch (A, B, C advance by the strides).
// The variant is in the name, fixed at compile time (no runtime branch in the main loop):
//   <kernel>_<config>_<ta><tb>_<copy>: config = large, medium or small (below); ta/tb = n (as stored) or t (transposed); copy = vec: 16-byte cp.async
//   (A, B 16-byte aligned; lda, ldb, the batch strides and each operand's contiguous extent multiples of
//   16 bytes: the launcher checks) or elem: one element per cp.async (any alignment).
// beta == 0 never reads C; alpha == 0 and K == 0 never reach these kernels (the launcher scales C). Index
// math inside a tile is 32-bit (the launcher keeps ld * 128 below 2^31); block and batch offsets are 64-bit.
// Tiles that touch the M, N or K edge load through a bounds-checked copy (zeros outside); all others not.
//
// gemm_v2_<cfg>: FP32 / FP64 on the FMA pipes. K in steps of BK = 64 bytes of each row (16 floats, 8
//   doubles). Shared tiles mirror global memory: an operand whose M (N) index is contiguous is stored
//   k-major, s[k][m]; one whose K index is contiguous is stored s[m][k] with rows padded by 16 bytes. Each
//   thread reads its fragments with 16-byte shared loads (LDS.128) and does the rank-VW updates of its
//   register tile. Warp lanes: 8 along M x 4 along N; each lane owns GM x GN groups of 4 x 4 elements.
//   One __syncthreads per K step: wait for stage kt, barrier, issue the copies of stage kt + STAGES - 1
//   (into the buffer every thread finished with), compute stage kt.
//     large:  float 128x128: 256 threads (2 x 4 warps of 64 x 32), 8 x 8 per thread, 2 stages (40 KB shared);
//             double 128x64: 256 threads (2 x 4 warps of 64 x 16), 8 x 4 per thread (8 x 8 doubles spill).
//     medium: 64x64: 128 threads (2 x 2 warps of 32 x 32), 4 x 8 per thread, 3 stages (30 KB).
//     small:  32x64: 128 threads (1 x 4 warps of 32 x 16), 4 x 4 per thread, 3 stages (22.5 KB).
// gemm_tf32_large: TF32 tensor cores (nvcuda::wmma m16n16k8, float accumulation), float only, sm_80+
//   (elsewhere an empty body; the launcher refuses it). 256 threads (2 x 4 warps of 64 x 32 = 4 x 2
//   fragments), K in steps of 16, the same tiles and 2-stage cp.async pipeline (fragments load row- or
//   column-major to match the stored layout); the tensor cores read the top 19 bits of each float (TF32
//   by truncation, no conversion instructions); the epilogue stages each fragment through shared memory.
//   wmma's loads take generic pointers, so they compile to LD, not LDS (an mma.sync version would fix it).
// gemm_splitk_reduce: grid-stride over M x N; C = alpha * (W[0] + W[1] + ... + W[S-1]) + beta * C, summed in
//   slice order (deterministic: no atomics). W holds the S partial products of a split-K GEMM, each made by
//   a gemm_v2 kernel over one K slice (the launcher runs the slices as a batch).
#include "common.cuh"
#include "gemm_common.cuh"
#include <cuda_pipeline.h>

#define GEMM_V2_PARAMS int M, int N, int K, real alpha, const real* __restrict__ A, int lda, const real* __restrict__ B, int ldb, real beta, real* __restrict__ C, int ldc, long long stride_a, long long stride_b, long long stride_c
#define GEMM_V2_ARGS M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, stride_a, stride_b, stride_c

// ---------------------------------------------------------------------------------------------------
// Pieces: 16-byte vectors, configurations, shared tiles, the cp.async tile loader, fragment loads
// ---------------------------------------------------------------------------------------------------
template <class T> struct V2Vec;
template <> struct V2Vec<float> { typedef float4 type; };
template <> struct V2Vec<double> { typedef double2 type; };
typedef V2Vec<real>::type vec16;
constexpr int VW = 16 / sizeof(real);  // elements in one 16-byte vector
constexpr int BK = 64 / sizeof(real);  // K step: 16 floats or 8 doubles
constexpr int PAD = VW;                // k-contiguous tiles: each row padded by 16 bytes

__device__ __forceinline__ void unpack(const float4& q, float* v) { v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w; }
__device__ __forceinline__ void unpack(const double2& q, double* v) { v[0] = q.x; v[1] = q.y; }

// BM x BN of C per block, WARPS_M x WARPS_N warps; a warp's lanes are 8 along M x 4 along N and each lane
// owns GM x GN groups of 4 x 4 elements: warp tile (32 GM) x (16 GN), thread tile (4 GM) x (4 GN).
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int GM, int GN, int STAGES_>
struct V2Config {
    static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
    static constexpr int WTM = 32 * GM, WTN = 16 * GN, TM = 4 * GM, TN = 4 * GN;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static_assert(WARPS_M * WTM == BM && WARPS_N * WTN == BN, "the warps tile the block");
};
typedef V2Config<128, sizeof(real) == 4 ? 128 : 64, 2, 4, 2, sizeof(real) == 4 ? 2 : 1, 2> V2Large;
typedef V2Config<64, 64, 2, 2, 1, 2, 3> V2Medium;
typedef V2Config<32, 64, 1, 4, 1, 1, 3> V2Small;

// One operand's tile of one K step in shared memory, in its global layout: KMAJOR (M or N index
// contiguous) s[k * OUTER + o]; else (K contiguous) s[o * (BK + PAD) + k].
template <int OUTER, bool KMAJOR_>
struct V2Tile {
    static constexpr bool KMAJOR = KMAJOR_;
    static constexpr int ROWS = KMAJOR ? BK : OUTER, COLS = KMAJOR ? OUTER : BK;  // as in global memory
    static constexpr int PITCH = KMAJOR ? OUTER : BK + PAD;
    static constexpr int ELEMS = ROWS * PITCH;
};

// Issues the copies of one ROWS x COLS tile (COLS contiguous, leading dimension ld) from g into s. Thread t
// copies vectors t, t + THREADS, ...; consecutive threads take consecutive vectors of a row (coalesced).
// CHECK (edge tiles only): vectors outside rows_left x cols_left are zeroed with a plain shared store.
template <class Tile, int THREADS, bool VEC, bool CHECK>
__device__ __forceinline__ void v2_load_tile(real* s, const real* __restrict__ g, int ld, int rows_left,
                                             int cols_left) {
    constexpr int W = VEC ? VW : 1;
    constexpr int PER_ROW = Tile::COLS / W, COPIES = Tile::ROWS * PER_ROW / THREADS;
    static_assert(Tile::ROWS * PER_ROW % THREADS == 0, "the copies divide among the threads");
#pragma unroll
    for (int i = 0; i < COPIES; ++i) {
        const int idx = threadIdx.x + i * THREADS, r = idx / PER_ROW, c = idx % PER_ROW * W;
        real* dst = s + r * Tile::PITCH + c;
        if (!CHECK || (r < rows_left && c < cols_left)) {
            __pipeline_memcpy_async(dst, g + r * ld + c, W * sizeof(real));
        } else if constexpr (VEC) {
            *reinterpret_cast<vec16*>(dst) = vec16{};
        } else {
            *dst = (real)0;
        }
    }
}

// Index (along M for A with L = 8 lanes, along N for B with L = 4) of a lane's element i = 4 g + e in its
// warp tile. k-major tiles: 4 consecutive indices per lane (one or two 16-byte loads); k-contiguous
// tiles: lanes interleave, so that the rows a quarter warp reads sit in distinct banks.
template <bool KMAJOR, int L>
__device__ __forceinline__ int v2_outer(int i, int lane) {
    return i / 4 * 4 * L + (KMAJOR ? lane * 4 + i % 4 : i % 4 * L + lane);
}

// frag[v][i] = X[outer(i), k + v] for v < VW, read with 16-byte shared loads from the warp's part of a tile.
template <class Tile, int T, int L>
__device__ __forceinline__ void v2_load_frag(real (&frag)[VW][T], const real* s, int k, int lane) {
    if constexpr (Tile::KMAJOR) {
#pragma unroll
        for (int v = 0; v < VW; ++v)
#pragma unroll
            for (int i = 0; i < T; i += VW)
                unpack(*reinterpret_cast<const vec16*>(s + (k + v) * Tile::PITCH + v2_outer<true, L>(i, lane)),
                       &frag[v][i]);
    } else {
#pragma unroll
        for (int i = 0; i < T; ++i) {
            real q[VW];
            unpack(*reinterpret_cast<const vec16*>(s + v2_outer<false, L>(i, lane) * Tile::PITCH + k), q);
#pragma unroll
            for (int v = 0; v < VW; ++v) frag[v][i] = q[v];
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The mainloop shared by the FMA and tensor-core kernels: prologue, then per K step wait / barrier /
// issue the copies of a later stage / compute(stage). `compute(sa, sb)` gets the stage's tiles.
// ---------------------------------------------------------------------------------------------------
template <class Cfg, class TileA, class TileB, int STEP, bool VEC, class Compute>
__device__ __forceinline__ void v2_mainloop(int M, int N, int K, const real* __restrict__ A, int lda,
                                            const real* __restrict__ B, int ldb, int m_left, int n_left,
                                            real (*As)[TileA::ELEMS], real (*Bs)[TileB::ELEMS], Compute compute) {
    constexpr int S = Cfg::STAGES;
    const bool edge = m_left < Cfg::BM || n_left < Cfg::BN;
    const int ktiles = (K + STEP - 1) / STEP, kfull = K / STEP;
    auto load_stage = [&](int kt) {
        const int k0 = kt * STEP, k_left = K - k0, s = kt % S;
        const real* ga = A + (TileA::KMAJOR ? (long long)k0 * lda : (long long)k0);
        const real* gb = B + (TileB::KMAJOR ? (long long)k0 * ldb : (long long)k0);
        const int ar = TileA::KMAJOR ? k_left : m_left, ac = TileA::KMAJOR ? m_left : k_left;
        const int br = TileB::KMAJOR ? k_left : n_left, bc = TileB::KMAJOR ? n_left : k_left;
        if (edge || kt >= kfull) {
            v2_load_tile<TileA, Cfg::THREADS, VEC, true>(As[s], ga, lda, ar, ac);
            v2_load_tile<TileB, Cfg::THREADS, VEC, true>(Bs[s], gb, ldb, br, bc);
        } else {
            v2_load_tile<TileA, Cfg::THREADS, VEC, false>(As[s], ga, lda, ar, ac);
            v2_load_tile<TileB, Cfg::THREADS, VEC, false>(Bs[s], gb, ldb, br, bc);
        }
    };
#pragma unroll
    for (int kt = 0; kt < S - 1; ++kt) {
        if (kt < ktiles) load_stage(kt);
        __pipeline_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        __pipeline_wait_prior(S - 2);  // stage kt has landed (this thread's copies) ...
        __syncthreads();               // ... everyone's, and everyone is done with stage kt - 1
        if (kt + S - 1 < ktiles) load_stage(kt + S - 1);
        __pipeline_commit();
        compute(As[kt % S], Bs[kt % S]);
    }
}

// ---------------------------------------------------------------------------------------------------
// gemm_v2_<cfg>: FP32 / FP64 on the FMA pipes
// ---------------------------------------------------------------------------------------------------
template <class Cfg, bool TA, bool TB, bool VEC>
__device__ __forceinline__ void gemm_v2_body(GEMM_V2_PARAMS) {
    typedef V2Tile<Cfg::BM, TA> TileA;   // A stored K x M (transposed): M contiguous
    typedef V2Tile<Cfg::BN, !TB> TileB;  // B stored K x N: N contiguous
    __shared__ __align__(16) real As[Cfg::STAGES][TileA::ELEMS];
    __shared__ __align__(16) real Bs[Cfg::STAGES][TileB::ELEMS];
    const int row0 = blockIdx.y * Cfg::BM, col0 = blockIdx.x * Cfg::BN;
    A += blockIdx.z * stride_a + (TA ? (long long)row0 : (long long)row0 * lda);
    B += blockIdx.z * stride_b + (TB ? (long long)col0 * ldb : (long long)col0);
    C += blockIdx.z * stride_c + (long long)row0 * ldc + col0;
    const int m_left = M - row0, n_left = N - col0;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, lm = lane / 4, ln = lane % 4;
    const int wm = warp / Cfg::WARPS_N * Cfg::WTM, wn = warp % Cfg::WARPS_N * Cfg::WTN;

    real acc[Cfg::TM][Cfg::TN];
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::TN; ++j) acc[i][j] = 0;

    v2_mainloop<Cfg, TileA, TileB, BK, VEC>(
        M, N, K, A, lda, B, ldb, m_left, n_left, As, Bs, [&](const real* sa, const real* sb) {
            sa += TA ? wm : wm * TileA::PITCH;  // this warp's rows and columns of the stage
            sb += TB ? wn * TileB::PITCH : wn;
#pragma unroll
            for (int k = 0; k < BK; k += VW) {
                real a[VW][Cfg::TM], b[VW][Cfg::TN];
                v2_load_frag<TileA, Cfg::TM, 8>(a, sa, k, lm);
                v2_load_frag<TileB, Cfg::TN, 4>(b, sb, k, ln);
#pragma unroll
                for (int v = 0; v < VW; ++v)
#pragma unroll
                    for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
                        for (int j = 0; j < Cfg::TN; ++j) acc[i][j] += a[v][i] * b[v][j];
            }
        });

    const bool edge = m_left < Cfg::BM || n_left < Cfg::BN;
#pragma unroll
    for (int i = 0; i < Cfg::TM; ++i) {
        const int r = wm + v2_outer<TA, 8>(i, lm);
#pragma unroll
        for (int j = 0; j < Cfg::TN; ++j) {
            const int c = wn + v2_outer<!TB, 4>(j, ln);
            if (!edge || (r < m_left && c < n_left)) store_c(C, r * ldc + c, alpha, acc[i][j], beta);
        }
    }
}

// Two large blocks per SM (128 registers a thread) where the float variant fits without spilling: the
// k-major A variants and nn_vec; FP64 fits two 128x64 blocks everywhere.
constexpr int V2_MIN_BLOCKS = 2;
extern "C" __global__ void __launch_bounds__(256, V2_MIN_BLOCKS) gemm_v2_large_nn_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Large, false, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_v2_large_nt_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Large, false, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256, V2_MIN_BLOCKS) gemm_v2_large_tn_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Large, true, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256, V2_MIN_BLOCKS) gemm_v2_large_tt_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Large, true, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_v2_large_nn_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Large, false, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_v2_large_nt_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Large, false, true, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256, V2_MIN_BLOCKS) gemm_v2_large_tn_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Large, true, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_v2_large_tt_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Large, true, true, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_medium_nn_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Medium, false, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_medium_nt_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Medium, false, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_medium_tn_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Medium, true, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_medium_tt_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Medium, true, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_medium_nn_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Medium, false, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_medium_nt_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Medium, false, true, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_medium_tn_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Medium, true, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_medium_tt_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Medium, true, true, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_small_nn_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Small, false, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_small_nt_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Small, false, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_small_tn_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Small, true, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_small_tt_vec(GEMM_V2_PARAMS) { gemm_v2_body<V2Small, true, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_small_nn_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Small, false, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_small_nt_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Small, false, true, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_small_tn_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Small, true, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(128) gemm_v2_small_tt_elem(GEMM_V2_PARAMS) { gemm_v2_body<V2Small, true, true, false>(GEMM_V2_ARGS); }

// ---------------------------------------------------------------------------------------------------
// gemm_tf32_large: TF32 tensor cores (float only; sm_80+ on the cuda backend, simulated on sim)
// ---------------------------------------------------------------------------------------------------
#if defined(__CUDA_ARCH_SIM__) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#include <mma.h>
#define V2_TF32_ENABLED 1
#endif
template <bool COL, class Row, class Col> struct V2Pick { typedef Row type; };
template <class Row, class Col> struct V2Pick<true, Row, Col> { typedef Col type; };

template <bool TA, bool TB, bool VEC>
__device__ __forceinline__ void gemm_tf32_body(GEMM_V2_PARAMS) {
#if defined(V2_TF32_ENABLED)
    if constexpr (sizeof(real) == 4) {
        using namespace nvcuda;
        typedef V2Large Cfg;
        typedef V2Tile<Cfg::BM, TA> TileA;   // stored s[k][m] (col-major fragments) or s[m][k] (row-major)
        typedef V2Tile<Cfg::BN, !TB> TileB;  // stored s[k][n] (row-major fragments) or s[n][k] (col-major)
        typedef typename V2Pick<TA, wmma::row_major, wmma::col_major>::type LayoutA;
        typedef typename V2Pick<TB, wmma::row_major, wmma::col_major>::type LayoutB;
        constexpr int FM = Cfg::WTM / 16, FN = Cfg::WTN / 16, SCRATCH = 16 * (16 + 4);  // 4 x 2 fragments a warp
        __shared__ __align__(32) float As[Cfg::STAGES][TileA::ELEMS];
        __shared__ __align__(32) float Bs[Cfg::STAGES][TileB::ELEMS];
        static_assert(Cfg::STAGES * TileA::ELEMS >= SCRATCH * Cfg::THREADS / 32, "the epilogue's scratch fits in As");
        const int row0 = blockIdx.y * Cfg::BM, col0 = blockIdx.x * Cfg::BN;
        A += blockIdx.z * stride_a + (TA ? (long long)row0 : (long long)row0 * lda);
        B += blockIdx.z * stride_b + (TB ? (long long)col0 * ldb : (long long)col0);
        C += blockIdx.z * stride_c + (long long)row0 * ldc + col0;
        const int m_left = M - row0, n_left = N - col0;
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        const int wm = warp / Cfg::WARPS_N * Cfg::WTM, wn = warp % Cfg::WARPS_N * Cfg::WTN;

        wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[FM][FN];
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

        v2_mainloop<Cfg, TileA, TileB, BK, VEC>(
            M, N, K, A, lda, B, ldb, m_left, n_left, As, Bs, [&](const float* sa, const float* sb) {
#pragma unroll
                for (int k = 0; k < BK; k += 8) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LayoutA> fa[FM];
                    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LayoutB> fb[FN];
#pragma unroll
                    for (int i = 0; i < FM; ++i) {
                        const int m = wm + 16 * i;
                        wmma::load_matrix_sync(fa[i], sa + (TA ? k * TileA::PITCH + m : m * TileA::PITCH + k), TileA::PITCH);
                    }
#pragma unroll
                    for (int j = 0; j < FN; ++j) {
                        const int n = wn + 16 * j;
                        wmma::load_matrix_sync(fb[j], sb + (TB ? n * TileB::PITCH + k : k * TileB::PITCH + n), TileB::PITCH);
                    }
#pragma unroll
                    for (int i = 0; i < FM; ++i)
#pragma unroll
                        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
                }
            });

        // Epilogue: each fragment through the warp's 16 x 20 scratch (in As, free once every warp is done).
        __syncthreads();
        float* scratch = &As[0][0] + warp * SCRATCH;
        const bool edge = m_left < Cfg::BM || n_left < Cfg::BN;
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                wmma::store_matrix_sync(scratch, acc[i][j], 16 + 4, wmma::mem_row_major);
                __syncwarp();
#pragma unroll
                for (int e = lane; e < 256; e += 32) {
                    const int r = wm + 16 * i + e / 16, c = wn + 16 * j + e % 16;
                    if (!edge || (r < m_left && c < n_left))
                        store_c(C, r * ldc + c, alpha, scratch[e / 16 * (16 + 4) + e % 16], beta);
                }
                __syncwarp();
            }
    }
#endif
}

extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_nn_vec(GEMM_V2_PARAMS) { gemm_tf32_body<false, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_nt_vec(GEMM_V2_PARAMS) { gemm_tf32_body<false, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_tn_vec(GEMM_V2_PARAMS) { gemm_tf32_body<true, false, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_tt_vec(GEMM_V2_PARAMS) { gemm_tf32_body<true, true, true>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_nn_elem(GEMM_V2_PARAMS) { gemm_tf32_body<false, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_nt_elem(GEMM_V2_PARAMS) { gemm_tf32_body<false, true, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_tn_elem(GEMM_V2_PARAMS) { gemm_tf32_body<true, false, false>(GEMM_V2_ARGS); }
extern "C" __global__ void __launch_bounds__(256) gemm_tf32_large_tt_elem(GEMM_V2_PARAMS) { gemm_tf32_body<true, true, false>(GEMM_V2_ARGS); }

// ---------------------------------------------------------------------------------------------------
// gemm_splitk_reduce
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void gemm_splitk_reduce(int M, int N, int splits, real alpha, const real* __restrict__ W,
                                              real beta, real* __restrict__ C, int ldc) {
    const long long mn = (long long)M * N;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < mn;
         idx += (long long)gridDim.x * blockDim.x) {
        real sum = W[idx];
        for (int s = 1; s < splits; ++s) sum += W[s * mn + idx];
        store_c(C, idx / N * ldc + idx % N, alpha, sum, beta);
    }
}
