// vector_math.h: 16 floats as one value (GCC's vector extension) with exp, tanh and sigmoid, for kernels'
// simulator-only paths that take a run of 16 consecutive elements per thread, and the exp core the scalar
// tanhf shares with them (intrinsics.h includes this; the GPU build never sees it). A simulated thread's scalar expf and tanhf are calls the CPU
// cannot overlap (lstm_gates_forward: five a unit, ~50 us for 32 x 64 units); on runs they are a few dozen
// vector instructions for 16 units.
//
// Each function works in double (two halves of 8) and rounds to float once: exp within 1 ulp of the exact
// result, tanh within 1 ulp (CUDA's expf and tanhf: 2); tanh gives the scalar tanhf's bits. exp and sigmoid
// differ from libm's expf in the last bit on some inputs, so a kernel that uses them computes every element of
// a run through them (padded runs too), never some elements one way and the rest the other.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace gpublas_sim {

typedef float float16v __attribute__((vector_size(64)));   // 16 floats: one value of a run
typedef double double8v __attribute__((vector_size(64)));  // 8 doubles: half of a run's arithmetic
typedef long long long8v __attribute__((vector_size(64)));

// v in every lane of D: a double, or a vector of them (double8v)
template <class D>
static inline D splat(double v) {
    if constexpr (std::is_same_v<D, double>) return v;
    else return D{} + v;
}

// a * b + c rounded once, in every lane (a lane loop GCC turns into vector FMAs where the CPU has them)
template <class D>
static inline D fma_lanes(D a, D b, D c) {
    if constexpr (std::is_same_v<D, double>) {
        return __builtin_fma(a, b, c);
    } else {
        D r;
        for (int i = 0; i < (int)(sizeof(D) / sizeof(double)); ++i) r[i] = __builtin_fma(a[i], b[i], c[i]);
        return r;
    }
}

// 2^z for |z| <= 300 (finite), z a double or a double8v: z = k + f with k the nearest integer (the 1.5 * 2^52
// shift rounds it; the build keeps a + b - b as two roundings, -ffp-contract=off, no -ffast-math), 2^f = e^r,
// r = f ln 2, by its Taylor series to r^11 in Estrin's order, fused multiply-adds 4 deep (relative error
// 3e-13: enough for tanh's 1 - e^-2a near a = 2^-12), then k added to the exponent bits.
template <class D>
static inline D exp2_core(D z) {
    using L = std::conditional_t<std::is_same_v<D, double>, int64_t, long8v>;
    const D shift = splat<D>(0x1.8p52), one = splat<D>(1.0);
    const D k = (z + shift) - shift;
    const D r = (z - k) * 0.6931471805599453, r2 = r * r, r4 = r2 * r2;
    auto term = [&](double hi, double lo) { return fma_lanes(r, splat<D>(hi), splat<D>(lo)); };  // lo + hi r
    const D p01 = fma_lanes(r, one, one), p23 = term(1.0 / 6, 0.5), p45 = term(1.0 / 120, 1.0 / 24);
    const D p67 = term(1.0 / 5040, 1.0 / 720), p89 = term(1.0 / 362880, 1.0 / 40320);
    const D pab = term(1.0 / 39916800, 1.0 / 3628800);
    const D hi = fma_lanes(r2, fma_lanes(r4, pab, fma_lanes(r2, p89, p67)), p45);  // r^4 .. r^11 over r^4
    D p = fma_lanes(r4, hi, fma_lanes(r2, p23, p01));
    L bits, kl;
    if constexpr (std::is_same_v<D, double>) kl = (int64_t)k;
    else kl = __builtin_convertvector(k, long8v);
    std::memcpy(&bits, &p, sizeof bits);
    bits += kl * (1LL << 52);  // k * 2^52: k added to the exponent
    std::memcpy(&p, &bits, sizeof p);
    return p;
}

// tanh of 8 floats held as doubles, rounded to float by the caller: intrinsics.h's gpublas_sim_tanhf lane by
// lane ((1 - e^-2a) / (1 + e^-2a) for a = |x| with x's sign; below 2^-12 x - x^3/3, from 20 on +-1; NaN and
// +-0 pass through), every branch computed and one selected: the same bits.
static inline double8v tanh_8(double8v x) {
    const double8v a = x < 0.0 ? -x : x, lim = splat<double8v>(20.0), one = splat<double8v>(1.0);
    const double8v e = exp2_core((a < 20.0 ? a : lim) * -2.8853900817779268);  // e^-2a
    const double8v big = (1.0 - e) / (1.0 + e);
    const double8v t = x < 0.0 ? -big : big;
    const double8v small = x * (1.0 - x * x * (1.0 / 3.0));
    return a >= 0x1p-12 ? (a < 20.0 ? t : (x < 0.0 ? -one : one)) : small;
}

static inline double8v low8(float16v x) {
    return __builtin_convertvector(__builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7), double8v);
}
static inline double8v high8(float16v x) {
    return __builtin_convertvector(__builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15), double8v);
}
static inline float16v join16(double8v lo, double8v hi) {
    typedef float float8v __attribute__((vector_size(32)));
    const float8v l = __builtin_convertvector(lo, float8v), h = __builtin_convertvector(hi, float8v);
    return __builtin_shufflevector(l, h, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

// e^x of 8 floats held as doubles: NaN passes through, beyond +-200 the result rounds to inf or 0.
static inline double8v exp_8(double8v x) {
    const double8v lim = splat<double8v>(200.0);
    const double8v c = x > lim ? lim : (x < -lim ? -lim : x);
    const double8v e = exp2_core(c * 1.4426950408889634);
    return x != x ? x : e;
}

}  // namespace gpublas_sim

// The overloads a kernel's templated math reaches for a run (common.cuh's sigmoid, tanh): in the global
// namespace, as CUDA's float ones are.
static inline gpublas_sim::float16v exp(gpublas_sim::float16v x) {
    using namespace gpublas_sim;
    return join16(exp_8(low8(x)), exp_8(high8(x)));
}
static inline gpublas_sim::float16v tanh(gpublas_sim::float16v x) {
    using namespace gpublas_sim;
    return join16(tanh_8(low8(x)), tanh_8(high8(x)));
}
// 1 / (1 + e^-x), rounded once from double
static inline gpublas_sim::float16v sigmoid(gpublas_sim::float16v x) {
    using namespace gpublas_sim;
    const double8v l = 1.0 / (1.0 + exp_8(-low8(x))), h = 1.0 / (1.0 + exp_8(-high8(x)));
    return join16(l, h);
}
