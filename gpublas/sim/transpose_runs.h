// transpose_runs.h: eight runs of floats or doubles read as the rows of their transpose, with vector shuffles,
// for kernels' simulator-only paths (common.cuh's load_runs_transposed includes it on the simulator only; the
// GPU build never sees it). A CPU vectorizes a loop over consecutive elements; a kernel that multiplies along
// the runs' transpose (gemm.cu's direct tile with B transposed) needs them turned into rows first.
//
// transpose_runs(p, at, n, out): out[k][r] = p[at[r] + k] for k < n and r < 8, bit for bit (NaN payloads too).
// With AVX, 8 values of each run at a time: float as one 8x8 transpose (unpack, shuffle, 128-bit lane
// permute), double as four 4x4 ones; the last n % 8 values, and every value without AVX, element by element.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gpublas_sim {

// out[k][r] = p[at[r] + k] for the eight values k = 0..7 of each run.
static inline void transpose_8x8(const float* p, const long long (&at)[8], float (*out)[8]) {
#if defined(__AVX__)
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(p + at[i]);
    for (int i = 0; i < 8; i += 2) {  // t[i]: r[i], r[i+1] interleaved, low then high halves of each lane
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {  // r[i + q]: values q and q + 4 of runs i .. i + 3
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int q = 0; q < 4; ++q) {
        _mm256_storeu_ps(out[q], _mm256_permute2f128_ps(r[q], r[q + 4], 0x20));
        _mm256_storeu_ps(out[q + 4], _mm256_permute2f128_ps(r[q], r[q + 4], 0x31));
    }
#else
    for (int k = 0; k < 8; ++k)
        for (int i = 0; i < 8; ++i) out[k][i] = p[at[i] + k];
#endif
}

static inline void transpose_8x8(const double* p, const long long (&at)[8], double (*out)[8]) {
#if defined(__AVX__)
    for (int i = 0; i < 8; i += 4)      // runs i .. i + 3
        for (int k = 0; k < 8; k += 4) {  // their values k .. k + 3
            __m256d r[4];
            for (int q = 0; q < 4; ++q) r[q] = _mm256_loadu_pd(p + at[i + q] + k);
            const __m256d lo01 = _mm256_unpacklo_pd(r[0], r[1]), hi01 = _mm256_unpackhi_pd(r[0], r[1]);
            const __m256d lo23 = _mm256_unpacklo_pd(r[2], r[3]), hi23 = _mm256_unpackhi_pd(r[2], r[3]);
            _mm256_storeu_pd(out[k] + i, _mm256_permute2f128_pd(lo01, lo23, 0x20));
            _mm256_storeu_pd(out[k + 1] + i, _mm256_permute2f128_pd(hi01, hi23, 0x20));
            _mm256_storeu_pd(out[k + 2] + i, _mm256_permute2f128_pd(lo01, lo23, 0x31));
            _mm256_storeu_pd(out[k + 3] + i, _mm256_permute2f128_pd(hi01, hi23, 0x31));
        }
#else
    for (int k = 0; k < 8; ++k)
        for (int i = 0; i < 8; ++i) out[k][i] = p[at[i] + k];
#endif
}

template <class T>
static inline void transpose_runs(const T* p, const long long (&at)[8], int n, T (*out)[8]) {
    int k = 0;
    for (; k + 8 <= n; k += 8) transpose_8x8(p + k, at, out + k);
    for (; k < n; ++k)
        for (int i = 0; i < 8; ++i) out[k][i] = p[at[i] + k];
}

}  // namespace gpublas_sim
