// mma_sync.h: the tensor cores' warp-level mma.sync and ldmatrix (PTX), simulated warp-collectively: the
// sim side of cuda_src/mma.cuh's mma_tf32_m16n8k8 (m16n8k8, TF32 inputs, float accumulators) and
// ldmatrix_x4 (four 8 x 8 b16 matrices, read as 8 x 4 words). Fragment layouts are documented there and
// are the GPU's, lane for lane.
//
// Each lane writes its A and B registers to its slot of a per-warp scratch (one per OS worker, like
// __shared__ memory), then the warp meets at a warp barrier (fibers.h's warp_exchange, whose parity
// the scratch follows, so a slot is not rewritten before every lane has read it); each lane then reads
// the rows of A and columns of B its own D elements need and computes them. As the tensor core, the
// product reads the top 19 bits of each input (TF32: the low 13 mantissa bits truncated); the products
// of TF32 values are exact in float and are added to C in K order, in float.
// ldmatrix: each lane publishes its row address through the warp exchange, then reads its four words
// from the rows other lanes named (shared memory does not change between: no lane of the warp writes it
// until all have read, and other warps' writes to it wait for a __syncthreads).
// mma.sync m16n8k16 with bf16/f16 inputs and ldmatrix .trans (mma.cuh's mma_m16n8k16, ldmatrix_x4_trans) the
// same way: 16-bit products are exact in float, added to C in K order.
// wgmma (cuda_src/mma.cuh's wgmma_m64n256k8_tf32_rs, wgmma_m64n256k16_rs: Hopper's warpgroup MMA, A from registers, B from
// shared memory through a descriptor): computed at issue, so the asynchronous product has landed before
// the next statement and fence / commit / wait need nothing. Each warp of the warpgroup exchanges its A
// registers as mma.sync's do (warp w's rows 16w .. 16w + 15 come only from warp w), and each lane reads
// its columns of B itself, through the descriptor as the hardware does: start address, leading and stride
// byte offsets, K-major or (16-bit, imm-trans-b 1) MN-major, and the 128-, 64- or 32-byte swizzle on
// shared-window addresses (offsets into the block's dynamic shared memory: shared_window_address); the
// interleaved layout (type 0) is refused.
// Limits: every lane of the warp must take part, as .aligned requires on the GPU (a lane that exited
// makes the launch fail); the accumulation order inside one mma is K order, where the GPU's is its own,
// so results can differ from a GPU's in the last bits of float, never in the TF32 rounding of inputs.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "buffer.h"

#include "cuda_fp16.h"  // half_bits_to_float
#include "scheduler.h"

namespace gpublas_sim {
struct MmaTf32Slot { uint32_t a[4], b[2]; unsigned stamp; };

static inline float tf32_input(uint32_t bits) {
    bits &= 0xffffe000u;
    float v; std::memcpy(&v, &bits, 4); return v;
}

static inline bool warp_all_present(const WarpSlot* s, unsigned stamp, const char* what) {
    for (unsigned i = 0; i < 32; ++i)
        if (s[i].stamp != stamp) {
            char msg[160];
            std::snprintf(msg, sizeof msg, "%s with lanes of the warp missing: every lane must take part (.aligned)",
                          what);
            tls_worker->launch->fail(msg);
            return false;
        }
    return true;
}

// Publishes this lane's fragment registers to its warp and waits for every lane's: the warp's slots
// (nullptr, the launch failed, when a lane is missing).
static inline const MmaTf32Slot* mma_exchange(const unsigned (&a)[4], unsigned b0, unsigned b1, const char* what) {
    static thread_local Buffer<MmaTf32Slot> scratch;  // [warp][parity][lane]
    Worker* w = tls_worker;
    if (w->fast) { misuse(what); return nullptr; }
    const unsigned lane = w->cur->linear & 31, warp = w->cur->linear >> 5, stamp = w->cur->warp_gen;
    const size_t need = size_t(w->nthreads + 31) / 32 * 64;
    if (scratch.size() < need) scratch.resize(need, MmaTf32Slot{{0, 0, 0, 0}, {0, 0}, ~0u});
    MmaTf32Slot* slots = &scratch[size_t(warp) * 64 + (stamp & 1) * 32];
    slots[lane] = MmaTf32Slot{{a[0], a[1], a[2], a[3]}, {b0, b1}, stamp};
    unsigned stamp_out, lane_out;
    WarpSlot* present = warp_exchange(0, stamp_out, lane_out);  // every lane's fragments are in
    return warp_all_present(present, stamp, what) ? slots : nullptr;
}

// A[row][k] of the 16 x 8 A the warp's slots hold: lane 4 (row % 8) + k % 4, register (row >= 8) + 2 (k >= 4).
static inline float mma_a(const MmaTf32Slot* slots, unsigned row, unsigned k) {
    return tf32_input(slots[4 * (row & 7) + (k & 3)].a[(row >> 3) + 2 * (k >> 2)]);
}

static inline void mma_sync_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    const MmaTf32Slot* slots = mma_exchange(a, b[0], b[1], "mma.sync (mma_tf32_m16n8k8)");
    if (!slots) return;
    const unsigned lane = tls_worker->cur->linear & 31, g = lane >> 2, t = lane & 3;
    for (int e = 0; e < 4; ++e) {
        const unsigned row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
        float acc = d[e];
        for (unsigned k = 0; k < 8; ++k)  // B[k][col] sits in lane 4 col + k % 4, register (k >= 4)
            acc += mma_a(slots, row, k) * tf32_input(slots[4 * col + (k & 3)].b[k >> 2]);
        d[e] = acc;
    }
}

