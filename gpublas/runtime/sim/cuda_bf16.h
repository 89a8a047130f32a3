// cuda_bf16.h: CUDA's __nv_bfloat16 for the `sim` backend (the GPU build includes NVIDIA's header).
//
// Emulates, bit for bit as CUDA defines them: __nv_bfloat16_raw; __nv_bfloat16 with cuda_bf16.h's
// implicit conversions (from float, double and the integer types rounding to nearest even, to float
// exactly, to the integer types truncating, to bool: nonzero); __float2bfloat16(_rn),
// __double2bfloat16, __int2bfloat16_rn, __uint2bfloat16_rn, __ll2bfloat16_rn, __ull2bfloat16_rn,
// __short2bfloat16_rn, __bfloat162float, __bfloat16_as_ushort, __ushort_as_bfloat16, and the same
// arithmetic, comparisons and operators as cuda_fp16.h's __half (one macro instantiates both), each
// the float result rounded once (24 >= 2 * 8 + 2 bits: as exact as the GPU's bf16 instructions).
// A NaN result is CUDA's canonical NaN, 0x7fff. Conversions between __half and __nv_bfloat16 go
// through float (explicit constructors, as CUDA's). Limits: cuda_fp16.h's.
#pragma once

#include "cuda_fp16.h"

struct __nv_bfloat16_raw {
    unsigned short x;
};

namespace gpublas_sim {
static inline float bfloat16_bits_to_float(uint16_t b) {  // the top half of a float
    const uint32_t x = (uint32_t)b << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

// out[j] = bfloat16_bits_to_float(b[j]) for j < n: with AVX2 eight (four) at a time (widen, shift into the top
// half), the rest element by element.
static inline void bfloat16s_to_floats(const uint16_t* b, float* out, int n) {
    int j = 0;
#if defined(__AVX2__)
    for (; j + 8 <= n; j += 8) {
        const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + j)));
        _mm256_storeu_ps(out + j, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
    }
    for (; j + 4 <= n; j += 4) {
        const __m128i x = _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + j)));
        _mm_storeu_ps(out + j, _mm_castsi128_ps(_mm_slli_epi32(x, 16)));
    }
#endif
    for (; j < n; ++j) out[j] = bfloat16_bits_to_float(b[j]);
}
}  // namespace gpublas_sim

struct __attribute__((aligned(2))) __nv_bfloat16 {
    GPUBLAS_SIM_16BIT_MEMBERS(__nv_bfloat16, __nv_bfloat16_raw, gpublas_sim::BFLOAT16,
                              gpublas_sim::bfloat16_bits_to_float)
    explicit __nv_bfloat16(__half h) : __nv_bfloat16((float)h) {}
};

inline __half::__half(__nv_bfloat16 b) : __half((float)b) {}

GPUBLAS_SIM_16BIT_CONVERSIONS(__nv_bfloat16, bfloat16)

namespace gpublas_sim {
// out[j] = (float)p[j] for j < n, the n values read as one run (vector instructions where the CPU has them):
// common.cuh's load_run_as on the simulator.
static inline void to_floats(const __half* p, float* out, int n) {
    halves_to_floats(reinterpret_cast<const uint16_t*>(p), out, n);
}
static inline void to_floats(const __nv_bfloat16* p, float* out, int n) {
    bfloat16s_to_floats(reinterpret_cast<const uint16_t*>(p), out, n);
}
}  // namespace gpublas_sim
GPUBLAS_SIM_16BIT_OPS(__nv_bfloat16, __bfloat162float, __float2bfloat16_rn, 0x7f80)
