// tests/test_halftypes_headers.py: one program built against NVIDIA's cuda_fp16.h / cuda_bf16.h (nvcc,
// host code) and against gpublas/sim's (g++); each writes every result as raw bytes to stdout.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <cmath>
template <class T> static void put(T v) { fwrite(&v, sizeof v, 1, stdout); }
template <class H> static unsigned short b(H h) { unsigned short u; memcpy(&u, &h, 2); return u; }
template <class H> static H h_of(unsigned short u) { H h; memcpy(&h, &u, 2); return h; }
static uint64_t state = 88172645463325252ull;
static uint64_t next() { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }

template <class H, class F2H, class D2H, class I2H, class L2H, class H2F>
static void run(F2H f2h, D2H d2h, I2H i2h, L2H l2h, H2F h2f) {
    for (uint32_t u = 0; u < 65536; ++u) {  // every pattern: to float, int, bool; ops against 12 partners
        const H a = h_of<H>((unsigned short)u);
        put(h2f(a)); put(std::isfinite(h2f(a)) && std::fabs(h2f(a)) < 2e9f ? (int)a : 0);
        put((bool)a); put(b(__habs(a)));
        static const unsigned short partners[] = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x7c00, 0xfc00, 0x7fff, 0x0001,
                                                  0x3555, 0x4000, 0x7f80, 0x3f80};
        for (unsigned short p : partners) {
            const H c = h_of<H>(p);
            put(b(__hadd(a, c))); put(b(__hsub(a, c))); put(b(__hmul(a, c))); put(b(__hdiv(a, c)));
            put(b(__hmax(a, c))); put(b(__hmin(a, c))); put(b(a + c)); put(b(a * c)); put(b(-a));
            put((char)__heq(a, c)); put((char)__hne(a, c)); put((char)__hneu(a, c)); put((char)__hlt(a, c));
            put((char)__hge(a, c)); put((char)(a < c)); put((char)(a != c)); put((char)__hisnan(a));
            put(__hisinf(a));
        }
    }
    for (int k = 0; k < (1 << 20); ++k) {  // random float32 and float64 patterns, ints of every size
        uint64_t r = next();
        uint32_t fu = (uint32_t)r;
        float f; memcpy(&f, &fu, 4);
        double d; memcpy(&d, &r, 8);
        double near = (double)f * (1.0 + (double)(int32_t)(r >> 40) * 0x1p-50);  // near a float32, for ties
        put(b(f2h(f))); put(b(d2h(d))); put(b(d2h(near))); put(b(H(f))); put(b(H(near)));
        put(b(i2h((int)(r >> 32) >> (r & 31)))); put(b(l2h((long long)r >> (r & 63))));
    }
}

int main() {
    run<__half>([](float f) { return __float2half_rn(f); }, [](double d) { return __double2half(d); },
                [](int i) { return __int2half_rn(i); }, [](long long i) { return __ll2half_rn(i); },
                [](__half h) { return __half2float(h); });
    run<__nv_bfloat16>([](float f) { return __float2bfloat16_rn(f); }, [](double d) { return __double2bfloat16(d); },
                       [](int i) { return __int2bfloat16_rn(i); }, [](long long i) { return __ll2bfloat16_rn(i); },
                       [](__nv_bfloat16 h) { return __bfloat162float(h); });
    return 0;
}