// A 16-bit input as the tensor core reads it: bfloat16 (BF16) or float16 bits, exactly as a float.
template <bool BF16>
static inline float b16_input(uint32_t bits) {
    if (!BF16) return half_bits_to_float(uint16_t(bits));
    const uint32_t x = bits << 16;
    float v; std::memcpy(&v, &x, 4); return v;
}

// Element `half` (0: low, 1: high 16 bits) of a register.
static inline uint32_t b16_of(uint32_t reg, unsigned half) { return reg >> (16 * half) & 0xffffu; }

// A[row][k] of the 16 x 16 A the warp's slots hold (mma.m16n8k16): lane 4 (row % 8) + k % 8 / 2, register
// (row >= 8) + 2 (k >= 8), half k % 2.
template <bool BF16>
static inline float mma_a16(const MmaTf32Slot* slots, unsigned row, unsigned k) {
    return b16_input<BF16>(b16_of(slots[4 * (row & 7) + (k & 7) / 2].a[(row >> 3) + 2 * (k >> 3)], k & 1));
}

template <bool BF16>
static inline void mma_sync_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    const MmaTf32Slot* slots = mma_exchange(a, b[0], b[1], "mma.sync (mma_m16n8k16)");
    if (!slots) return;
    const unsigned lane = tls_worker->cur->linear & 31, g = lane >> 2, t = lane & 3;
    for (int e = 0; e < 4; ++e) {
        const unsigned row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
        float acc = d[e];
        for (unsigned k = 0; k < 16; ++k)  // B[k][col] sits in lane 4 col + k % 8 / 2, register (k >= 8), half k % 2
            acc += mma_a16<BF16>(slots, row, k) *
                   b16_input<BF16>(b16_of(slots[4 * col + (k & 7) / 2].b[k >> 3], k & 1));
        d[e] = acc;
    }
}

// The offset of p in the block's dynamic shared memory: the simulator's shared window.
static inline unsigned shared_window_address(const void* p) {
    const char* base = static_cast<const char*>(dynamic_shared());
    const Worker* w = tls_worker;
    const size_t size = w->dyn_smem.size() - size_t(base - w->dyn_smem.data());
    const char* q = static_cast<const char*>(p);
    if (q < base || q >= base + size) {
        tls_worker->launch->fail("a shared-memory address of something outside dynamic shared memory "
                                 "(the simulator's shared window holds only that)");
        return 0;
    }
    return unsigned(q - base);
}

// Where B[k][col] (ITEM bytes) sits, read through descriptor desc as the hardware does: the PTX ISA's
// canonical swizzled layouts, W = 128, 64 or 32 bytes of swizzle (layout type 1, 2, 3), T = 16 / ITEM values
// a 16-byte chunk. K-major (imm-trans-b 0; ((8, m), (T, 2k)) : ((W / 16 T, SBO), (1, T))): column col is a
// row of W bytes, k along it, 8-row groups SBO bytes apart. MN-major (imm-trans-b 1, 16-bit only;
// ((T, W / 16, m), (8, k)) : ((1, T, LBO), (W / 16 T, SBO))): K row k is W bytes of W / ITEM columns, 8-row
// groups SBO bytes apart and the next W / ITEM columns LBO bytes on. Then the swizzle: address bits 4 ..
// (the 16-byte chunk in a W-byte row) ^= bits 7 .. (the row in an 8-row atom). nullptr (the launch failed)
// for the interleaved layout (type 0) or past dynamic shared memory.
template <unsigned ITEM, bool MN_MAJOR>
static inline const char* wgmma_b_at(uint64_t desc, unsigned k, unsigned col) {
    Worker* w = tls_worker;
    const unsigned type = unsigned(desc >> 62);
    if (type == 0) {
        w->launch->fail("wgmma: only the swizzled B layouts (descriptor layout type 1, 2, 3) are simulated");
        return nullptr;
    }
    const unsigned W = 256u >> type;  // 1: 128, 2: 64, 3: 32 bytes
    const unsigned start = unsigned(desc & 0x3FFF) << 4, lbo = unsigned(desc >> 16 & 0x3FFF) << 4,
                   sbo = unsigned(desc >> 32 & 0x3FFF) << 4;
    const char* base = static_cast<const char*>(dynamic_shared());
    const size_t size = w->dyn_smem.size() - size_t(base - w->dyn_smem.data());
    unsigned addr = MN_MAJOR ? start + col * ITEM / W * lbo + k / 8 * sbo + k % 8 * W + col * ITEM % W
                             : start + col / 8 * sbo + col % 8 * W + k * ITEM;
    addr ^= (addr >> 7 & (W / 16 - 1)) << 4;  // the swizzle
    if (addr + ITEM > size) {
        w->launch->fail("wgmma: the B descriptor reaches past the block's dynamic shared memory");
        return nullptr;
    }
    return base + addr;
}

