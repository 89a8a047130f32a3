// intrinsics.h: CUDA's warp-level intrinsics, atomics and math functions on the CPU.
//
// Emulates: __shfl_sync / _up / _down / _xor (any width that divides 32), __ballot_sync,
// __any_sync, __all_sync, __match_any_sync, __syncwarp and __activemask as warp barriers on the
// scheduler's per-warp slots (fibers.h: warp_exchange); __threadfence*; atomicAdd/Sub/And/Or/Xor/Exch/CAS/Max/Min on
// int, unsigned and unsigned long long and atomicAdd/Max/Min/Exch on float (Add on double) as real
// CPU atomics (blocks run on several OS threads); the fast-math intrinsics (__expf, __fdividef,
// __saturatef, the __*_rn roundings), the float overloads of exp, tanh, sqrt ... in the global
// namespace (CUDA's math API), bit tricks (__popc, __clz, __brev, __umulhi ...), the
// __float_as_int family, __ldg, and CUDA's by-value min/max overloads.
// Limits: a shuffle's mask only says whose values may be read (a lane outside it hands over all
// one bits, fibers.h's unmasked_lane; every live lane of the warp still meets at the exchange); a
// shuffle moves at most 8 bytes; the fast intrinsics are the exact libm
// functions (the GPU's approximations can differ from them in the last bits), tanhf the simulator's own
// (within 1 ulp);
// the explicit-rounding intrinsics other than round-to-nearest are not provided; there are no half,
// bfloat16 or 128-bit atomics.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "scheduler.h"
#include "vector_math.h"  // exp2_core

// ---------------------------------------------------------------------------------------------
// Warp-level intrinsics: each is one warp_exchange (a warp barrier) plus a read of the lanes' slots
// ---------------------------------------------------------------------------------------------
static inline unsigned gpublas_lane() {
    gpublas_sim::Worker* w = gpublas_sim::tls_worker;
    return w->fast ? 0 : w->cur->linear & 31;
}

template <class T>
static inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
    int lane = int(gpublas_lane()), base = lane & ~(width - 1);
    return gpublas_sim::shuffle(var, base + (src_lane & (width - 1)), true, mask);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    int lane = int(gpublas_lane()), base = lane & ~(width - 1), src = lane + int(delta);
    return gpublas_sim::shuffle(var, src, src < base + width, mask);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    int lane = int(gpublas_lane()), base = lane & ~(width - 1), src = lane - int(delta);
    return gpublas_sim::shuffle(var, src, src >= base, mask);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
    int lane = int(gpublas_lane()), base = lane & ~(width - 1), src = lane ^ lane_mask;
    return gpublas_sim::shuffle(var, src, src >= base && src < base + width, mask);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    unsigned stamp, lane, ballot = 0;
    gpublas_sim::WarpSlot* s = gpublas_sim::warp_exchange(pred != 0, stamp, lane);
    for (unsigned i = 0; i < 32; ++i)
        if (s[i].stamp == stamp && s[i].value) ballot |= 1u << i;
    return ballot & mask;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
// the lanes (within mask) whose value equals this lane's (sm_70's __match_any_sync; integer values)
template <class T>
static inline unsigned __match_any_sync(unsigned mask, T value) {
    static_assert(std::is_integral<T>::value, "__match_any_sync takes an integer value");
    unsigned stamp, lane, match = 0;
    gpublas_sim::WarpSlot* s = gpublas_sim::warp_exchange(gpublas_sim::to_bits(value), stamp, lane);
    for (unsigned i = 0; i < 32; ++i)
        if (s[i].stamp == stamp && s[i].value == s[lane].value) match |= 1u << i;
    return match & mask;
}
static inline int __all_sync(unsigned mask, int pred) {
    unsigned stamp, lane, all = 1;
    gpublas_sim::WarpSlot* s = gpublas_sim::warp_exchange(pred != 0, stamp, lane);
    for (unsigned i = 0; i < 32; ++i)
        if ((mask >> i & 1) && s[i].stamp == stamp && !s[i].value) all = 0;
    return int(all);
}
static inline void __syncwarp(unsigned = 0xffffffffu) {
    unsigned stamp, lane;
    gpublas_sim::warp_exchange(0, stamp, lane);
}
static inline unsigned __activemask() {
    gpublas_sim::Worker* w = gpublas_sim::tls_worker;
    unsigned warp = w->cur ? w->cur->linear >> 5 : 0, mask = 0;
    if (w->fast) return 1u;
    for (unsigned i = 0; i < 32 && warp * 32 + i < w->nthreads; ++i)
        if (w->fibers[warp * 32 + i].state != gpublas_sim::DONE) mask |= 1u << i;
    return mask;
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---------------------------------------------------------------------------------------------
// Atomics (blocks run on several OS threads, so these are real atomics)
// ---------------------------------------------------------------------------------------------
template <class T>
static inline T gpublas_atomic_float_op(T* p, T v, T (*op)(T, T)) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    U* up = reinterpret_cast<U*>(p);
    U old = __atomic_load_n(up, __ATOMIC_RELAXED), want;
    do {
        T cur; std::memcpy(&cur, &old, sizeof(T));
        T nv = op(cur, v); std::memcpy(&want, &nv, sizeof(T));
    } while (!__atomic_compare_exchange_n(up, &old, want, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    T r; std::memcpy(&r, &old, sizeof(T)); return r;
}
static inline float atomicAdd(float* p, float v) { return gpublas_atomic_float_op<float>(p, v, [](float a, float b) { return a + b; }); }
static inline double atomicAdd(double* p, double v) { return gpublas_atomic_float_op<double>(p, v, [](double a, double b) { return a + b; }); }
static inline float atomicMax(float* p, float v) { return gpublas_atomic_float_op<float>(p, v, [](float a, float b) { return a > b ? a : b; }); }
static inline float atomicMin(float* p, float v) { return gpublas_atomic_float_op<float>(p, v, [](float a, float b) { return a < b ? a : b; }); }
static inline float atomicExch(float* p, float v) { float r; __atomic_exchange(p, &v, &r, __ATOMIC_SEQ_CST); return r; }
#define GPUBLAS_INT_ATOMICS(T)                                                                         \
    static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }          \
    static inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }      \
    static inline T atomicCAS(T* p, T cmp, T v) {                                                      \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; \
    }                                                                                                  \
    static inline T atomicMax(T* p, T v) {                                                             \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                   \
        while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {} \
        return old;                                                                                    \
    }                                                                                                  \
    static inline T atomicMin(T* p, T v) {                                                             \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                   \
        while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {} \
        return old;                                                                                    \
    }
