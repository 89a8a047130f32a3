// cuda_fp16.h: CUDA's __half (IEEE binary16) for the `sim` backend; cuda_bf16.h builds
// __nv_bfloat16 on the same rounding. The GPU build includes NVIDIA's headers instead.
//
// Emulates, bit for bit as CUDA defines them: __half_raw; __half with the implicit conversions of
// cuda_fp16.h (from float and double rounding to nearest even, from the integer types rounding to
// nearest even, to float exactly, to the integer types truncating, to bool: nonzero); the
// conversions __float2half(_rn), __double2half, __int2half_rn, __uint2half_rn, __ll2half_rn,
// __ull2half_rn, __short2half_rn, __half2float, __half_as_ushort, __ushort_as_half; the arithmetic
// __hadd, __hsub, __hmul, __hdiv, __hneg, __habs and the operators + - * / += -= *= /= and unary -;
// the comparisons __heq, __hne, __hneu, __hlt, __hle, __hgt, __hge, __hisnan, __hisinf, __hmax,
// __hmin and the operators == != < <= > >=. Every rounding is one rounding of the exact value
// (gpublas_sim::narrow), so a + b on halves is the float sum rounded once, as the GPU computes it
// (float holds a sum, product or quotient of halves precisely enough: 24 >= 2 * 11 + 2 bits).
// A NaN result is CUDA's canonical NaN, 0x7fff, whatever the input's sign and payload (__hneg and
// __habs too, and __half2float gives float's 0x7fffffff), as the headers' host paths compute it:
// tests/test_halftypes_headers.py builds one program against these headers and NVIDIA's and compares
// every result bit for bit.
// Limits: no __half2 (paired) arithmetic, no __hfma (one rounding of a*b+c needs more than float),
// no hexp/hlog-style math functions, no _rz/_rd/_ru roundings.
#pragma once

#include <cstdint>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>  // F16C, AVX2 where -march=native has them
#endif

namespace gpublas_sim {

// sign | M * 2^E rounded to nearest even into a binary format of p significand bits (hidden one
// included) and exponents emin..emax, as its bit pattern: subnormals, the carry into the next
// binade and overflow to infinity all fall out of one shift and one rounding.
static inline uint16_t narrow(bool negative, uint64_t M, int E, int p, int emin, int emax) {
    const uint32_t sign = negative ? 0x8000u : 0u;  // bit 15 in both formats
    if (M == 0) return (uint16_t)sign;
    const int top = 63 - __builtin_clzll(M) + E;  // exponent of M's leading bit
    const int lsb = (top > emin ? top : emin) - (p - 1);  // exponent of the result's last bit
    const int s = lsb - E;  // bits of M below the result's last bit
    uint64_t r;
    if (s <= 0) {
        r = M << -s;  // exact
    } else if (s >= 64) {
        r = (s == 64 && M > (1ull << 63)) ? 1 : 0;  // below half an ulp rounds to zero; a tie to even zero
    } else {
        r = M >> s;
        const uint64_t rem = M & ((1ull << s) - 1), half = 1ull << (s - 1);
        r += rem > half || (rem == half && (r & 1));
    }
    const int bias = 1 - emin;
    const uint64_t inf = (uint64_t)(emax + bias + 1) << (p - 1);
    const uint64_t bits = top < emin ? r : ((uint64_t)(top + bias - 1) << (p - 1)) + r;  // r carries into the exponent
    return (uint16_t)(sign | (bits < inf ? bits : inf));
}

struct Format {
    int p, emin, emax;
};
static constexpr Format BINARY16 = {11, -14, 15}, BFLOAT16 = {8, -126, 127};

// A float rounded to nearest even into binary16 or bfloat16. bfloat16 is a float's top half (the same exponent
// range, subnormals included), so adding 0x7fff plus the kept half's last bit and dropping the low half rounds it
// (a carry into the exponent is the next binade or infinity); binary16 with F16C is one vcvtps2ph. Both were
// compared with narrow()'s general path on all 2^32 floats: the same bits (narrow() made a bfloat16 LayerNorm on
// the simulator ~7x slower than a float one). A NaN is CUDA's canonical NaN.
static inline uint16_t narrow_float(float f, Format t) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    if (t.p == 8) return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#if defined(__F16C__)
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#endif
    const uint32_t e = (x >> 23) & 0xff, m = x & 0x7fffff;
    const uint16_t inf = (uint16_t)(((1u << (15 - (t.p - 1))) - 1) << (t.p - 1)) | (x >> 31 << 15);
    if (e == 0xff) return m ? 0x7fff : inf;  // NaN: CUDA's canonical NaN
    return narrow(x >> 31, e ? m | 0x800000 : m, (e ? (int)e : 1) - 150, t.p, t.emin, t.emax);
}

