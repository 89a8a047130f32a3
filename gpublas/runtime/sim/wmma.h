// wmma.h: the tensor cores' nvcuda::wmma API, simulated warp-collectively.
//
// Emulates: fragment<matrix_a | matrix_b | accumulator, M, N, K, T, layout>, fill_fragment,
// load_matrix_sync, mma_sync and store_matrix_sync, for float/double accumulators and TF32
// (precision::tf32) inputs. Every lane's fragment holds the whole tile, so load/mma/store compute
// the same tile in every lane (stores write identical values) and loops over `num_elements` stay
// correct. Each *_sync call is a warp barrier (__syncwarp), as on the GPU.
// Limits: a fragment's element-to-lane mapping is not the GPU's (here every lane holds every
// element), so only code that treats fragments as opaque or loops over all num_elements is
// portable, as CUDA requires; TF32 inputs are truncated to their upper 19 bits in mma_sync (and
// __float_to_tf32 rounds to nearest, ties away); no half/bf16/int8 fragments (mma.sync PTX, with the GPU's layout: mma_sync.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "intrinsics.h"

namespace nvcuda {
namespace wmma {
static inline float __float_to_tf32(float x) {  // round to nearest, ties away (cvt.rna.tf32.f32)
    uint32_t u; std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    std::memcpy(&x, &u, 4); return x;
}
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
namespace precision { struct tf32 {}; }
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
    static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
    static constexpr int num_elements = rows * cols;
    using element_type = std::conditional_t<std::is_same<T, precision::tf32>::value, float, T>;
    element_type x[rows * cols];
};

static inline void warp_sync_point() { __syncwarp(); }

template <class Use, int M, int N, int K, class T, class Layout, class P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const P* p, unsigned ldm) {
    warp_sync_point();
    using F = fragment<Use, M, N, K, T, Layout>;
    const bool col = std::is_same<Layout, col_major>::value;
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c)
            f.x[r * F::cols + c] = col ? p[c * ldm + r] : p[r * ldm + c];
}
template <int M, int N, int K, class T, class P>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const P* p, unsigned ldm, layout_t l) {
    warp_sync_point();
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) f.x[r * N + c] = l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}
template <int M, int N, int K, class T, class P>
static inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t l) {
    warp_sync_point();
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) (l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * N + c];
    warp_sync_point();
}
template <class Use, int M, int N, int K, class T, class Layout, class V>
static inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, V v) {
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}
template <class In>
static inline float tensor_input(float v) {
    if (!std::is_same<In, precision::tf32>::value) return v;
    uint32_t u; std::memcpy(&u, &v, 4); u &= 0xffffe000u; std::memcpy(&v, &u, 4); return v;
}
template <int M, int N, int K, class TA, class LA, class LB, class TC>
static inline void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                            const fragment<matrix_b, M, N, K, TA, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
    warp_sync_point();
    TC out[M * N];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            TC acc = c.x[i * N + j];
            for (int k = 0; k < K; ++k) acc += tensor_input<TA>(a.x[i * K + k]) * tensor_input<TA>(b.x[k * N + j]);
            out[i * N + j] = acc;
        }
    std::memcpy(d.x, out, sizeof out);
}
}  // namespace wmma
}  // namespace nvcuda
