// elementwise.cu: maps over arrays of `real` (-Dreal=float or double). Every kernel is a grid-stride
// loop, one element per thread per step, block 256 (the launcher caps the grid). The operation is an
// int opcode (the EW_* / BIN_* numbers below, mirrored in gpublas/elementwise.py); each kernel switches
// once, outside its loop, into a loop specialised for that opcode.
//
// unary_real:        y[i] = f(x[i]; p0, p1): math functions and array-scalar arithmetic (EW_*).
// binary_real:       out[i] = a[i] (op) b[i], same shapes (BIN_*).
// binary_bcast_real: out[i] = a[ia] (op) b[ib] for out of shape (d0, d1, d2, d3): i is unflattened
//                    into (i0, i1, i2, i3) and ia = sum(i_k * sa_k), ib likewise; a broadcast axis
//                    has stride 0 (NumPy broadcasting of up to 4-D operands).
// where_real:        out[i] = cond[i] != 0 ? x[i] : y[i], cond of type real; where_u8_real (cond
//                    uint8, NumPy's bool) and where_i32_real (cond int32) differ only in cond's type.
// axpby_real:        out[i] = a * x[i] + b * y[i] (fused: one pass over memory).
#include "common.cuh"

// Unary opcodes (p0, p1 are the kernel's scalar parameters).
#define EW_NEG 0
#define EW_EXP 1
#define EW_LOG 2
#define EW_SQRT 3
#define EW_ABS 4
#define EW_TANH 5
#define EW_SIGMOID 6
#define EW_RELU 7
#define EW_ADD_S 8      // x + p0
#define EW_SUB_S 9      // x - p0
#define EW_RSUB_S 10    // p0 - x
#define EW_MUL_S 11     // x * p0
#define EW_DIV_S 12     // x / p0
#define EW_RDIV_S 13    // p0 / x
#define EW_POW_S 14     // x ** p0
#define EW_RPOW_S 15    // p0 ** x
#define EW_MAX_S 16     // maximum(x, p0)
#define EW_MIN_S 17     // minimum(x, p0)
#define EW_CLIP 18      // minimum(maximum(x, p0), p1)

// Binary opcodes.
#define BIN_ADD 0
#define BIN_SUB 1
#define BIN_MUL 2
#define BIN_DIV 3
#define BIN_POW 4
#define BIN_MAX 5
#define BIN_MIN 6

// float and double overloads, so `real` code calls the single-precision functions for float.
__device__ __forceinline__ float ew_exp(float x) { return expf(x); }
__device__ __forceinline__ double ew_exp(double x) { return exp(x); }
__device__ __forceinline__ float ew_log(float x) { return logf(x); }
__device__ __forceinline__ double ew_log(double x) { return log(x); }
__device__ __forceinline__ float ew_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double ew_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float ew_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double ew_abs(double x) { return fabs(x); }
__device__ __forceinline__ float ew_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double ew_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float ew_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double ew_pow(double x, double y) { return pow(x, y); }

// NumPy's maximum/minimum: a NaN in either operand gives NaN.
__device__ __forceinline__ real ew_max(real a, real b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ real ew_min(real a, real b) { return (a != a || a < b) ? a : b; }

// Sigmoid without overflow: exp of a non-positive number only.
__device__ __forceinline__ real ew_sigmoid(real x) {
    if (x >= (real)0) return (real)1 / ((real)1 + ew_exp(-x));
    real e = ew_exp(x);
    return e / ((real)1 + e);
}

template <int OP>
__device__ __forceinline__ real unary_op(real x, real p0, real p1) {
    switch (OP) {
        case EW_NEG: return -x;
        case EW_EXP: return ew_exp(x);
        case EW_LOG: return ew_log(x);
        case EW_SQRT: return ew_sqrt(x);
        case EW_ABS: return ew_abs(x);
        case EW_TANH: return ew_tanh(x);
        case EW_SIGMOID: return ew_sigmoid(x);
        case EW_RELU: return x > (real)0 ? x : (x != x ? x : (real)0);
        case EW_ADD_S: return x + p0;
        case EW_SUB_S: return x - p0;
        case EW_RSUB_S: return p0 - x;
        case EW_MUL_S: return x * p0;
        case EW_DIV_S: return x / p0;
        case EW_RDIV_S: return p0 / x;
        case EW_POW_S: return ew_pow(x, p0);
        case EW_RPOW_S: return ew_pow(p0, x);
        case EW_MAX_S: return ew_max(x, p0);
        case EW_MIN_S: return ew_min(x, p0);
        default: return ew_min(ew_max(x, p0), p1);  // EW_CLIP
    }
}

template <int OP>
__device__ __forceinline__ real binary_op(real a, real b) {
    switch (OP) {
        case BIN_ADD: return a + b;
        case BIN_SUB: return a - b;
        case BIN_MUL: return a * b;
        case BIN_DIV: return a / b;
        case BIN_POW: return ew_pow(a, b);
        case BIN_MAX: return ew_max(a, b);
        default: return ew_min(a, b);  // BIN_MIN
    }
}

#define EW_LOOP(i, n)                                                                 \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n);    \
         i += (long long)gridDim.x * blockDim.x)

template <int OP>
__device__ __forceinline__ void unary_loop(const real* x, real* y, real p0, real p1, long long n) {
    EW_LOOP(i, n) y[i] = unary_op<OP>(x[i], p0, p1);
}