static inline uint16_t narrow_double(double d, Format t) {
    uint64_t x;
    std::memcpy(&x, &d, 8);
    const uint64_t e = (x >> 52) & 0x7ff, m = x & 0xfffffffffffffull;
    const uint16_t inf = (uint16_t)(((1u << (15 - (t.p - 1))) - 1) << (t.p - 1)) | (uint16_t)(x >> 63 << 15);
    if (e == 0x7ff) return m ? 0x7fff : inf;
    return narrow(x >> 63, e ? m | (1ull << 52) : m, (e ? (int)e : 1) - 1075, t.p, t.emin, t.emax);
}

static inline uint16_t narrow_int(long long v, Format t) {
    const uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    return narrow(v < 0, mag, 0, t.p, t.emin, t.emax);
}

// A binary16 value exactly as a float; a NaN becomes float's canonical NaN (CUDA's host path). With F16C
// (x86's -march=native on any CPU since 2012) one vcvtph2ps, whose exact result only NaNs replace; else
// field by field.
static inline float half_bits_to_float(uint16_t h) {
#if defined(__F16C__)
    const float f = _cvtsh_ss(h);
    return (h & 0x7fff) > 0x7c00 ? __builtin_bit_cast(float, 0x7fffffffu) : f;
#else
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    uint32_t x;
    if (e == 0x1f) {
        x = m ? 0x7fffffffu : sign | 0x7f800000;  // a NaN becomes float's canonical NaN (CUDA's host path)
    } else if (e) {
        x = sign | ((e + 112) << 23) | (m << 13);
    } else {  // zero or subnormal: m * 2^-24, exact in float
        const float v = (float)m * 0x1p-24f;
        std::memcpy(&x, &v, 4);
        x |= sign;
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
#endif
}

// out[j] = half_bits_to_float(h[j]) for j < n: with F16C eight (four) at a time, one vcvtph2ps each and a
// blend that puts float's canonical NaN where the input was a NaN, the rest element by element.
static inline void halves_to_floats(const uint16_t* h, float* out, int n) {
    int j = 0;
#if defined(__F16C__) && defined(__AVX__)
    const __m256 nan8 = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (; j + 8 <= n; j += 8) {
        const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + j)));
        _mm256_storeu_ps(out + j, _mm256_blendv_ps(f, nan8, _mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
    }
    for (; j + 4 <= n; j += 4) {
        const __m128 f = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h + j)));
        _mm_storeu_ps(out + j, _mm_blendv_ps(f, _mm256_castps256_ps128(nan8), _mm_cmpunord_ps(f, f)));
    }
#endif
    for (; j < n; ++j) out[j] = half_bits_to_float(h[j]);
}

}  // namespace gpublas_sim

struct __nv_bfloat16;  // cuda_bf16.h

struct __half_raw {
    unsigned short x;
};

