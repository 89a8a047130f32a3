// gemm.cu: C = alpha * op(A) @ op(B) + beta * C on row-major matrices, as a ladder of kernels from the
// simplest to the fastest (gpublas/blas/gemm_plan.py picks one by shape). `real` is the storage type of A and B
// (-Dreal=float, double, __half or __nv_bfloat16); every kernel reads elements as acc_real (common.cuh's
// load_as: float for the 16-bit types, real itself otherwise), accumulates and applies alpha and beta in it and
// rounds each C element once into `out_real` (real unless defined; float for a float C of 16-bit inputs).
// The planner runs 16-bit inputs here on the simulator only (gemm_direct / gemm_naive, barrier-free; the GPU
// takes gemm_half.cu's tensor cores); the other kernels compile for them and are never launched so.
//
// Every kernel has the same signature (GEMM_PARAMS):
//   (M, N, K, alpha, A, lda, trans_a, B, ldb, trans_b, beta, C, ldc, stride_a, stride_b, stride_c)
// op(A) is M x K: element (i, k) is A[i*lda + k] (trans_a = 0) or A[k*lda + i] (trans_a = 1); op(B) is
// K x N the same way with ldb and trans_b. blockIdx.z is the batch index: A, B and C advance by
// stride_a, stride_b and stride_c elements per batch (a stride of 0 broadcasts an operand).
// beta == 0 writes C without reading it (NaN or Inf already there must not leak). alpha == 0 and K == 0
// are handled by the launcher, which scales C instead of launching these. No size needs to be a
// multiple of a tile: every load and store is bounds-checked.
//
// gemm_naive:    block 16x16, one thread per C[row, col]; threadIdx.x walks the columns, so the loads of
//                B (not transposed) and the stores of C coalesce. K is walked straight from global memory.
// gemm_tiled:    block 16x16, one thread per C[row, col]; K walked in tiles of 16: a 16x16 tile of op(A)
//                and one of op(B) are staged in shared memory, each loaded with threadIdx.x along the
//                operand's contiguous index (coalesced whether or not it is transposed). Two barriers per
//                tile.
// gemm_regblock: block 256 threads seen as 16x16, 2-D register blocking. float: 128x128 tile of C per
//                block, 8x8 per thread, K walked in tiles of 8; double: 64x64 tile, 4x4 per thread, K in
//                tiles of 16. Per K tile each thread loads one 4-element vector of op(A) and one of op(B)
//                (float4, or two double2, when the operand's pointer and leading dimension are 16-byte
//                aligned and the 4 elements are in bounds; else 4 scalar loads, zero-padded) into shared
//                memory; op(A)'s tile is stored k-major so that a thread's 8 (4) rows are contiguous.
//                Then 8 (16) rank-1 updates of the thread's register tile. Two barriers per K tile.
// gemm_direct:   block up to 16x16 (threadIdx.x along columns), each thread a DIRECT_TM x DIRECT_TN tile of C,
//                read straight from global memory: no shared memory, no barrier. On a GPU 4x8 (a 16x16 block:
//                64x128): for every k it loads DIRECT_TM elements of op(A)'s column k and DIRECT_TN consecutive ones
//                of op(B)'s row k and does their multiply-adds in registers; each C element is summed in the order
//                k = 0..K-1. A tile that would cross an edge of C moves back inside it (recomputing, not storing,
//                some of its neighbour's outputs), so the K loop has no bounds checks; when C is smaller than a tile
//                the loads clamp to its last row / column. Transposes and the column fit are template parameters
//                (one branch per thread picks the instantiation). On the simulator (gemm_sim.cuh) a block is one
//                thread, whose tile is 48 x 64 floats (48 x 32 doubles) computed by a CPU BLAS's register-blocked
//                micro-kernel: 6 x 64-byte micro-tiles of C in vector registers, k innermost, op(B) packed where it
//                is transposed or C's edge cuts a micro-tile; the same sums in the same order, bit for bit. The
//                simulator's every product but a C of a few elements with a long K takes it (gemm_naive those):
//                a barrier costs a fiber switch per thread there.
// gemm_wmma:     block 128 threads (4 warps), TF32 tensor cores (nvcuda::wmma, 16x16x8 fragments, float
//                accumulation), 64x64 tile of C per block, 32x32 per warp (2x2 fragments), K in tiles of 8
//                staged through shared memory. float only, sm_80+ on the cuda backend, also on sim (opt-in: kernel="wmma";
//                on other targets the kernel compiles to an empty body and the launcher refuses it).
//
// The simulator compiles the two kernels its planner picks apart from the others and from each other
// (gpublas/runtime/source.py's sim_units): a first product builds 1.4 s of g++ CPU (gemm_direct), a long-K one
// 0.6 s more (gemm_naive), instead of the family's 4.5 s.
// sim unit: gemm_direct
// sim unit: gemm_naive
// sim spread: gemm_direct
#include "common.cuh"
#include "gemm_common.cuh"

