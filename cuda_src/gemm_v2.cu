// gemm_v2.cu: GEMM v2, C = alpha * op(A) @ op(B) + beta * C on row-major matrices, built as CUTLASS's
// multistage mainloop and the warp-tiled SGEMM write-ups build it: a block tile of C, warp tiles inside it,
// register tiles inside those, operands staged through a multi-stage shared-memory pipeline filled with
// cp.async (<cuda_pipeline.h>; the simulator copies synchronously, gpublas/runtime/sim/cuda_pipeline.h).
// The dispatcher in gpublas/blas/blas3.py picks a kernel by shape; `real` is float or double (-Dreal=...). The
// pipeline pieces (vectors, configurations, the cp.async loader, the mainloop) are gemm_pipeline.cuh's,
// shared with the TF32 kernels of gemm_tf32.cu.
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
// Bounds: each thread's copies know once, at the start, whether their M (N) index is inside the matrix; the
// first K step takes the K residue (K mod BK, as CUTLASS does), so only it checks K. A copy outside fills its
// bytes with zeros through cp.async's zero fill (the same instruction: no branch in the main loop).
//
// gemm_v2_<cfg>: FP32 / FP64 on the FMA pipes. K in steps of BK = 64 bytes of each row (16 floats, 8
//   doubles). Shared tiles mirror global memory: an operand whose M (N) index is contiguous is stored
//   k-major, s[k][m]; one whose K index is contiguous is stored s[m][k] with rows padded by 16 bytes. Each
//   thread reads its fragments with 16-byte shared loads (LDS.128) and does the rank-VW updates of its
//   register tile. Warp lanes: 8 along M x 4 along N; each lane owns GM x GN groups of 4 x 4 elements.
//   One __syncthreads per K step: wait for stage kt, barrier, issue the copies of stage kt + STAGES - 1
//   (into the buffer every thread finished with), compute stage kt. Epilogue (float): with B k-major a
//   lane's columns come in runs of 4, stored as 16-byte vectors (STG.128) in interior tiles when C is
//   16-byte aligned and ldc a multiple of 4 (checked in the kernel, outside the main loop); else scalars.
//     large:  float 128x128: 256 threads (2 x 4 warps of 64 x 32), 8 x 8 per thread, 2 stages (40 KB shared);
//             double 128x64: 256 threads (2 x 4 warps of 64 x 16), 8 x 4 per thread (8 x 8 doubles spill).
//     medium: 64x64: 128 threads (2 x 2 warps of 32 x 32), 4 x 8 per thread, 3 stages (30 KB).
//     small:  32x64: 128 threads (1 x 4 warps of 32 x 16), 4 x 4 per thread, 3 stages (22.5 KB).
// gemm_splitk_reduce: grid-stride over M x N; C = alpha * (W[0] + W[1] + ... + W[S-1]) + beta * C, summed in
//   slice order (deterministic: no atomics). W holds the S partial products of a split-K GEMM, each made by
//   a gemm_v2 kernel over one K slice (the launcher runs the slices as a batch).
#include "common.cuh"
#include "gemm_common.cuh"
#include "gemm_pipeline.cuh"

// ---------------------------------------------------------------------------------------------------
// Pieces: configurations, shared tiles, fragment loads
// ---------------------------------------------------------------------------------------------------
constexpr int PAD = VW;  // k-contiguous tiles: each row padded by 16 bytes

__device__ __forceinline__ void unpack(const float4& q, float* v) { v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w; }
__device__ __forceinline__ void unpack(const double2& q, double* v) { v[0] = q.x; v[1] = q.y; }

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
    static constexpr int PERIOD = 1;  // offset(r + PERIOD, c) = offset(r, c) + PERIOD * PITCH
    static __device__ __forceinline__ int offset(int r, int c) { return r * PITCH + c; }
};

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
// gemm_v2_<cfg>: FP32 / FP64 on the FMA pipes
// ---------------------------------------------------------------------------------------------------
template <class Cfg, bool TA, bool TB, bool VEC>
__device__ __forceinline__ void gemm_v2_body(GEMM_V2_PARAMS) {
    typedef V2Tile<Cfg::BM, TA> TileA;   // A stored K x M (transposed): M contiguous
    typedef V2Tile<Cfg::BN, !TB> TileB;  // B stored K x N: N contiguous
    __shared__ __align__(16) real As[Cfg::STAGES][TileA::ELEMS];
    __shared__ __align__(16) real Bs[Cfg::STAGES][TileB::ELEMS];
    const V2Block<Cfg, TA, TB> blk(M, N, A, lda, B, ldb, C, ldc, stride_a, stride_b, stride_c);
    const int m_left = blk.m_left, n_left = blk.n_left, wm = blk.wm, wn = blk.wn;
    const int lane = threadIdx.x % 32, lm = lane / 4, ln = lane % 4;

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

    // Epilogue. B k-major (nn, tn): a lane's columns come in runs of 4, stored as 16-byte vectors in interior
    // tiles when C is 16-byte aligned and ldc a multiple of VW; everything else as checked scalars. Float only:
    // the FP64 large nn variant, at its 128-register cap, spills in the main loop with the vector path.
    constexpr bool VEC_C = sizeof(real) == 4;
    const bool edge = blk.edge();
    if (!TB && VEC_C && !edge && reinterpret_cast<size_t>(C) % 16 == 0 && ldc % VW == 0) {
#pragma unroll
        for (int i = 0; i < Cfg::TM; ++i)
#pragma unroll
            for (int j = 0; j < Cfg::TN; j += VW)
                store_c_vec<vec16>(C, (wm + v2_outer<TA, 8>(i, lm)) * ldc + wn + v2_outer<true, 4>(j, ln), alpha,
                                   &acc[i][j], 1, beta);
        return;
    }
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
// k-major A variants and nn_vec; FP64 fits two 128x64 blocks everywhere. nt_vec keeps one block (250
// registers): with both operands K-contiguous each 16-byte load holds 4 K values of one row, so a K step's
// 64 fragment registers of A and B are live beside the 64 accumulators, and nvcc software-pipelines the
// next step's on top; capped at 128 it spills in the main loop (12 bytes; more when B is loaded in halves
// or A row by row behind a scheduling barrier), so the cap stays off.
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
