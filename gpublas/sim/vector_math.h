// vector_math.h: 16 floats as one value (GCC's vector extension) with exp, tanh and sigmoid, for kernels'
// simulator-only paths that take a run of 16 consecutive elements per thread (common.cuh includes it on the
// simulator only; the GPU build never sees it). A simulated thread's scalar expf and tanhf are calls the CPU
// cannot overlap (lstm_gates_forward: five a unit, ~50 us for 32 x 64 units); on runs they are a few dozen
// vector instructions for 16 units.
//
// Each function works in double (two halves of 8) and rounds to float once: exp within 1 ulp of the exact
// result, tanh within 1 ulp (CUDA's expf and tanhf: 2). They differ from the scalar libm functions in the last
// bit on some inputs, so a kernel that uses them computes every element of a run through them (padded runs
// too), never some elements one way and the rest the other.
#pragma once

#include <cstdint>
#include <cstring>

namespace gpublas_sim {

typedef float float16v __attribute__((vector_size(64)));   // 16 floats: one value of a run
typedef double double8v __attribute__((vector_size(64)));  // 8 doubles: half of a run's arithmetic
typedef long long long8v __attribute__((vector_size(64)));

static inline double8v broadcast8(double v) { return double8v{} + v; }

// 2^z for |z| <= 300 (finite): z = k + f with k the nearest integer (the 1.5 * 2^52 shift rounds it; the
// build keeps a + b - b as two roundings, -ffp-contract=off, no -ffast-math), 2^f = e^r, r = f ln 2, by its
// Taylor series to r^11 in Estrin's order (relative error 3e-13: enough for tanh's 1 - e^-2a near a = 2^-12),
// then k added to the exponent bits.
static inline double8v exp2_8(double8v z) {
    const double8v shift = broadcast8(0x1.8p52);
    const double8v k = (z + shift) - shift;
    const double8v r = (z - k) * 0.6931471805599453, r2 = r * r, r4 = r2 * r2;
    const double8v p01 = r + 1.0, p23 = r * (1.0 / 6) + 0.5, p45 = r * (1.0 / 120) + (1.0 / 24);
    const double8v p67 = r * (1.0 / 5040) + (1.0 / 720), p89 = r * (1.0 / 362880) + (1.0 / 40320);
    const double8v pab = r * (1.0 / 39916800) + (1.0 / 3628800);
    const double8v hi = ((pab * r4 + (p89 * r2 + p67)) * r2) + p45;  // the terms r^4 .. r^11 over r^4
    double8v p = (hi * r4) + (p23 * r2 + p01);
    long8v bits;
    std::memcpy(&bits, &p, sizeof bits);
    bits += __builtin_convertvector(k, long8v) * (1LL << 52);  // k * 2^52: k added to the exponent
    std::memcpy(&p, &bits, sizeof p);
    return p;
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
    const double8v lim = broadcast8(200.0);
    const double8v c = x > lim ? lim : (x < -lim ? -lim : x);
    const double8v e = exp2_8(c * 1.4426950408889634);
    return x != x ? x : e;
}

// tanh of 8 floats held as doubles: (1 - e^-2a) / (1 + e^-2a) for a = |x| with x's sign; below 2^-12
// x - x^3/3, from 20 on +-1; NaN and +-0 pass through.
static inline double8v tanh_8(double8v x) {
    const double8v a = x < 0.0 ? -x : x;
    const double8v e = exp2_8((a < 20.0 ? a : broadcast8(20.0)) * -2.8853900817779268);  // e^-2a
    const double8v big = (1.0 - e) / (1.0 + e);
    const double8v t = x < 0.0 ? -big : big;
    const double8v small = x * (1.0 - x * x * (1.0 / 3.0));
    return a >= 0x1p-12 ? (a < 20.0 ? t : (x < 0.0 ? broadcast8(-1.0) : broadcast8(1.0))) : small;
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
