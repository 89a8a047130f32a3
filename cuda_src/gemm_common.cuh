// gemm_common.cuh: the epilogue every GEMM kernel (gemm.cu, gemm_v2.cu) shares: scalar and vector stores of C.
// Needs common.cuh (acc_real, load_as, convert).
#pragma once

// C[idx] = alpha * acc + beta * C[idx] computed in acc_real and rounded once into C's type O (`real`, or float
// for a 16-bit `real` with a float C), without reading C when beta == 0 (NaN or Inf there must not leak).
template <class O>
__device__ __forceinline__ void store_c(O* __restrict__ c, long long idx, acc_real alpha, acc_real acc, acc_real beta) {
    c[idx] = convert<O>(beta == (acc_real)0 ? alpha * acc : alpha * acc + beta * load_as(c[idx]));
}

// C[idx + w] = alpha * acc[w * stride] + beta * C[idx + w] for the W = sizeof(V) / sizeof(real) elements of one
// vector V (float2, float4, double2) as one vector store (and load, when beta != 0); c + idx is aligned to V.
template <class V>
__device__ __forceinline__ void store_c_vec(real* __restrict__ c, long long idx, real alpha, const real* acc,
                                            int stride, real beta) {
    constexpr int W = sizeof(V) / sizeof(real);
    V out;
    real* o = reinterpret_cast<real*>(&out);
    if (beta == (real)0) {
#pragma unroll
        for (int w = 0; w < W; ++w) o[w] = alpha * acc[w * stride];
    } else {
        const V old = *reinterpret_cast<const V*>(c + idx);
        const real* p = reinterpret_cast<const real*>(&old);
#pragma unroll
        for (int w = 0; w < W; ++w) o[w] = alpha * acc[w * stride] + beta * p[w];
    }
    *reinterpret_cast<V*>(c + idx) = out;
}
