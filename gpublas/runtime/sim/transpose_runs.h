// transpose_runs.h: runs of floats or doubles read as the rows of their transpose, with vector shuffles,
// for kernels' simulator-only paths (common.cuh's load_runs_transposed includes it on the simulator only; the
// GPU build never sees it). A CPU vectorizes a loop over consecutive elements; a kernel that multiplies along
// the runs' transpose (gemm.cu's direct tile with B transposed) needs them turned into rows first.
//
// transpose_runs(p, at, n, out): out[k][r] = p[at[r] + k] for k < n and r < W (W runs, a multiple of 8), bit for
// bit (NaN payloads too). With AVX, 8 values of 8 runs at a time: float as one 8x8 transpose (unpack, shuffle,
// 128-bit lane permute), double as four 4x4 ones; with AVX-512 float 16 runs at a time and double 8, each row of
// the transpose one 64-byte store (shuffles of 128-bit lanes across registers). The last n % 8 values, and every
// value without AVX, element by element.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gpublas_sim {

// out[k][r] = p[at[r] + k] for the eight values k = 0..7 of the eight runs r = 0..7 (out's rows W apart).
template <int W>
static inline void transpose_8x8(const float* p, const long long* at, float (*out)[W]) {
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

#if defined(__AVX512F__)
// out[k][r] = p[at[r] + k] for the eight values k = 0..7 of the sixteen runs r = 0..15, each row of 16 one
// 64-byte store (a later 64-byte load of it forwards from one store, not two): transpose_8x8's steps on runs
// i and i + 8 side by side in one register, then the 128-bit lanes gathered with one permute per row.
template <int W>
static inline void transpose_16x8(const float* p, const long long* at, float (*out)[W]) {
    __m512 r[8], t[8];
    for (int i = 0; i < 8; ++i) {  // r[i]: run i's 8 values, then run i + 8's
        const __m512d low = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_loadu_ps(p + at[i])));
        r[i] = _mm512_castpd_ps(_mm512_insertf64x4(low, _mm256_castps_pd(_mm256_loadu_ps(p + at[i + 8])), 1));
    }
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {  // r[i + q]'s lanes: values q, q + 4 of runs i .. i + 3, then of runs i + 8 ..
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    // row q: lanes 0 of r[q] (runs 0..3) and r[q + 4] (runs 4..7), then their lanes 2 (runs 8..15); row q + 4:
    // lanes 1 and 3
    const __m512i low = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    const __m512i high = _mm512_add_epi32(low, _mm512_set1_epi32(4));
    for (int q = 0; q < 4; ++q) {
        _mm512_storeu_ps(out[q], _mm512_permutex2var_ps(r[q], low, r[q + 4]));
        _mm512_storeu_ps(out[q + 4], _mm512_permutex2var_ps(r[q], high, r[q + 4]));
    }
}
#endif

template <int W>
static inline void transpose_8x8(const double* p, const long long* at, double (*out)[W]) {
#if defined(__AVX512F__)  // each row of 8 one 64-byte store (a later 64-byte load of it forwards from one store)
    __m512d r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm512_loadu_pd(p + at[i]);
    for (int i = 0; i < 8; i += 2) {  // t[i]: values 0, 2, 4, 6 of runs i, i + 1 interleaved; t[i + 1]: 1, 3, 5, 7
        t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)     // r[i + e]: 128-bit lanes 0, 2 of t[i + e], then of t[i + e + 2]: values e and
        for (int e = 0; e < 2; ++e) {  // e + 4 of runs i .. i + 3; r[i + e + 2]: lanes 1, 3, values e + 2 and e + 6
            r[i + e] = _mm512_shuffle_f64x2(t[i + e], t[i + e + 2], 0x88);
            r[i + e + 2] = _mm512_shuffle_f64x2(t[i + e], t[i + e + 2], 0xDD);
        }
    for (int k = 0; k < 4; ++k) {  // r[k]: values k and k + 4 of runs 0..3; r[k + 4]: of runs 4..7
        _mm512_storeu_pd(out[k], _mm512_shuffle_f64x2(r[k], r[k + 4], 0x88));
        _mm512_storeu_pd(out[k + 4], _mm512_shuffle_f64x2(r[k], r[k + 4], 0xDD));
    }
#elif defined(__AVX__)
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

template <int W, class T>
static inline void transpose_runs(const T* p, const long long (&at)[W], int n, T (*out)[W]) {
    static_assert(W % 8 == 0, "runs come in eights");
    int k = 0;
    for (; k + 8 <= n; k += 8) {
        int g = 0;
#if defined(__AVX512F__)
        if constexpr (sizeof(T) == 4)
            for (; g + 16 <= W; g += 16) transpose_16x8<W>(p + k, at + g, reinterpret_cast<T (*)[W]>(out[k] + g));
#endif
        for (; g < W; g += 8) transpose_8x8<W>(p + k, at + g, reinterpret_cast<T (*)[W]>(out[k] + g));
    }
    for (; k < n; ++k)
        for (int i = 0; i < W; ++i) out[k][i] = p[at[i] + k];
}

}  // namespace gpublas_sim
