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

struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(gpublas_sim::narrow_float(f, gpublas_sim::BFLOAT16)) {}
    __nv_bfloat16(double d) : __x(gpublas_sim::narrow_double(d, gpublas_sim::BFLOAT16)) {}
    explicit __nv_bfloat16(__half h) : __nv_bfloat16((float)h) {}
    __nv_bfloat16(short v) : __x(gpublas_sim::narrow_int(v, gpublas_sim::BFLOAT16)) {}
    __nv_bfloat16(unsigned short v) : __x(gpublas_sim::narrow_int(v, gpublas_sim::BFLOAT16)) {}
    __nv_bfloat16(int v) : __x(gpublas_sim::narrow_int(v, gpublas_sim::BFLOAT16)) {}
    __nv_bfloat16(unsigned int v) : __x(gpublas_sim::narrow_int(v, gpublas_sim::BFLOAT16)) {}
    __nv_bfloat16(long v) : __x(gpublas_sim::narrow_int(v, gpublas_sim::BFLOAT16)) {}
    __nv_bfloat16(long long v) : __x(gpublas_sim::narrow_int(v, gpublas_sim::BFLOAT16)) {}
    __nv_bfloat16(unsigned long v) : __x(gpublas_sim::narrow(false, v, 0, 8, -126, 127)) {}
    __nv_bfloat16(unsigned long long v) : __x(gpublas_sim::narrow(false, v, 0, 8, -126, 127)) {}
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
    operator float() const {
        const uint32_t x = (uint32_t)__x << 16;
        float f;
        std::memcpy(&f, &x, 4);
        return f;
    }
    operator signed char() const { return (signed char)(float)*this; }
    operator unsigned char() const { return (unsigned char)(float)*this; }
    operator short() const { return (short)(float)*this; }
    operator unsigned short() const { return (unsigned short)(float)*this; }
    operator int() const { return (int)(float)*this; }
    operator unsigned int() const { return (unsigned int)(float)*this; }
    operator long() const { return (long)(float)*this; }
    operator unsigned long() const { return (unsigned long)(float)*this; }
    operator long long() const { return (long long)(float)*this; }
    operator unsigned long long() const { return (unsigned long long)(float)*this; }
    operator bool() const { return (__x & 0x7fff) != 0; }
    __nv_bfloat16& operator=(float f) { return *this = __nv_bfloat16(f); }
    __nv_bfloat16& operator=(double d) { return *this = __nv_bfloat16(d); }
};

inline __half::__half(__nv_bfloat16 b) : __half((float)b) {}

static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short x) { return __nv_bfloat16_raw{x}; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
static inline __nv_bfloat16 __short2bfloat16_rn(short v) { return __nv_bfloat16(v); }
static inline __nv_bfloat16 __int2bfloat16_rn(int v) { return __nv_bfloat16(v); }
static inline __nv_bfloat16 __uint2bfloat16_rn(unsigned int v) { return __nv_bfloat16(v); }
static inline __nv_bfloat16 __ll2bfloat16_rn(long long v) { return __nv_bfloat16(v); }
static inline __nv_bfloat16 __ull2bfloat16_rn(unsigned long long v) { return __nv_bfloat16(v); }

GPUBLAS_SIM_16BIT_OPS(__nv_bfloat16, __bfloat162float, __float2bfloat16_rn, 0x7f80)
