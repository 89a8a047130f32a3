// memory.cu: filling and converting device buffers. `real` is the destination element type
// (-Dreal=float, double, int, long long, unsigned char or bool).
//
// fill_real:    grid-stride loop, one element per thread per step: x[i] = value.
// cast_nd_real: grid-stride loop over a strided N-d layout (common.cuh NdLayout<2>; operand 0 is the
//               source, 1 the destination): y[oy] = (real) x[ox], where x holds the SRC_* type
//               `src` (switched on once, outside the loop). Copies of views (src type == real),
//               astype, and item assignment with broadcasting (source strides 0) all run here.
#include "common.cuh"

// Source type codes, mirrored in gpublas/array.py (SRC_CODES).
#define SRC_FLOAT 0
#define SRC_DOUBLE 1
#define SRC_INT 2
#define SRC_LONG 3
#define SRC_UCHAR 4
#define SRC_BOOL 5

extern "C" __global__ void fill_real(real* __restrict__ x, real value, long long n) {
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] = value;
}

template <class T>
__device__ __forceinline__ void cast_loop(const T* x, real* y, long long n, const NdLayout<2>& L) {
    GRID_STRIDE_LOOP(long long, i, n) {
        long long off[2];
        L.offsets(i, off);
        y[off[1]] = (real)x[off[0]];
    }
}

extern "C" __global__ void cast_nd_real(const void* x, int src, real* y, long long n,
                                        ND_DIM_PARAMS, ND_STRIDE_PARAMS(sx), ND_STRIDE_PARAMS(sy)) {
    const NdLayout<2> L = {ND_DIMS, {ND_STRIDES(sx), ND_STRIDES(sy)}};
    switch (src) {
        case SRC_FLOAT: cast_loop((const float*)x, y, n, L); break;
        case SRC_DOUBLE: cast_loop((const double*)x, y, n, L); break;
        case SRC_INT: cast_loop((const int*)x, y, n, L); break;
        case SRC_LONG: cast_loop((const long long*)x, y, n, L); break;
        case SRC_UCHAR: cast_loop((const unsigned char*)x, y, n, L); break;
        case SRC_BOOL: cast_loop((const bool*)x, y, n, L); break;
    }
}