// D (64 x N) += A (64 x K, the warps' registers) B (K x N in shared memory via desc), as wgmma.mma_async
// m64nNk8 .tf32 (K = 8, B K-major) or m64nNk16 .bf16/.f16 (K = 16, B K-major or, MN_MAJOR, imm-trans-b 1)
// with A in registers; d[i] = D[16w + g + 8 ((i >> 1) & 1)][8 (i >> 2) + 2t + (i & 1)]. A(slots, row, k) and
// B(bytes) read one input of A and of B (B's at its address) as the tensor core does.
template <int N, unsigned K, unsigned ITEM, bool MN_MAJOR, class ReadA, class ReadB>
static inline void wgmma_rs(float (&d)[N / 2], const unsigned (&a)[4], uint64_t desc, const char* what, ReadA A,
                            ReadB B) {
    const MmaTf32Slot* slots = mma_exchange(a, 0, 0, what);
    if (!slots) return;
    const unsigned lane = tls_worker->cur->linear & 31, g = lane >> 2, t = lane & 3;
    for (int i = 0; i < N / 2; ++i) {
        const unsigned row = g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t + (i & 1);
        float acc = d[i];
        for (unsigned k = 0; k < K; ++k) {
            const char* p = wgmma_b_at<ITEM, MN_MAJOR>(desc, k, col);
            if (!p) return;
            acc += A(slots, row, k) * B(p);
        }
        d[i] = acc;
    }
}

template <int N>
static inline void wgmma_m64nNk8_tf32_rs(float (&d)[N / 2], const unsigned (&a)[4], uint64_t desc) {
    wgmma_rs<N, 8, 4, false>(d, a, desc, "wgmma (wgmma_m64n256k8_tf32_rs)", mma_a, [](const char* p) {
        uint32_t bits;
        std::memcpy(&bits, p, 4);
        return tf32_input(bits);
    });
}

template <int N, bool BF16, bool MN_MAJOR>
static inline void wgmma_m64nNk16_rs(float (&d)[N / 2], const unsigned (&a)[4], uint64_t desc) {
    wgmma_rs<N, 16, 2, MN_MAJOR>(d, a, desc, "wgmma (wgmma_m64n256k16_rs)", mma_a16<BF16>, [](const char* p) {
        uint16_t bits;
        std::memcpy(&bits, p, 2);
        return b16_input<BF16>(bits);
    });
}

static inline void ldmatrix_sync_x4(unsigned (&r)[4], const void* row) {
    unsigned stamp, lane;
    const uintptr_t mine = reinterpret_cast<uintptr_t>(row);
    WarpSlot* s = warp_exchange(mine, stamp, lane);
    if (mine % 16) tls_worker->launch->fail("ldmatrix (ldmatrix_x4): a row address not 16-byte aligned");
    if (mine % 16 || !warp_all_present(s, stamp, "ldmatrix (ldmatrix_x4)")) return;
    for (unsigned j = 0; j < 4; ++j)
        std::memcpy(&r[j], reinterpret_cast<const char*>(s[8 * j + lane / 4].value) + 4 * (lane % 4), 4);
}

// ldmatrix .trans: lane 4g + t gets, of each matrix j, the 16-bit elements g of rows 2t (low half) and 2t + 1.
static inline void ldmatrix_sync_x4_trans(unsigned (&r)[4], const void* row) {
    unsigned stamp, lane;
    const uintptr_t mine = reinterpret_cast<uintptr_t>(row);
    WarpSlot* s = warp_exchange(mine, stamp, lane);
    if (mine % 16) tls_worker->launch->fail("ldmatrix (ldmatrix_x4_trans): a row address not 16-byte aligned");
    if (mine % 16 || !warp_all_present(s, stamp, "ldmatrix (ldmatrix_x4_trans)")) return;
    const unsigned g = lane / 4, t = lane % 4;
    for (unsigned j = 0; j < 4; ++j) {
        uint16_t lo, hi;
        std::memcpy(&lo, reinterpret_cast<const char*>(s[8 * j + 2 * t].value) + 2 * g, 2);
        std::memcpy(&hi, reinterpret_cast<const char*>(s[8 * j + 2 * t + 1].value) + 2 * g, 2);
        r[j] = uint32_t(lo) | uint32_t(hi) << 16;
    }
}
}  // namespace gpublas_sim
