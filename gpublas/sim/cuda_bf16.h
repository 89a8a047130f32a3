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
}  // namespace gpublas_sim

struct __attribute__((aligned(2))) __nv_bfloat16 {
    GPUBLAS_SIM_16BIT_MEMBERS(__nv_bfloat16, __nv_bfloat16_raw, gpublas_sim::BFLOAT16,
                              gpublas_sim::bfloat16_bits_to_float)
    explicit __nv_bfloat16(__half h) : __nv_bfloat16((float)h) {}
};

inline __half::__half(__nv_bfloat16 b) : __half((float)b) {}

GPUBLAS_SIM_16BIT_CONVERSIONS(__nv_bfloat16, bfloat16)
GPUBLAS_SIM_16BIT_OPS(__nv_bfloat16, __bfloat162float, __float2bfloat16_rn, 0x7f80)