// The members both 16-bit types share (cuda_bf16.h uses it too): the raw and rounding constructors
// from float, double and every integer type, the conversions to float (TO_FLOAT of the bits), to the
// integer types (truncating) and to bool (nonzero), and assignment from float and double.
#define GPUBLAS_SIM_16BIT_MEMBERS(H, RAW, FMT, TO_FLOAT)                                                  \
    unsigned short __x;                                                                                 \
    H() = default;                                                                                      \
    H(const RAW& r) : __x(r.x) {}                                                                       \
    H(float f) : __x(gpublas_sim::narrow_float(f, FMT)) {}                                              \
    H(double d) : __x(gpublas_sim::narrow_double(d, FMT)) {}                                            \
    H(short v) : __x(gpublas_sim::narrow_int(v, FMT)) {}                                                \
    H(unsigned short v) : __x(gpublas_sim::narrow_int(v, FMT)) {}                                       \
    H(int v) : __x(gpublas_sim::narrow_int(v, FMT)) {}                                                  \
    H(unsigned int v) : __x(gpublas_sim::narrow_int(v, FMT)) {}                                         \
    H(long v) : __x(gpublas_sim::narrow_int(v, FMT)) {}                                                 \
    H(long long v) : __x(gpublas_sim::narrow_int(v, FMT)) {}                                            \
    H(unsigned long v) : __x(gpublas_sim::narrow(false, v, 0, FMT.p, FMT.emin, FMT.emax)) {}            \
    H(unsigned long long v) : __x(gpublas_sim::narrow(false, v, 0, FMT.p, FMT.emin, FMT.emax)) {}       \
    operator RAW() const { return RAW{__x}; }                                                           \
    operator float() const { return TO_FLOAT(__x); }                                                    \
    operator signed char() const { return (signed char)(float)*this; }                                  \
    operator unsigned char() const { return (unsigned char)(float)*this; }                              \
    operator short() const { return (short)(float)*this; }                                              \
    operator unsigned short() const { return (unsigned short)(float)*this; }                            \
    operator int() const { return (int)(float)*this; }                                                  \
    operator unsigned int() const { return (unsigned int)(float)*this; }                                \
    operator long() const { return (long)(float)*this; }                                                \
    operator unsigned long() const { return (unsigned long)(float)*this; }                              \
    operator long long() const { return (long long)(float)*this; }                                      \
    operator unsigned long long() const { return (unsigned long long)(float)*this; }                    \
    operator bool() const { return (__x & 0x7fff) != 0; }                                               \
    H& operator=(float f) { return *this = H(f); }                                                      \
    H& operator=(double d) { return *this = H(d); }

struct __attribute__((aligned(2))) __half {
    GPUBLAS_SIM_16BIT_MEMBERS(__half, __half_raw, gpublas_sim::BINARY16, gpublas_sim::half_bits_to_float)
    explicit __half(__nv_bfloat16 b);  // through float, defined in cuda_bf16.h
};

// CUDA's named conversions of one 16-bit type H, whose names spell it NAME (half, bfloat16):
// __ushort_as_NAME, __NAME_as_ushort, __NAME2float, __float2NAME(_rn), __double2NAME and the integer
// ones (__int2NAME_rn ...), each the constructor's or the conversion's one rounding.
#define GPUBLAS_SIM_16BIT_CONVERSIONS(H, NAME)                                                            \
    static inline H __ushort_as_##NAME(unsigned short x) { H h; h.__x = x; return h; }                   \
    static inline unsigned short __##NAME##_as_ushort(H h) { return h.__x; }                            \
    static inline float __##NAME##2float(H h) { return (float)h; }                                      \
    static inline H __float2##NAME(float f) { return H(f); }                                            \
    static inline H __float2##NAME##_rn(float f) { return H(f); }                                       \
    static inline H __double2##NAME(double d) { return H(d); }                                          \
    static inline H __short2##NAME##_rn(short v) { return H(v); }                                       \
    static inline H __int2##NAME##_rn(int v) { return H(v); }                                           \
    static inline H __uint2##NAME##_rn(unsigned int v) { return H(v); }                                 \
    static inline H __ll2##NAME##_rn(long long v) { return H(v); }                                      \
    static inline H __ull2##NAME##_rn(unsigned long long v) { return H(v); }

GPUBLAS_SIM_16BIT_CONVERSIONS(__half, half)

#define GPUBLAS_SIM_BITS(H, bits) ([] { H r; r.__x = (bits); return r; }())