// x and y may be the same array (in-place forms): each element is read before it is written, by the
// same thread, so no pointer here is __restrict__.
extern "C" __global__ void unary_real(const real* x, real* y, int op, real p0, real p1, long long n) {
    switch (op) {
        case EW_NEG: unary_loop<EW_NEG>(x, y, p0, p1, n); break;
        case EW_EXP: unary_loop<EW_EXP>(x, y, p0, p1, n); break;
        case EW_LOG: unary_loop<EW_LOG>(x, y, p0, p1, n); break;
        case EW_SQRT: unary_loop<EW_SQRT>(x, y, p0, p1, n); break;
        case EW_ABS: unary_loop<EW_ABS>(x, y, p0, p1, n); break;
        case EW_TANH: unary_loop<EW_TANH>(x, y, p0, p1, n); break;
        case EW_SIGMOID: unary_loop<EW_SIGMOID>(x, y, p0, p1, n); break;
        case EW_RELU: unary_loop<EW_RELU>(x, y, p0, p1, n); break;
        case EW_ADD_S: unary_loop<EW_ADD_S>(x, y, p0, p1, n); break;
        case EW_SUB_S: unary_loop<EW_SUB_S>(x, y, p0, p1, n); break;
        case EW_RSUB_S: unary_loop<EW_RSUB_S>(x, y, p0, p1, n); break;
        case EW_MUL_S: unary_loop<EW_MUL_S>(x, y, p0, p1, n); break;
        case EW_DIV_S: unary_loop<EW_DIV_S>(x, y, p0, p1, n); break;
        case EW_RDIV_S: unary_loop<EW_RDIV_S>(x, y, p0, p1, n); break;
        case EW_POW_S: unary_loop<EW_POW_S>(x, y, p0, p1, n); break;
        case EW_RPOW_S: unary_loop<EW_RPOW_S>(x, y, p0, p1, n); break;
        case EW_MAX_S: unary_loop<EW_MAX_S>(x, y, p0, p1, n); break;
        case EW_MIN_S: unary_loop<EW_MIN_S>(x, y, p0, p1, n); break;
        case EW_CLIP: unary_loop<EW_CLIP>(x, y, p0, p1, n); break;
    }
}

template <int OP>
__device__ __forceinline__ void binary_loop(const real* a, const real* b, real* out, long long n) {
    EW_LOOP(i, n) out[i] = binary_op<OP>(a[i], b[i]);
}

extern "C" __global__ void binary_real(const real* a, const real* b, real* out, int op, long long n) {
    switch (op) {
        case BIN_ADD: binary_loop<BIN_ADD>(a, b, out, n); break;
        case BIN_SUB: binary_loop<BIN_SUB>(a, b, out, n); break;
        case BIN_MUL: binary_loop<BIN_MUL>(a, b, out, n); break;
        case BIN_DIV: binary_loop<BIN_DIV>(a, b, out, n); break;
        case BIN_POW: binary_loop<BIN_POW>(a, b, out, n); break;
        case BIN_MAX: binary_loop<BIN_MAX>(a, b, out, n); break;
        case BIN_MIN: binary_loop<BIN_MIN>(a, b, out, n); break;
    }
}

// Strides are in elements; a broadcast axis has stride 0. d0 is implied by n.
template <int OP>
__device__ __forceinline__ void bcast_loop(const real* a, const real* b, real* out, long long n, int d1, int d2, int d3,
                                           long long sa0, long long sa1, long long sa2, long long sa3,
                                           long long sb0, long long sb1, long long sb2, long long sb3) {
    EW_LOOP(i, n) {
        long long t = i;
        const long long i3 = t % d3; t /= d3;
        const long long i2 = t % d2; t /= d2;
        const long long i1 = t % d1, i0 = t / d1;
        out[i] = binary_op<OP>(a[i0 * sa0 + i1 * sa1 + i2 * sa2 + i3 * sa3],
                               b[i0 * sb0 + i1 * sb1 + i2 * sb2 + i3 * sb3]);
    }
}

extern "C" __global__ void binary_bcast_real(const real* a, const real* b, real* out, int op, long long n,
                                             int d1, int d2, int d3,
                                             long long sa0, long long sa1, long long sa2, long long sa3,
                                             long long sb0, long long sb1, long long sb2, long long sb3) {
    switch (op) {
        case BIN_ADD: bcast_loop<BIN_ADD>(a, b, out, n, d1, d2, d3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3); break;
        case BIN_SUB: bcast_loop<BIN_SUB>(a, b, out, n, d1, d2, d3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3); break;
        case BIN_MUL: bcast_loop<BIN_MUL>(a, b, out, n, d1, d2, d3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3); break;
        case BIN_DIV: bcast_loop<BIN_DIV>(a, b, out, n, d1, d2, d3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3); break;
        case BIN_POW: bcast_loop<BIN_POW>(a, b, out, n, d1, d2, d3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3); break;
        case BIN_MAX: bcast_loop<BIN_MAX>(a, b, out, n, d1, d2, d3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3); break;
        case BIN_MIN: bcast_loop<BIN_MIN>(a, b, out, n, d1, d2, d3, sa0, sa1, sa2, sa3, sb0, sb1, sb2, sb3); break;
    }
}

template <class C>
__device__ __forceinline__ void where_loop(const C* cond, const real* x, const real* y, real* out, long long n) {
    EW_LOOP(i, n) out[i] = cond[i] != (C)0 ? x[i] : y[i];
}

extern "C" __global__ void where_real(const real* cond, const real* x, const real* y, real* out, long long n) {
    where_loop(cond, x, y, out, n);
}
extern "C" __global__ void where_u8_real(const unsigned char* cond, const real* x, const real* y, real* out,
                                         long long n) {
    where_loop(cond, x, y, out, n);
}
extern "C" __global__ void where_i32_real(const int* cond, const real* x, const real* y, real* out, long long n) {
    where_loop(cond, x, y, out, n);
}

extern "C" __global__ void axpby_real(real a, const real* x, real b, const real* y, real* out, long long n) {
    EW_LOOP(i, n) out[i] = a * x[i] + b * y[i];
}
