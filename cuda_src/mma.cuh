// mma.cuh: the one place a kernel reaches the tensor cores. The warp-level matrix multiply, mma.sync
// m16n8k8 with TF32 inputs and float accumulators (sm_80+): d = A B + d for a 16 x 8 x 8 product that
// the 32 lanes of a warp hold between them; ldmatrix, the warp-wide shared-memory load that hands each
// lane its fragment registers (every lane of the warp must call either together: .aligned); and, at the
// end, Hopper's warpgroup MMA (wgmma, sm_90a) with its descriptor, fence, commit and wait.
//
// Fragment layout (PTX ISA, "Matrix fragments for mma.m16n8k8", .tf32): lane = 4 g + t, g = lane / 4 (the
// group), t = lane % 4 (the thread in the group). Each register holds one float whose top 19 bits (sign,
// 8 exponent bits, 10 mantissa bits: TF32) the tensor core reads; the 13 low bits are ignored, so a float
// passed unconverted is truncated toward zero (cvt.rna.tf32.f32 first would round to nearest instead).
//   A (16 x 8, row-major, M x K):  a[0] = A[g][t]   a[1] = A[g + 8][t]   a[2] = A[g][t + 4]   a[3] = A[g + 8][t + 4]
//   B (8 x 8, "col", K x N):       b[0] = B[t][g]   b[1] = B[t + 4][g]
//   C = D (16 x 8, M x N):         d[0] = D[g][2t]  d[1] = D[g][2t + 1]  d[2] = D[g + 8][2t]  d[3] = D[g + 8][2t + 1]
// Rows of A and D (columns of B and D) may be permuted if the epilogue writes D with the same permutation;
// gemm_v2.cu's TF32 kernel uses that to read two rows of A with one 8-byte load.
//
// ldmatrix_x4 (ldmatrix .m8n8.x4 .b16, sm_75+, read here as 32-bit words): four 8 x 4-word matrices whose 8
// rows of 16 bytes each sit anywhere in shared memory; lane 8j + i passes the address of row i of matrix
// j, and gets r[j] = word t of row g of matrix j. With A's 16 x 8 tile stored K-contiguous, matrices (rows
// 0-7, k 0-3), (rows 8-15, k 0-3), (rows 0-7, k 4-7), (rows 8-15, k 4-7) give exactly a[0..3]; with B
// stored K-contiguous (s[n][k]), matrices (k 0-3), (k 4-7) of 8 columns give b[0], b[1]. So TF32
// fragments of K-contiguous tiles load with no register moves ("ldmatrix on pairs of halves").
//
// On the GPU each is one instruction (SASS: HMMA.1688.F32.TF32, LDSM.16.M88.4). On the simulator
// (__CUDA_ARCH_SIM__) they are gpublas/runtime/sim/mma_sync.h's warp-collective emulations: each lane publishes its
// fragments (its row address), the warp meets at a barrier, each lane computes its own four elements of D
// (reads its words), truncating the mma inputs to TF32 as the tensor core reads them.
#pragma once

#if defined(__CUDA_ARCH_SIM__) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define GPUBLAS_HAS_MMA_TF32 1
#endif

__device__ __forceinline__ void mma_tf32_m16n8k8(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH_SIM__)
    gpublas_sim::mma_sync_m16n8k8_tf32(d, a, b);
#elif defined(GPUBLAS_HAS_MMA_TF32)
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row) {
#if defined(__CUDA_ARCH_SIM__)
    gpublas_sim::ldmatrix_sync_x4(r, row);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}

// ---------------------------------------------------------------------------------------------------
// 16-bit inputs (sm_80+): mma.sync m16n8k16 .bf16 / .f16 with float accumulators, and ldmatrix .trans
// ---------------------------------------------------------------------------------------------------
// Fragment layout (PTX ISA, "Matrix fragments for mma.m16n8k16", .f16/.bf16): each 32-bit register holds
// two 16-bit elements, the lower-indexed one in its low half; lane = 4 g + t as above.
//   A (16 x 16, row, M x K):  a[0] = A[g][2t, 2t+1]  a[1] = A[g + 8][2t, 2t+1]  a[2] = A[g][2t+8, 2t+9]
//                             a[3] = A[g + 8][2t+8, 2t+9]
//   B (16 x 8, col, K x N):   b[0] = B[2t, 2t+1][g]  b[1] = B[2t+8, 2t+9][g]
//   C = D (16 x 8, float):    as m16n8k8's: d[0] = D[g][2t]  d[1] = D[g][2t + 1]  d[2] = D[g + 8][2t] ...
// ldmatrix_x4 gives lane 4g + t the elements (2t, 2t+1) of row g of each 8 x 8 b16 matrix (row i of matrix j
// at the address lane 8j + i names): an operand stored K-contiguous (A as s[m][k], B as s[n][k]) loads with
// its rows as matrix rows. ldmatrix_x4_trans gives it (rows 2t, 2t+1) of column g instead: an operand
// stored k-major (A as s[k][m], B as s[k][n]) loads with its K rows as matrix rows. Either way one x4
// is one 16 x 16 A tile or two 16 x 8 B tiles, with no register moves.
// On the GPU: HMMA.16816.F32.BF16 / HMMA.16816.F32, LDSM.16.M88.4 / LDSM.16.MT88.4. On the simulator
// (mma_sync.h) exchanged per warp as the TF32 ones; the products of 16-bit inputs are exact in float.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
#if defined(__CUDA_ARCH_SIM__)
    gpublas_sim::ldmatrix_sync_x4_trans(r, row);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}