#ifndef out_real
#define out_real real
#endif

#define GEMM_PARAMS int M, int N, int K, compute_t<real> alpha, const real* __restrict__ A, int lda, int trans_a, const real* __restrict__ B, int ldb, int trans_b, compute_t<real> beta, out_real* __restrict__ C, int ldc, long long stride_a, long long stride_b, long long stride_c

// op(P)[r, c] for a row-major P with leading dimension ld, transposed when `trans`, read as acc_real.
__device__ __forceinline__ acc_real op_at(const real* __restrict__ p, int ld, int trans, int r, int c) {
    return load_as(trans ? p[(long long)c * ld + r] : p[(long long)r * ld + c]);
}


// ---------------------------------------------------------------------------------------------------
// gemm_naive
// ---------------------------------------------------------------------------------------------------
extern "C" __global__ void gemm_naive(GEMM_PARAMS) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    A += blockIdx.z * stride_a;
    B += blockIdx.z * stride_b;
    C += blockIdx.z * stride_c;
    acc_real acc = 0;
    for (int k = 0; k < K; ++k) acc += op_at(A, lda, trans_a, row, k) * op_at(B, ldb, trans_b, k, col);
    store_c(C, (long long)row * ldc + col, alpha, acc, beta);
}

// ---------------------------------------------------------------------------------------------------
// gemm_tiled
// ---------------------------------------------------------------------------------------------------
#define GEMM_TILE 16

