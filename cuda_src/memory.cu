// memory.cu: filling and converting device buffers. `real` is the element type (-Dreal=float, ...).
//
// fill_real:            grid-stride loop, one element per thread per step: x[i] = value.
// cast_real_from_<T>:   grid-stride loop: y[i] = (real) x[i], for x of float, double or int.
#include "common.cuh"

extern "C" __global__ void fill_real(real* __restrict__ x, real value, long long n) {
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] = value;
}

template <class T>
__device__ __forceinline__ void cast_loop(const T* __restrict__ x, real* __restrict__ y, long long n) {
    GRID_STRIDE_LOOP(long long, i, n)
        y[i] = (real)x[i];
}

extern "C" __global__ void cast_real_from_float(const float* __restrict__ x, real* __restrict__ y, long long n) {
    cast_loop(x, y, n);
}
extern "C" __global__ void cast_real_from_double(const double* __restrict__ x, real* __restrict__ y, long long n) {
    cast_loop(x, y, n);
}
extern "C" __global__ void cast_real_from_int(const int* __restrict__ x, real* __restrict__ y, long long n) {
    cast_loop(x, y, n);
}
