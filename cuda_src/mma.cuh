// mma.cuh: the tensor cores' warp-level matrix multiply, mma.sync m16n8k8 with TF32 inputs and float
// accumulators (sm_80+), the one place a kernel reaches them: d = A B + d for a 16 x 8 x 8 product that
// the 32 lanes of a warp hold between them; and ldmatrix, the warp-wide shared-memory load that hands
// each lane its fragment registers. Every lane of the warp must call either together (.aligned).
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
// (__CUDA_ARCH_SIM__) they are gpublas/sim/mma_sync.h's warp-collective emulations: each lane publishes its
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

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const float* row) {
#if defined(__CUDA_ARCH_SIM__)
    gpublas_sim::ldmatrix_sync_x4(r, row);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}