extern "C" __global__ void gemm_tiled(GEMM_PARAMS) {
    __shared__ acc_real As[GEMM_TILE][GEMM_TILE + 1];  // As[r][k] = op(A)[row0 + r, k0 + k]; +1 avoids bank conflicts
    __shared__ acc_real Bs[GEMM_TILE][GEMM_TILE + 1];  // Bs[k][c] = op(B)[k0 + k, col0 + c]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * GEMM_TILE, col0 = blockIdx.x * GEMM_TILE;
    A += blockIdx.z * stride_a;
    B += blockIdx.z * stride_b;
    C += blockIdx.z * stride_c;
    acc_real acc = 0;
    for (int k0 = 0; k0 < K; k0 += GEMM_TILE) {
        // tx runs along the operand's contiguous index in memory, so each row of loads coalesces.
        if (!trans_a) {  // A is M x K: k contiguous
            const int r = row0 + ty, k = k0 + tx;
            As[ty][tx] = (r < M && k < K) ? load_as(A[(long long)r * lda + k]) : (acc_real)0;
        } else {         // A is K x M: r contiguous
            const int r = row0 + tx, k = k0 + ty;
            As[tx][ty] = (r < M && k < K) ? load_as(A[(long long)k * lda + r]) : (acc_real)0;
        }
        if (!trans_b) {  // B is K x N: c contiguous
            const int k = k0 + ty, c = col0 + tx;
            Bs[ty][tx] = (k < K && c < N) ? load_as(B[(long long)k * ldb + c]) : (acc_real)0;
        } else {         // B is N x K: k contiguous
            const int k = k0 + tx, c = col0 + ty;
            Bs[tx][ty] = (k < K && c < N) ? load_as(B[(long long)c * ldb + k]) : (acc_real)0;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < GEMM_TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    const int row = row0 + ty, col = col0 + tx;
    if (row < M && col < N) store_c(C, (long long)row * ldc + col, alpha, acc, beta);
}

// ---------------------------------------------------------------------------------------------------
// gemm_regblock
// ---------------------------------------------------------------------------------------------------
__device__ __forceinline__ bool aligned16(const void* p) { return ((unsigned long long)p & 15ull) == 0; }

// Four consecutive elements p[0..3] in one 16-byte load (p must be 16-byte aligned).
__device__ __forceinline__ void load_vec4(const float* __restrict__ p, float* v) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
__device__ __forceinline__ void load_vec4(const double* __restrict__ p, double* v) {
    const double2 q0 = reinterpret_cast<const double2*>(p)[0], q1 = reinterpret_cast<const double2*>(p)[1];
    v[0] = q0.x; v[1] = q0.y; v[2] = q1.x; v[3] = q1.y;
}
template <class T>  // a 16-bit T: four scalar reads as its compute type
__device__ __forceinline__ void load_vec4(const T* __restrict__ p, compute_t<T>* v) {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = load_as(p[e]);
}

// v[0..3] = p[off + 0..3] where `ok` and e < avail, else 0; one vector load when `vec` and all 4 are there.
__device__ __forceinline__ void load4_guarded(const real* __restrict__ p, long long off, bool ok, int avail, bool vec,
                                              acc_real* v) {
    if (ok && vec && avail >= 4) {
        load_vec4(p + off, v);
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = (ok && e < avail) ? load_as(p[off + e]) : (acc_real)0;
    }
}

extern "C" __global__ void __launch_bounds__(256)
gemm_regblock(GEMM_PARAMS) {
    // float: 128x128 tile, 8x8 per thread, BK 8; double: 64x64, 4x4 per thread, BK 16 (half the registers).
    // 256 threads, and BM*BK == BN*BK == 4*256: one 4-vector per thread fills each shared tile.
    constexpr bool single = sizeof(acc_real) == 4;
    constexpr int BM = single ? 128 : 64, BN = BM, BK = single ? 8 : 16, TM = single ? 8 : 4, TN = TM;
    static_assert(BM * BK == 1024 && BN * BK == 1024 && (BM / TM) * (BN / TN) == 256, "tile shape");
    __shared__ __align__(16) acc_real As[BK][BM];  // As[k][r] = op(A)[row0 + r, k0 + k] (k-major)
    __shared__ __align__(16) acc_real Bs[BK][BN];  // Bs[k][c] = op(B)[k0 + k, col0 + c]
    A += blockIdx.z * stride_a;
    B += blockIdx.z * stride_b;
    C += blockIdx.z * stride_c;
    const int t = threadIdx.x;
    const int tr = t / (BN / TN), tc = t % (BN / TN);  // this thread's sub-tile: rows tr*TM.., cols tc*TN..
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vec_a = aligned16(A) && (lda & 3) == 0;
    const bool vec_b = aligned16(B) && (ldb & 3) == 0;

    // Which 4-vector this thread loads, fixed for the whole K loop; consecutive threads take
    // consecutive vectors along the operand's contiguous index.
    int a_r, a_k, b_k, b_c;
    if (!trans_a) { a_r = t / (BK / 4); a_k = (t % (BK / 4)) * 4; }  // 4 consecutive k of one row
    else          { a_k = t / (BM / 4); a_r = (t % (BM / 4)) * 4; }  // 4 consecutive rows of one k
    if (!trans_b) { b_k = t / (BN / 4); b_c = (t % (BN / 4)) * 4; }  // 4 consecutive columns of one k
    else          { b_c = t / (BK / 4); b_k = (t % (BK / 4)) * 4; }  // 4 consecutive k of one column

    acc_real acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;
    acc_real a_frag[TM], b_frag[TN], v[4];

    for (int k0 = 0; k0 < K; k0 += BK) {
        if (!trans_a) {
            const int r = row0 + a_r, k = k0 + a_k;
            load4_guarded(A, (long long)r * lda + k, r < M, K - k, vec_a, v);
#pragma unroll
            for (int e = 0; e < 4; ++e) As[a_k + e][a_r] = v[e];
        } else {
            const int r = row0 + a_r, k = k0 + a_k;
            load4_guarded(A, (long long)k * lda + r, k < K, M - r, vec_a, v);
#pragma unroll
            for (int e = 0; e < 4; ++e) As[a_k][a_r + e] = v[e];
        }
        if (!trans_b) {
            const int k = k0 + b_k, c = col0 + b_c;
            load4_guarded(B, (long long)k * ldb + c, k < K, N - c, vec_b, v);
#pragma unroll
            for (int e = 0; e < 4; ++e) Bs[b_k][b_c + e] = v[e];
        } else {
            const int k = k0 + b_k, c = col0 + b_c;
            load4_guarded(B, (long long)c * ldb + k, c < N, K - k, vec_b, v);
#pragma unroll
            for (int e = 0; e < 4; ++e) Bs[b_k + e][b_c] = v[e];
        }
        __syncthreads();
        // BK rank-1 updates of the thread's TM x TN register tile.
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a_frag[i] = As[k][tr * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b_frag[j] = Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + tr * TM + i;
        if (row >= M) break;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + tc * TN + j;
            if (col < N) store_c(C, (long long)row * ldc + col, alpha, acc[i][j], beta);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// gemm_direct
// ---------------------------------------------------------------------------------------------------
// A thread's tile: DIRECT_TM x DIRECT_TN. The GPU's is 4x8 (32 accumulators in registers). The simulator's is
// 48 rows of 4 x 64 bytes (64 floats, 32 doubles; 16-bit inputs accumulate in float), gemm_sim.cuh's micro-tiles
// (MR = 6 rows of one 64-byte row: 12 AVX2 accumulators) 8 x 4 times over, in blocks of one thread that the
// simulator spreads over the cores (`sim spread` above). ms of one core (Zen 3, AVX2, a machine shared: +-30%;
// NumPy's OpenBLAS in the same run), before (16 rows of one 64-byte vector a thread, their 32 ymm accumulators
// spilled to the stack) -> after: 256^3 float nn / nt / tn / tt 5.8 / 6.4 / 5.8 / 6.2 -> 0.73 / 0.81 / 0.59 / 0.75
// (OpenBLAS 0.44-0.56; 0.46 nn on a quieter run), double 13.9 / 15.8 / 13.8 / 18.4 -> 1.95 / 1.37 / 2.0 / 2.1
// (1.0-1.2); nn's GPT block 512x192x64 float 2.7 -> 0.22, digits CNN im2col 4608x16x72 2.1 -> 0.26. Results
// unchanged, bit for bit. gemm_plan.py reads these sizes.
// SIM_DIRECT_VECTORS: the simulator's form (gemm_sim.cuh). A simulator build with GPU_DIRECT_FORM defined compiles
// the GPU's tile and loops instead, so tests run the code a GPU runs (tests/test_blas3.py).
#define DIRECT_GPU_TM 4
#define DIRECT_GPU_TN 8
#define DIRECT_SIM_TM 48         // the simulator's: a thread's rows (8 micro-tiles)
#define DIRECT_SIM_TN_VECTORS 4  // its columns, in micro-tile rows: 64 floats, 32 doubles
#define DIRECT_SIM_MR 6          // a micro-tile's rows
#define DIRECT_SIM_ROW_BYTES 64  // a micro-tile's row: one vector (16 floats, 8 doubles)
#define DIRECT_SIM_KC 256        // values of k a step (gemm_sim.cuh)
#if defined(__CUDA_ARCH_SIM__) && !defined(GPU_DIRECT_FORM)
#define SIM_DIRECT_VECTORS 1
#include "gemm_sim.cuh"
#endif
#if defined(SIM_DIRECT_VECTORS)
#define DIRECT_TM DIRECT_SIM_TM
#define DIRECT_TN (DIRECT_SIM_ROW_BYTES * DIRECT_SIM_TN_VECTORS / (int)sizeof(acc_real))
#else
#define DIRECT_TM DIRECT_GPU_TM
#define DIRECT_TN DIRECT_GPU_TN
#endif
// On the simulator (the GPU_DIRECT_FORM build, which runs the GPU's loops below) GCC's loop vectorizer would
// vectorize the K loop where op(A) is contiguous along K (A not transposed) into in-order reductions with strided
// loads of B; without it the 4x8 tile is four vector accumulators in registers (float 32x512x144: 900 -> 210 us of
// CPU). The GPU build is untouched.
#ifdef __CUDA_ARCH_SIM__
#pragma GCC push_options
#pragma GCC optimize("no-tree-loop-vectorize")
#endif

// The thread's DIRECT_TM x DIRECT_TN tile at (row0, col0), summed over k = 0..K-1 into acc. Rows past M
// read the last row (only when C has fewer than DIRECT_TM rows). FIT_N: the tile's columns lie inside
// C, at fixed strides from its corner (op(B)'s row k is read as one run when B is not transposed); else
// (C has fewer than DIRECT_TN columns) columns past N read the last one. Per k: load a (op(A)'s column k,
// the tile's rows) and b (op(B)'s row k, its columns), then the tile's multiply-adds. The GPU's form only: the
// simulator's is gemm_sim.cuh's tile.
template <bool TA, bool TB, bool FIT_N>
__device__ __forceinline__ void direct_tile(int M, int N, int K, const real* __restrict__ A, int lda,
                                            const real* __restrict__ B, int ldb, int row0, int col0,
                                            acc_real (&acc)[DIRECT_TM][DIRECT_TN]) {
    const long long a_row = TA ? 1 : lda, a_k = TA ? lda : 1;  // op(A)[r, k] = A[r * a_row + k * a_k]
    const long long b_col = TB ? ldb : 1, b_k = TB ? 1 : ldb;  // op(B)[k, c] = B[k * b_k + c * b_col]
    long long a_at[DIRECT_TM], b_at[DIRECT_TN];
#pragma unroll
    for (int i = 0; i < DIRECT_TM; ++i) a_at[i] = min(row0 + i, M - 1) * a_row;
#pragma unroll
    for (int j = 0; j < DIRECT_TN; ++j) b_at[j] = min(col0 + j, N - 1) * b_col;
    auto load_a = [&](int k, acc_real (&a)[DIRECT_TM]) {  // op(A)'s column k, the tile's rows
        const real* ak = A + k * a_k;
#pragma unroll
        for (int i = 0; i < DIRECT_TM; ++i) a[i] = load_as(ak[a_at[i]]);
    };
    auto load_b = [&](int k, acc_real (&b)[DIRECT_TN]) {  // op(B)'s row k, the tile's columns
        const real* bk = B + k * b_k;
#pragma unroll
        for (int j = 0; j < DIRECT_TN; ++j) b[j] = load_as(FIT_N ? bk[(col0 + j) * b_col] : bk[b_at[j]]);
    };
    auto fma = [&](const acc_real (&a)[DIRECT_TM], const acc_real (&b)[DIRECT_TN]) {
#pragma unroll
        for (int i = 0; i < DIRECT_TM; ++i)
#pragma unroll
            for (int j = 0; j < DIRECT_TN; ++j) acc[i][j] += a[i] * b[j];
    };
    for (int k = 0; k < K; ++k) {
        acc_real a[DIRECT_TM], b[DIRECT_TN];
        load_a(k, a);
        load_b(k, b);
        fma(a, b);
    }
}

extern "C" __global__ void gemm_direct(GEMM_PARAMS) {
    const int own_row = (blockIdx.y * blockDim.y + threadIdx.y) * DIRECT_TM;  // the tile this thread stores
    const int own_col = (blockIdx.x * blockDim.x + threadIdx.x) * DIRECT_TN;
    if (own_row >= M || own_col >= N) return;
    A += blockIdx.z * stride_a;
    B += blockIdx.z * stride_b;
    C += blockIdx.z * stride_c;
#if defined(SIM_DIRECT_VECTORS)
    switch ((trans_a ? 2 : 0) + (trans_b ? 1 : 0)) {  // gemm_sim.cuh's micro-kernels, one instantiation per case
        case 0: gemm_sim::tile<false, false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, own_row, own_col); break;
        case 1: gemm_sim::tile<false, true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, own_row, own_col); break;
        case 2: gemm_sim::tile<true, false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, own_row, own_col); break;
        default: gemm_sim::tile<true, true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, own_row, own_col); break;
    }
#else
    // A tile crossing an edge moves back inside C (overlapping its neighbour, whose outputs it computes
    // again but does not store), so only a C narrower than a tile takes the clamped loads.
    const int row0 = M >= DIRECT_TM ? min(own_row, M - DIRECT_TM) : own_row;
    const int col0 = N >= DIRECT_TN ? min(own_col, N - DIRECT_TN) : own_col;
    const bool fit_n = N >= DIRECT_TN;
    acc_real acc[DIRECT_TM][DIRECT_TN];
#pragma unroll
    for (int i = 0; i < DIRECT_TM; ++i)
#pragma unroll
        for (int j = 0; j < DIRECT_TN; ++j) acc[i][j] = 0;
    switch ((trans_a ? 4 : 0) + (trans_b ? 2 : 0) + (fit_n ? 1 : 0)) {  // one instantiation per case
        case 0: direct_tile<false, false, false>(M, N, K, A, lda, B, ldb, row0, col0, acc); break;
        case 1: direct_tile<false, false, true>(M, N, K, A, lda, B, ldb, row0, col0, acc); break;
        case 2: direct_tile<false, true, false>(M, N, K, A, lda, B, ldb, row0, col0, acc); break;
        case 3: direct_tile<false, true, true>(M, N, K, A, lda, B, ldb, row0, col0, acc); break;
        case 4: direct_tile<true, false, false>(M, N, K, A, lda, B, ldb, row0, col0, acc); break;
        case 5: direct_tile<true, false, true>(M, N, K, A, lda, B, ldb, row0, col0, acc); break;
        case 6: direct_tile<true, true, false>(M, N, K, A, lda, B, ldb, row0, col0, acc); break;
        default: direct_tile<true, true, true>(M, N, K, A, lda, B, ldb, row0, col0, acc); break;
    }
#pragma unroll
    for (int i = 0; i < DIRECT_TM; ++i) {
        const int row = row0 + i;
#pragma unroll
        for (int j = 0; j < DIRECT_TN; ++j) {
            const int col = col0 + j;
            if (row >= own_row && row < M && col >= own_col && col < N)
                store_c(C, (long long)row * ldc + col, alpha, acc[i][j], beta);
        }
    }
#endif
}

#ifdef __CUDA_ARCH_SIM__
#pragma GCC pop_options
#endif

// ---------------------------------------------------------------------------------------------------
// gemm_wmma (TF32 tensor cores; sm_80+ on the cuda backend, simulated warp-collectively on sim;
// float only)
// ---------------------------------------------------------------------------------------------------
#if defined(__CUDA_ARCH_SIM__) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#include <mma.h>
#define GEMM_WMMA_ENABLED 1
#endif

extern "C" __global__ void __launch_bounds__(128)
gemm_wmma(GEMM_PARAMS) {
#if defined(GEMM_WMMA_ENABLED)
    if constexpr (sizeof(real) == 4) {
        using namespace nvcuda;
        // As[r][k] = op(A)[row0 + r, k0 + k], Bs[k][c] = op(B)[k0 + k, col0 + c], Cs: the block's C tile
        // for the epilogue. Leading dimensions are multiples of 4 elements (16 bytes), as wmma requires.
        __shared__ __align__(32) float As[64][8 + 4];
        __shared__ __align__(32) float Bs[8][64 + 4];
        __shared__ __align__(32) float Cs[64][64 + 4];
        const int t = threadIdx.x, warp = t / 32;
        const int wr = (warp / 2) * 32, wc = (warp % 2) * 32;  // this warp's 32x32 quarter of the tile
        const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
        A += blockIdx.z * stride_a;
        B += blockIdx.z * stride_b;
        C += blockIdx.z * stride_c;
        wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
        for (int k0 = 0; k0 < K; k0 += 8) {
            // 512 elements per operand tile, 4 per thread, consecutive threads on contiguous memory.
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int idx = t + e * 128;
                int r, k;
                if (!trans_a) { r = idx / 8; k = idx % 8; } else { k = idx / 64; r = idx % 64; }
                const int gr = row0 + r, gk = k0 + k;
                As[r][k] = (gr < M && gk < K) ? op_at(A, lda, trans_a, gr, gk) : 0.0f;
                int c;
                if (!trans_b) { k = idx / 64; c = idx % 64; } else { c = idx / 8; k = idx % 8; }
                const int gc = col0 + c;
                const int gk2 = k0 + k;
                Bs[k][c] = (gc < N && gk2 < K) ? op_at(B, ldb, trans_b, gk2, gc) : 0.0f;
            }
            __syncthreads();
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(fa[i], &As[wr + 16 * i][0], 8 + 4);
#pragma unroll
                for (int e = 0; e < fa[i].num_elements; ++e) fa[i].x[e] = wmma::__float_to_tf32(fa[i].x[e]);
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                wmma::load_matrix_sync(fb[j], &Bs[0][wc + 16 * j], 64 + 4);
#pragma unroll
                for (int e = 0; e < fb[j].num_elements; ++e) fb[j].x[e] = wmma::__float_to_tf32(fb[j].x[e]);
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int j = 0; j < 2; ++j)
                wmma::store_matrix_sync(&Cs[wr + 16 * i][wc + 16 * j], acc[i][j], 64 + 4, wmma::mem_row_major);
        __syncthreads();
        for (int idx = t; idx < 64 * 64; idx += 128) {
            const int r = idx / 64, c = idx % 64, gr = row0 + r, gc = col0 + c;
            if (gr < M && gc < N) store_c(C, (long long)gr * ldc + gc, alpha, Cs[r][c], beta);
        }
    }
#endif
}