// d += A B for 16-bit A (16 x 16) and B (16 x 8): BF16 true for bfloat16 inputs, false for float16.
template <bool BF16>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if defined(__CUDA_ARCH_SIM__)
    gpublas_sim::mma_sync_m16n8k16<BF16>(d, a, b);
#elif defined(GPUBLAS_HAS_MMA_TF32)  // sm_80+, as TF32's
    if constexpr (BF16)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// ---------------------------------------------------------------------------------------------------
// wgmma (sm_90a: Hopper's warpgroup MMA; GPUBLAS_HAS_WGMMA where the target has it)
// ---------------------------------------------------------------------------------------------------
// wgmma.mma_async m64nNk8 .tf32: the 4 warps of a warpgroup (128 threads, warp w = threadIdx.x / 32 % 4)
// multiply a 64 x 8 A by an 8 x N B into a 64 x N float D, asynchronously: the issue returns at once,
// wgmma_commit() closes the group of products issued so far and wgmma_wait<n>() waits until at most n
// groups are still running.
// Registers a wgmma reads or writes must not be touched until it completes, and wgmma_fence() must come
// between other writes to them and the next wgmma (PTX ISA, "Asynchronous Warpgroup Level Matrix
// Operations"). Here A comes from registers (the .rs form: warp w holds rows 16w .. 16w + 15 in
// mma.m16n8k8's A layout above) and B from shared memory through a matrix descriptor; TF32 takes B
// "K-major" only (stored N x 8, K contiguous). D for N = 256, 128 floats a thread:
//   d[i] = D[16w + g + 8 ((i >> 1) & 1)][8 (i >> 2) + 2t + (i & 1)]
// (mma.m16n8k8's D layout, repeated over the 32 column groups of 8).
//
// B's layout (wgmma_desc_sw64): rows of 16 floats (64 bytes: one K step of 16), 8-row groups 512 bytes
// apart, "64-byte swizzle": the hardware XORs address bits 4-5 (the 16-byte chunk in the row) with bits
// 7-8 ((row / 2) % 4) of the shared-window address, so the tile must start 512-byte aligned. That is
// gemm_tf32.cu's K-contiguous Tf32Tile (chunk ^ (row / 2 % 4)). The descriptor of the k-step at byte
// 32 ks of each row starts 32 ks bytes in.
//
// On the simulator (gpublas/runtime/sim/mma_sync.h) the product is computed at issue, each lane computing its
// own elements of D from its warp's A registers and B read through the descriptor; fence, commit and
// wait are then no-ops.
#if defined(__CUDA_ARCH_SIM__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GPUBLAS_HAS_WGMMA 1
#endif

// The descriptor of a K-major, 64-byte-swizzled B at shared-window address `addr`: start address (bits
// 0-13, in 16-byte units), leading byte offset (16-29; unused by swizzled K-major layouts: 1), stride
// byte offset (32-45: 512 bytes from one 8-row group to the next), layout type (62-63: 2 = 64-byte swizzle).
__device__ __forceinline__ unsigned long long wgmma_desc_sw64(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | 1ull << 16 | (unsigned long long)(512 >> 4) << 32 |
           2ull << 62;
}

// 16-bit B may also be stored "MN-major" (imm-trans-b 1: N contiguous, as a k-major s[k][n] tile), PTX ISA
// "Shared Memory Matrix Layout", canonical layout ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO)) with T = 8
// 16-bit values a 16-byte chunk and the 128-byte swizzle: B is made of 1024-byte atoms of 8 K rows x 64 N
// values (128 bytes a row), row k of an atom at byte 128 (k % 8) of it, its 16-byte chunk c of N at chunk
// c ^ (k % 8) (address bits 4-6 ^= bits 7-9: the atom starts 1024-byte aligned). `lbo`: the bytes from one
// atom to the next along N (64 values on); `sbo`: along K (8 rows on). Layout type 1 = 128-byte swizzle.
__device__ __forceinline__ unsigned long long wgmma_desc_sw128_mn(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (unsigned long long)((lbo & 0x3FFFF) >> 4) << 16 |
           (unsigned long long)((sbo & 0x3FFFF) >> 4) << 32 | 1ull << 62;
}

