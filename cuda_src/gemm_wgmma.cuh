// gemm_wgmma.cuh: the GEMM body on Hopper's warpgroup MMA (wgmma, sm_90a; mma.cuh), written once for the
// element types that instantiate it: gemm_tf32.cu's gemm_tf32_wgmma (TF32) and gemm_half.cu's
// gemm_half_wgmma (FP16, BF16). C = alpha op(A) op(B) + beta C with the signature, block placement, stage
// tiles and cp.async pipeline of GEMM v2 (gemm_pipeline.cuh), float accumulators.
//
// D = A' B' with B' read by the tensor cores from the stages through a descriptor and A' (M' x K) loaded to
// registers by the element type's fragment loads (so either layout): nt and tt compute D = C (A' = op(A),
// B' = B, stored N x K, K contiguous); nn computes D = C^T (A' = B^T from B's k-major tile, B' = A, stored
// M x K); tn (16-bit only) computes D = C with B' = B stored K x N, which wgmma reads "MN-major" (imm-trans-b
// 1) from a tile in wgmma_desc_sw128_mn's layout (gemm_half.cu's HalfTileMN). A K-contiguous B' tile is the
// 64-byte-swizzled layout wgmma_desc_sw64 describes (Tf32Tile, HalfTile).
// Block: D tile 128 x 256 (C tile 128 x 256, or 256 x 128 for nn), 256 threads = 2 warpgroups; warpgroup
// wg owns D rows 64 wg .. 64 wg + 63, its warp w rows 16 w .. of those, all 256 columns: per K step of 64
// bytes a row (16 TF32 or 32 16-bit values) two wgmma m64n256 (k8 TF32, k16 16-bit), 128 accumulators a
// thread. K through Cfg::STAGES cp.async stages in dynamic shared memory rounded up to 1024 bytes. Per K
// step each warp loads its A' fragments, fences, issues the two wgmma, commits, and waits only for the
// previous step's (wait_group 1), so the next step's barrier and loads overlap this step's products; the
// copies run STAGES - 2 ahead, refilling a stage two steps after its products were issued (v2_mainloop's
// ASYNC_READS). Epilogue from registers: the element type's store of mma.m16n8's D layout.
//
// Ops, the element type's pieces (gemm_tf32.cu's Tf32Wgmma, gemm_half.cu's HalfWgmma):
//   Ops::load_a<TileP>(a, s, o, lane)  a[ks] = A' registers of the warp's 16 rows o .. of stage tile s, k-step ks
//   Ops::mma<TRANS_B>(d, a, desc)       d += A' B' for one k-step (TRANS_B: B' MN-major)
//   Ops::store<TileP, SWAP>(tile, C, ldc, alpha, beta, p0, g, t, edge, m_left, n_left)   the epilogue
//   Ops::K_ZERO                         the planner launches K = 0 to scale C (C = beta C): no stage is read
#pragma once
#include <type_traits>  // std::integral_constant

#include "gemm_pipeline.cuh"
#include "mma.cuh"

// The C tile of a wgmma block: D (128 x 256) is C, or C^T for nn.
template <bool TA, bool TB, int STAGES>
using WgmmaConfig = typename V2Pick<!TA && !TB, V2Config<128, 256, 2, 4, 2, 4, STAGES>,
                                    V2Config<256, 128, 4, 2, 2, 4, STAGES>>::type;

// B' of k-step ks (of 2) of the stage tile at shared-window address q: a K-contiguous tile (the 64-byte swizzle,
// one k-step 32 bytes along each row), or an MN-major one, which names its own descriptor.
template <class TileQ>
__device__ __forceinline__ unsigned long long wgmma_b_desc(unsigned q, int ks) {
    if constexpr (TileQ::KMAJOR)
        return TileQ::wgmma_desc(q, ks);
    else
        return wgmma_desc_sw64(q + 32 * ks);
}

// raw: the kernel's dynamic shared memory (an `extern __shared__` array of the .cu, which the simulator maps).
template <class Cfg, class TileA, class TileB, bool TA, bool TB, bool VEC, class Ops, class T, class S, class O>
__device__ __forceinline__ void wgmma_gemm(unsigned char* raw, int M, int N, int K, S alpha, const T* __restrict__ A,
                                           int lda, const T* __restrict__ B, int ldb, S beta, O* __restrict__ C,
                                           int ldc, long long stride_a, long long stride_b, long long stride_c) {
    constexpr bool SWAP = !TA && !TB;  // nn: D = C^T
    typedef typename V2Pick<SWAP, TileA, TileB>::type TileP;  // A': registers
    typedef typename V2Pick<SWAP, TileB, TileA>::type TileQ;  // B': descriptor
    static_assert((TileQ::KMAJOR ? TileQ::COLS : TileQ::ROWS) == 256, "B' holds 256 N': one m64n256 operand");
    const unsigned window = shared_address(raw);
    T* smem = reinterpret_cast<T*>(raw) + (((window + 1023) & ~1023u) - window) / sizeof(T);  // 1024-byte aligned
    auto As = reinterpret_cast<T (*)[TileA::ELEMS]>(smem);
    auto Bs = reinterpret_cast<T (*)[TileB::ELEMS]>(smem + Cfg::STAGES * TileA::ELEMS);
    const V2Block<Cfg, TA, TB> blk(M, N, A, lda, B, ldb, C, ldc, stride_a, stride_b, stride_c);
    const int m_left = blk.m_left, n_left = blk.n_left;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int p0 = threadIdx.x / 128 * 64 + threadIdx.x / 32 % 4 * 16;  // this warp's first row of D

    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;

    // A' fragments alternate between two register sets by step parity: the products issued with one set
    // may still be reading it during the next step, so each set is held (fenced as an operand) until the
    // wait that retires its products, and only refilled the step after.
    unsigned p[2][2][4];  // [step parity][k-step][register]
    int odd = 0;
    auto step = [&](const T* sa, const T* sb, auto parity) {
        constexpr int X = decltype(parity)::value;
        Ops::template load_a<TileP>(p[X], SWAP ? sb : sa, p0, lane);
        const unsigned q = shared_address(SWAP ? sa : sb);
        wgmma_fence(acc);
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) Ops::template mma<TileQ::KMAJOR>(acc, p[X][ks], wgmma_b_desc<TileQ>(q, ks));
        wgmma_commit();
        wgmma_wait<1>(acc);  // the previous step's products are done: its stage and fragments are free
        wgmma_fence_operands(p[1 - X]);
    };
    auto compute = [&](const T* sa, const T* sb) {
        if (odd) step(sa, sb, std::integral_constant<int, 1>());
        else step(sa, sb, std::integral_constant<int, 0>());
        odd ^= 1;
    };
    if (!Ops::K_ZERO || K > 0)  // K = 0: no stage, no read of A or B; C = beta C below
        v2_mainloop<Cfg, TileA, TileB, BK, VEC, decltype(compute), true>(  // true: wgmma reads the stages
            M, N, K, A, lda, B, ldb, m_left, n_left, As, Bs, compute);
    wgmma_wait<0>(acc);

    // acc[4j + e] is mma.m16n8's D element e of column group j (mma.cuh): one P tile, 32 Q tiles
    Ops::template store<TileP, SWAP>([&](int, int j) { return acc + 4 * j; }, C, ldc, alpha, beta, p0, g, t,
                                     blk.edge(), m_left, n_left);
}
