// vector_math.h: 16 floats as one value (GCC's vector extension) with exp, tanh and sigmoid, for kernels'
// simulator-only paths that take a run of 16 consecutive elements per thread, and the exp core the scalar
// tanhf shares with them (intrinsics.h includes this; the GPU build never sees it). A simulated thread's scalar expf and tanhf are calls the CPU
// cannot overlap (lstm_gates_forward: five a unit, ~50 us for 32 x 64 units); on runs they are a few dozen
// vector instructions for 16 units.
//
// Each function works in double (four quarters of 4) and rounds to float once: exp within 1 ulp of the exact
// result, tanh within 1 ulp (CUDA's expf and tanhf: 2); tanh gives the scalar tanhf's bits. exp and sigmoid
// differ from libm's expf in the last bit on some inputs, so a kernel that uses them computes every element of
// a run through them (padded runs too), never some elements one way and the rest the other.
//
// The arithmetic runs on quarters of a run (4 doubles, 32 bytes: one AVX2 register): g++ lowers compares and
// selects of 64-byte vectors lane by lane on a CPU without AVX-512, and AVX2 has no double -> int64 vector
// conversion, so exp2_core takes k's bits from the shifted sum instead of converting k (the same integer).
// Lane for lane the same operations as the 8-double form before, the same bits (all 2^32 floats compared once;
// tests/test_sim_vector_math.py keeps edge values and 2^20 patterns): ns an element, one core of a loaded
// znver3, best of 20 over 2^17: tanh 4.7-5.5 -> 2.6-3.1, exp 3.4-4.0 -> 1.7-2.2.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace gpublas_sim {

typedef float float16v __attribute__((vector_size(64)));   // 16 floats: one value of a run
typedef float float4v __attribute__((vector_size(16)));
typedef double double4v __attribute__((vector_size(32)));  // 4 doubles: a quarter of a run's arithmetic
typedef long long long4v __attribute__((vector_size(32)));

// v in every lane of D: a double, or a vector of them (double4v)
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

// 2^z for |z| <= 300 (finite), z a double or a double4v: z = k + f with k the nearest integer (the 1.5 * 2^52
// shift rounds it; the build keeps a + b - b as two roundings, -ffp-contract=off, no -ffast-math), 2^f = e^r,
// r = f ln 2, by its Taylor series to r^11 in Estrin's order, fused multiply-adds 4 deep (relative error
// 3e-13: enough for tanh's 1 - e^-2a near a = 2^-12), then k added to the exponent bits.
template <class D>
static inline D exp2_core(D z) {
    using L = std::conditional_t<std::is_same_v<D, double>, int64_t, long4v>;
    const D shift = splat<D>(0x1.8p52), one = splat<D>(1.0);
    const D zs = z + shift, k = zs - shift;
    const D r = (z - k) * 0.6931471805599453, r2 = r * r, r4 = r2 * r2;
    auto term = [&](double hi, double lo) { return fma_lanes(r, splat<D>(hi), splat<D>(lo)); };  // lo + hi r
    const D p01 = fma_lanes(r, one, one), p23 = term(1.0 / 6, 0.5), p45 = term(1.0 / 120, 1.0 / 24);
    const D p67 = term(1.0 / 5040, 1.0 / 720), p89 = term(1.0 / 362880, 1.0 / 40320);
    const D pab = term(1.0 / 39916800, 1.0 / 3628800);
    const D hi = fma_lanes(r2, fma_lanes(r4, pab, fma_lanes(r2, p89, p67)), p45);  // r^4 .. r^11 over r^4
    D p = fma_lanes(r4, hi, fma_lanes(r2, p23, p01));
    L bits, kl;
    if constexpr (std::is_same_v<D, double>) {
        kl = (int64_t)k;
    } else {  // zs lies in [2^52, 2^53), one unit a step: its bits are shift's plus k
        std::memcpy(&kl, &zs, sizeof kl);
        kl -= 0x4338000000000000LL;  // 0x1.8p52's bits
    }
    std::memcpy(&bits, &p, sizeof bits);
    bits += kl * (1LL << 52);  // k * 2^52: k added to the exponent
    std::memcpy(&p, &bits, sizeof p);
    return p;
}

// tanh of 4 floats held as doubles, rounded to float by the caller: intrinsics.h's gpublas_sim_tanhf lane by
// lane ((1 - e^-2a) / (1 + e^-2a) for a = |x| with x's sign; below 2^-12 x - x^3/3, from 20 on +-1; NaN and
// +-0 pass through), every branch computed and one selected: the same bits.
static inline double4v tanh_4(double4v x) {
    const double4v a = x < 0.0 ? -x : x, lim = splat<double4v>(20.0), one = splat<double4v>(1.0);
    const double4v e = exp2_core((a < 20.0 ? a : lim) * -2.8853900817779268);  // e^-2a
    const double4v big = (1.0 - e) / (1.0 + e);
    const double4v t = x < 0.0 ? -big : big;
    const double4v small = x * (1.0 - x * x * (1.0 / 3.0));
    return a >= 0x1p-12 ? (a < 20.0 ? t : (x < 0.0 ? -one : one)) : small;
}

// e^x of 4 floats held as doubles: NaN passes through, beyond +-200 the result rounds to inf or 0.
static inline double4v exp_4(double4v x) {
    const double4v lim = splat<double4v>(200.0);
    const double4v c = x > lim ? lim : (x < -lim ? -lim : x);
    const double4v e = exp2_core(c * 1.4426950408889634);
    return x != x ? x : e;
}

// f applied to each quarter of x (4 doubles), rounded back to floats. Through memory, not shuffles: g++ lowers
// shuffles of 64-byte vectors element by element without AVX-512; 16-byte loads and stores are one each.
template <class F>
static inline float16v by_quarters(float16v x, F f) {
    float4v q[4];
    std::memcpy(q, &x, sizeof q);
    for (int i = 0; i < 4; ++i) q[i] = __builtin_convertvector(f(__builtin_convertvector(q[i], double4v)), float4v);
    std::memcpy(&x, q, sizeof q);
    return x;
}

}  // namespace gpublas_sim

// The overloads a kernel's templated math reaches for a run (common.cuh's sigmoid, tanh): in the global
// namespace, as CUDA's float ones are.
static inline gpublas_sim::float16v exp(gpublas_sim::float16v x) {
    return gpublas_sim::by_quarters(x, gpublas_sim::exp_4);
}
static inline gpublas_sim::float16v tanh(gpublas_sim::float16v x) {
    return gpublas_sim::by_quarters(x, gpublas_sim::tanh_4);
}
// 1 / (1 + e^-x), rounded once from double
static inline gpublas_sim::float16v sigmoid(gpublas_sim::float16v x) {
    return gpublas_sim::by_quarters(x, [](gpublas_sim::double4v q) { return 1.0 / (1.0 + gpublas_sim::exp_4(-q)); });
}
