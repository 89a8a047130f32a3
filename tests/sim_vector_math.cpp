// gpublas/runtime/sim/vector_math.h's exp, tanh and sigmoid of a run (16 floats, computed in quarters of 4
// doubles) against the formula lane by lane in scalar doubles (exp2_core's scalar form, the one the 8-double
// vector form before the quarters computed per lane, and the scalar tanhf's): every result's bits. Inputs: edge
// values (+-0, +-inf, NaNs, subnormals, the branch limits 2^-12, 20 and +-200 and their neighbours, float's
// extremes) and then 2^20 pseudo-random bit patterns (every exponent). Prints "mismatches N" (tests/
// test_sim_vector_math.py builds it with the simulator's flags).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "vector_math.h"

using gpublas_sim::exp2_core;

static float ref_tanh(float xf) {
    const double x = xf, a = x < 0.0 ? -x : x;
    const double e = exp2_core((a < 20.0 ? a : 20.0) * -2.8853900817779268);
    const double big = (1.0 - e) / (1.0 + e), t = x < 0.0 ? -big : big;
    const double small = x * (1.0 - x * x * (1.0 / 3.0));
    return (float)(a >= 0x1p-12 ? (a < 20.0 ? t : (x < 0.0 ? -1.0 : 1.0)) : small);
}
static double ref_exp_d(double x) {
    if (x != x) return x;
    const double c = x > 200.0 ? 200.0 : (x < -200.0 ? -200.0 : x);
    return exp2_core(c * 1.4426950408889634);
}
static float ref_exp(float x) {  // a NaN comes back quiet (the vector form widens it to double and back)
    if (x != x) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        u |= 0x00400000u;
        std::memcpy(&x, &u, 4);
        return x;
    }
    return (float)ref_exp_d(x);
}
static float ref_sigmoid(float x) { return (float)(1.0 / (1.0 + ref_exp_d(-(double)x))); }

static float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

int main() {
    std::vector<float> in;
    const float inf = std::numeric_limits<float>::infinity();
    const float edges[] = {0.0f, -0.0f, inf, -inf, std::nanf(""), -std::nanf(""), bits_to_float(0x7fc00001u),
                           bits_to_float(0xffa00000u), bits_to_float(1), bits_to_float(0x807fffffu), 0x1p-126f,
                           0x1p-12f, -0x1p-12f, 20.0f, -20.0f, 200.0f, -200.0f, 88.7f, -103.9f, 1.0f, -1.0f,
                           std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
    for (float e : edges)
        for (int d = -2; d <= 2; ++d) {
            uint32_t u;
            std::memcpy(&u, &e, 4);
            in.push_back(bits_to_float(u + d));  // the neighbours (wrapping from 0 into NaN/negative patterns)
        }
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < (1 << 20); ++i) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;  // xorshift64
        in.push_back(bits_to_float((uint32_t)(s >> 16)));
    }
    while (in.size() % 16) in.push_back(0.5f);
    long bad = 0;
    for (size_t i = 0; i < in.size(); i += 16) {
        gpublas_sim::float16v x;
        std::memcpy(&x, &in[i], 64);
        const gpublas_sim::float16v t = tanh(x), e = exp(x), g = sigmoid(x);
        for (int l = 0; l < 16; ++l) {
            const float want[3] = {ref_tanh(in[i + l]), ref_exp(in[i + l]), ref_sigmoid(in[i + l])};
            const float got[3] = {t[l], e[l], g[l]};
            for (int f = 0; f < 3; ++f)
                if (std::memcmp(&want[f], &got[f], 4)) {
                    if (bad < 10) {
                        uint32_t x, g, w;
                        std::memcpy(&x, &in[i + l], 4), std::memcpy(&g, &got[f], 4), std::memcpy(&w, &want[f], 4);
                        std::printf("%s(%08x): %08x, want %08x\n", f == 0 ? "tanh" : f == 1 ? "exp" : "sigmoid", x, g, w);
                    }
                    ++bad;
                }
        }
    }
    std::printf("mismatches %ld of %zu\n", bad, 3 * in.size());
    return 0;
}