GPUBLAS_INT_ATOMICS(int)
GPUBLAS_INT_ATOMICS(unsigned int)
GPUBLAS_INT_ATOMICS(unsigned long long)
#undef GPUBLAS_INT_ATOMICS

// ---------------------------------------------------------------------------------------------
// Math functions and intrinsics (expf, tanhf, fmaxf ... come from <cmath> as they are)
// ---------------------------------------------------------------------------------------------
// CUDA's math API overloads exp, tanh, sqrt ... for float in the global namespace (a float kernel's
// exp(x) is expf on the GPU); <cmath> keeps those overloads in std, so exp(float) was the double
// function here: 2-3x the time per call and other roundings. Bring std's overloads in.
using std::abs; using std::acos; using std::acosh; using std::asin; using std::asinh; using std::atan;
using std::atan2; using std::atanh; using std::cbrt; using std::ceil; using std::copysign; using std::cos;
using std::cosh; using std::erf; using std::erfc; using std::exp; using std::exp2; using std::expm1;
using std::fabs; using std::fdim; using std::floor; using std::fma; using std::fmax; using std::fmin;
using std::fmod; using std::hypot; using std::ldexp; using std::lgamma; using std::log; using std::log10;
using std::log1p; using std::log2; using std::nearbyint; using std::pow; using std::remainder;
using std::rint; using std::round; using std::sin; using std::sinh; using std::sqrt; using std::tan;
using std::tanh; using std::tgamma; using std::trunc;

// tanhf (gpublas_sim.h renames every call of it to this): in double through vector_math.h's exp2_core, the
// bits vector_math.h's tanh of a run gives (which computes every branch and selects; one value takes only
// its branch: elementwise tanh of 34,560 floats 130 us, 200 with the select); within 1 ulp of the exact
// result (glibc's: 2 ulp) and ~10 ns instead of ~24. Below 2^-12, x - x^3/3 (the next term is 2^-48 of x);
// NaN, +-0, +-inf and subnormals pass through.
extern "C" float gpublas_sim_tanhf(float x) noexcept {
    const double a = std::fabs(double(x));
    if (!(a >= 0x1p-12)) return float(double(x) * (1.0 - double(x) * double(x) * (1.0 / 3.0)));
    if (!(a < 20.0)) return std::copysign(1.0f, x);  // 1 - 2^-58: 1 in float
    const double e = gpublas_sim::exp2_core(a * -2.8853900817779268);  // e^-2a
    return std::copysign(float((1.0 - e) / (1.0 + e)), x);
}

// glibc declares its own __expf, __logf ... : map CUDA's fast intrinsics onto the ordinary functions.
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __powf(x, y) powf(x, y)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __tanhf(x) tanhf(x)
static inline float __fdividef(float x, float y) { return x / y; }
static inline float fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline double __dadd_rn(double x, double y) { return x + y; }
static inline double __dmul_rn(double x, double y) { return x * y; }
static inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
static inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
static inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
static inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
static inline int __float2int_rn(float x) { return int(nearbyintf(x)); }
static inline int __float2int_rz(float x) { return int(x); }
static inline int __float2int_rd(float x) { return int(floorf(x)); }
static inline int __float2int_ru(float x) { return int(ceilf(x)); }
static inline int __double2int_rn(double x) { return int(nearbyint(x)); }
static inline float __int2float_rn(int x) { return float(x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz(unsigned(x)) : 32; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    return __builtin_bswap32(x);
}
static inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)((__uint128_t(a) * b) >> 64);
}
template <class T>
static inline T __ldg(const T* p) { return *p; }
// CUDA's min/max overloads: by value, in the operands' common type.
template <class A, class B>
static inline std::common_type_t<A, B> min(A a, B b) { return b < a ? b : a; }
template <class A, class B>
static inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