// Makes this thread's completed shared-memory writes (ordinary stores, or cp.async copies once waited for)
// visible to the async proxy, through which wgmma reads shared memory (PTX ISA: a cross-proxy fence;
// sm_90). A thread fences its own writes, then a barrier hands them to the warpgroups that read them.
__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__CUDA_ARCH_SIM__)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// The shared-window address of p (a pointer into dynamic shared memory).
__device__ __forceinline__ unsigned shared_address(const void* p) {
#if defined(__CUDA_ARCH_SIM__)
    return gpublas_sim::shared_window_address(p);
#else
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
#endif
}

// Keeps the compiler from moving accesses to a wgmma's registers (accumulators, A fragments) across a
// fence or wait, and from reusing them before it: they count as read and written here.
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R]) {
#if !defined(__CUDA_ARCH_SIM__)
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
#endif
}
template <int R, int C>
__device__ __forceinline__ void wgmma_fence_operands(unsigned (&a)[R][C]) {
#if !defined(__CUDA_ARCH_SIM__)
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < C; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
#endif
}

template <int R>
__device__ __forceinline__ void wgmma_fence(float (&d)[R]) {
    wgmma_fence_operands(d);
#if defined(GPUBLAS_HAS_WGMMA) && !defined(__CUDA_ARCH_SIM__)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if defined(GPUBLAS_HAS_WGMMA) && !defined(__CUDA_ARCH_SIM__)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

// Waits until at most PENDING committed groups are still running (0: all done).
template <int PENDING, int R>
__device__ __forceinline__ void wgmma_wait(float (&d)[R]) {
#if defined(GPUBLAS_HAS_WGMMA) && !defined(__CUDA_ARCH_SIM__)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(PENDING) : "memory");
#endif
    wgmma_fence_operands(d);
}

// The 128 accumulator operands of an m64n256 wgmma with float D (%0 .. %127) and their constraints.
#define WGMMA_D128                                                                                          \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                  \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                         \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                         \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                         \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                         \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                         \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "             \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define WGMMA_D8(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
                       "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGMMA_D128_OUT(d)                                                                                   \
    WGMMA_D8(d, 0), WGMMA_D8(d, 8), WGMMA_D8(d, 16), WGMMA_D8(d, 24), WGMMA_D8(d, 32), WGMMA_D8(d, 40),       \
    WGMMA_D8(d, 48), WGMMA_D8(d, 56), WGMMA_D8(d, 64), WGMMA_D8(d, 72), WGMMA_D8(d, 80), WGMMA_D8(d, 88),     \
    WGMMA_D8(d, 96), WGMMA_D8(d, 104), WGMMA_D8(d, 112), WGMMA_D8(d, 120)

// d += A B for A 64 x 8 (registers a, as above) and B 8 x 256 (descriptor desc_b), TF32 inputs.
__device__ __forceinline__ void wgmma_m64n256k8_tf32_rs(float (&d)[128], const unsigned (&a)[4],
                                                        unsigned long long desc_b) {
#if defined(__CUDA_ARCH_SIM__)
    gpublas_sim::wgmma_m64nNk8_tf32_rs<256>(d, a, desc_b);
#elif defined(GPUBLAS_HAS_WGMMA)
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " WGMMA_D128 ", {%128, %129, %130, %131}, "
                 "%132, p, 1, 1;\n}\n"
                 : WGMMA_D128_OUT(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));  // %133: scale-d = 1, D += A B
#endif
}

// d += A B for 16-bit A 64 x 16 (registers a: warp w's rows 16w .. 16w + 15 in mma.m16n8k16's A layout) and
// B 16 x 256 (descriptor desc_b: K-major as for TF32, imm-trans-b 0, or with TRANS_B MN-major, imm-trans-b 1,
// wgmma_desc_sw128_mn's layout); BF16 true: bfloat16, else float16. D's layout is the TF32 one above (m16n8's
// D over 32 column groups of 8).
template <bool BF16, bool TRANS_B = false>
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[128], const unsigned (&a)[4],
                                                    unsigned long long desc_b) {
#if defined(__CUDA_ARCH_SIM__)
    gpublas_sim::wgmma_m64nNk16_rs<256, BF16, TRANS_B>(d, a, desc_b);
#elif defined(GPUBLAS_HAS_WGMMA)
    if constexpr (BF16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WGMMA_D128 ", {%128, %129, %130, %131}, "
                     "%132, p, 1, 1, %134;\n}\n"
                     : WGMMA_D128_OUT(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(int(TRANS_B)));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WGMMA_D128 ", {%128, %129, %130, %131}, "
                     "%132, p, 1, 1, %134;\n}\n"
                     : WGMMA_D128_OUT(d)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(int(TRANS_B)));
#endif
}