// Arithmetic and comparisons of one 16-bit type H, through float (exact, see the header comment);
// cuda_bf16.h instantiates the same set for __nv_bfloat16.
#define GPUBLAS_SIM_16BIT_OPS(H, TO_FLOAT, FROM_FLOAT, INF)                                                \
    static inline H __hadd(H a, H b) { return FROM_FLOAT(TO_FLOAT(a) + TO_FLOAT(b)); }                       \
    static inline H __hsub(H a, H b) { return FROM_FLOAT(TO_FLOAT(a) - TO_FLOAT(b)); }                       \
    static inline H __hmul(H a, H b) { return FROM_FLOAT(TO_FLOAT(a) * TO_FLOAT(b)); }                       \
    static inline H __hdiv(H a, H b) { return FROM_FLOAT(TO_FLOAT(a) / TO_FLOAT(b)); }                       \
    static inline H __hneg(H a) { H r; r.__x = (a.__x & 0x7fff) > INF ? 0x7fff : a.__x ^ 0x8000; return r; }  \
    static inline H __habs(H a) { H r; r.__x = (a.__x & 0x7fff) > INF ? 0x7fff : a.__x & 0x7fff; return r; } \
    static inline bool __hisnan(H a) { return (a.__x & 0x7fff) > INF; }                                      \
    static inline int __hisinf(H a) { return (a.__x & 0x7fff) == INF ? (a.__x >> 15 ? -1 : 1) : 0; }          \
    static inline bool __heq(H a, H b) { return TO_FLOAT(a) == TO_FLOAT(b); }                                \
    static inline bool __hne(H a, H b) { return TO_FLOAT(a) < TO_FLOAT(b) || TO_FLOAT(a) > TO_FLOAT(b); }     \
    static inline bool __hneu(H a, H b) { return !(TO_FLOAT(a) == TO_FLOAT(b)); }                            \
    static inline bool __hlt(H a, H b) { return TO_FLOAT(a) < TO_FLOAT(b); }                                 \
    static inline bool __hle(H a, H b) { return TO_FLOAT(a) <= TO_FLOAT(b); }                                \
    static inline bool __hgt(H a, H b) { return TO_FLOAT(a) > TO_FLOAT(b); }                                 \
    static inline bool __hge(H a, H b) { return TO_FLOAT(a) >= TO_FLOAT(b); }                                \
    /* __hmax / __hmin: a NaN loses to a number, two NaNs give the canonical NaN, +0 > -0 */                \
    static inline H gpublas_sim_hpick(H a, H b, bool max) {                                                \
        if (__hisnan(a) && __hisnan(b)) return GPUBLAS_SIM_BITS(H, 0x7fff);                                    \
        if (__hisnan(a) || __hisnan(b)) return __hisnan(a) ? b : a;                                        \
        if (((a.__x | b.__x) & 0x7fff) == 0) return (a.__x >> 15) == max ? b : a; /* two zeros */         \
        return (TO_FLOAT(a) > TO_FLOAT(b)) == max ? a : b;                                                  \
    }                                                                                                       \
    static inline H __hmax(H a, H b) { return gpublas_sim_hpick(a, b, true); }                             \
    static inline H __hmin(H a, H b) { return gpublas_sim_hpick(a, b, false); }                            \
    static inline H operator+(const H& a, const H& b) { return __hadd(a, b); }                             \
    static inline H operator-(const H& a, const H& b) { return __hsub(a, b); }                             \
    static inline H operator*(const H& a, const H& b) { return __hmul(a, b); }                             \
    static inline H operator/(const H& a, const H& b) { return __hdiv(a, b); }                             \
    static inline H& operator+=(H& a, const H& b) { return a = __hadd(a, b); }                             \
    static inline H& operator-=(H& a, const H& b) { return a = __hsub(a, b); }                             \
    static inline H& operator*=(H& a, const H& b) { return a = __hmul(a, b); }                             \
    static inline H& operator/=(H& a, const H& b) { return a = __hdiv(a, b); }                             \
    static inline H operator+(const H& a) { return a; }                                                     \
    static inline H operator-(const H& a) { return __hneg(a); }                                             \
    static inline bool operator==(const H& a, const H& b) { return __heq(a, b); }                          \
    static inline bool operator!=(const H& a, const H& b) { return __hneu(a, b); }                         \
    static inline bool operator<(const H& a, const H& b) { return __hlt(a, b); }                           \
    static inline bool operator<=(const H& a, const H& b) { return __hle(a, b); }                          \
    static inline bool operator>(const H& a, const H& b) { return __hgt(a, b); }                           \
    static inline bool operator>=(const H& a, const H& b) { return __hge(a, b); }

GPUBLAS_SIM_16BIT_OPS(__half, __half2float, __float2half_rn, 0x7c00)
