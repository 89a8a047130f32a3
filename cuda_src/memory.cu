// memory.cu: filling and converting device buffers. `real` is the destination element type
// (-Dreal=float, double, int, long long, unsigned char, bool, __half, __nv_bfloat16, cfloat, cdouble,
// signed char, short, unsigned short, unsigned int or unsigned long long;
// a complex value cast to a real type keeps its real part, to bool tests both parts, as NumPy's astype).
//
// fill_real:    grid-stride loop, one element per thread per step: x[i] = value.
// arange_real:  grid-stride loop, one element per thread per step: x[i] = start + i * step in `real`
//               arithmetic (NumPy's arange fill).
// linspace_real: grid-stride loop, one element per thread per step: x[i] = start + i * step in double,
//               x[last] = stop exactly, floored for an integer `real` (NumPy's linspace, then astype).
// cast_nd_real, cast_nd3_real: grid-stride loop over a strided layout (common.cuh NdLayout<2>, up to
//               8 axes, or Nd3Layout<2>, at most 3 axes and n < 2^31; operand 0 is the source, 1
//               the destination): y[oy] = convert<real>(x[ox]) (common.cuh: C's conversions, 16-bit
//               floats rounded to nearest even), where x holds the SRC_* type `src`
//               (switched on once, outside the loop). Copies of views (src type == real), astype,
//               and item assignment with broadcasting (source strides 0) all run here. On the simulator
//               a thread takes a run of ~1024 elements (flat_geometry) and walks it row by row of the
//               innermost axis (common.cuh sim_walk_rows: no division per element): a (8, 4, 64, 16) ->
//               (8, 64, 4, 16) float head merge 1330 us (16 x 256 threads of 8) -> 18 us (1 x 32).
//
// The simulator compiles the fills, the 3-axis cast and the any-layout cast apart (gpublas/runtime/source.py's
// sim_units; g++ CPU with the precompiled header): a first gpublas.zeros / ones builds 0.3 s instead of the
// family's 1.6 s, a first astype or strided copy 0.56 s (cast_nd3_real; 0.83 with cast_nd_real, which only
// layouts of more than 3 axes after merging launch).
// sim unit: fill_real arange_real linspace_real
// sim unit: cast_nd3_real
// sim spread: cast_nd3_real cast_nd_real
#include "common.cuh"

// Source type codes, mirrored in gpublas/runtime/dtypes.py (TABLE's `src` column).
#define SRC_FLOAT 0
#define SRC_DOUBLE 1
#define SRC_INT 2
#define SRC_LONG 3
#define SRC_UCHAR 4
#define SRC_BOOL 5
#define SRC_HALF 6
#define SRC_BFLOAT16 7
#define SRC_CFLOAT 8
#define SRC_CDOUBLE 9
#define SRC_SCHAR 10
#define SRC_USHORT 11
#define SRC_UINT 12
#define SRC_ULONG 13
#define SRC_SHORT 14

extern "C" __global__ void fill_real(real* __restrict__ x, real value, long long n) {
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] = value;
}

extern "C" __global__ void arange_real(real* __restrict__ x, real start, real step, long long n) {
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] = (real)(start + (real)i * step);
}

extern "C" __global__ void linspace_real(real* __restrict__ x, double start, double step, double stop, long long last,
                                         int integral, long long n) {
    GRID_STRIDE_LOOP(long long, i, n) {
        const double v = i == last ? stop : (double)i * step + start;
        x[i] = (real)(integral ? floor(v) : v);
    }
}

template <class T, class L>
__device__ __forceinline__ void cast_loop(const T* x, real* y, long long n, const L& lay) {
    lay.walk(n, [&](const long long* o) { y[o[1]] = convert<real>(x[o[0]]); });
}

template <class L>
__device__ void cast_any(const void* x, int src, real* y, long long n, const L& lay) {
    switch (src) {
        case SRC_FLOAT: cast_loop((const float*)x, y, n, lay); break;
        case SRC_DOUBLE: cast_loop((const double*)x, y, n, lay); break;
        case SRC_INT: cast_loop((const int*)x, y, n, lay); break;
        case SRC_LONG: cast_loop((const long long*)x, y, n, lay); break;
        case SRC_UCHAR: cast_loop((const unsigned char*)x, y, n, lay); break;
        case SRC_BOOL: cast_loop((const bool*)x, y, n, lay); break;
        case SRC_HALF: cast_loop((const __half*)x, y, n, lay); break;
        case SRC_BFLOAT16: cast_loop((const __nv_bfloat16*)x, y, n, lay); break;
        case SRC_CFLOAT: cast_loop((const cfloat*)x, y, n, lay); break;
        case SRC_CDOUBLE: cast_loop((const cdouble*)x, y, n, lay); break;
        case SRC_SCHAR: cast_loop((const signed char*)x, y, n, lay); break;
        case SRC_USHORT: cast_loop((const unsigned short*)x, y, n, lay); break;
        case SRC_UINT: cast_loop((const unsigned int*)x, y, n, lay); break;
        case SRC_ULONG: cast_loop((const unsigned long long*)x, y, n, lay); break;
        case SRC_SHORT: cast_loop((const short*)x, y, n, lay); break;
    }
}

extern "C" __global__ void cast_nd_real(const void* x, int src, real* y, long long n,
                                        ND_DIM_PARAMS, ND_STRIDE_PARAMS(sx), ND_STRIDE_PARAMS(sy)) {
    const NdLayout<2> lay = {ND_DIMS, {ND_STRIDES(sx), ND_STRIDES(sy)}};
    cast_any(x, src, y, n, lay);
}

extern "C" __global__ void cast_nd3_real(const void* x, int src, real* y, long long n,
                                         ND3_DIM_PARAMS, ND3_STRIDE_PARAMS(sx), ND3_STRIDE_PARAMS(sy)) {
    const Nd3Layout<2> lay = {ND3_DIMS, {ND3_STRIDES(sx), ND3_STRIDES(sy)}};
    cast_any(x, src, y, n, lay);
}
