// elementwise.cu: maps over arrays of `real` (-Dreal=float, double, int, long long, unsigned long long,
// __half, __nv_bfloat16, cfloat or cdouble: field_unary_op's and field_binary_op's opcodes, == and !=).
// The bitwise opcodes (BIN_AND ... BIN_RSHIFT, EW_INVERT) act in the integer builds only; gpublas/
// elementwise.py launches them on integer arrays (bool and the narrow integers computed in int or long long).
// Every op computes in acc_real (common.cuh: float for the 16-bit types, which are loaded as float
// and rounded once when stored; `real` itself otherwise); scalar parameters p0, p1 are `real`
// (a Python scalar takes the array's dtype, as NumPy's), axpby's a and b acc_real. Every kernel is a
// grid-stride loop, one element per thread per step, block 256 (the launcher caps the grid). The
// operation is an int opcode (the EW_* / BIN_* / CMP_* numbers below, read by
// gpublas/core/elementwise.py); each kernel switches once, outside its loop, into a loop specialised for
// that opcode. Three layouts (gpublas/core/elementwise.py's plan picks one after merging axes): the plain
// kernels take arrays that are contiguous over the same elements (one flat index); `_nd3` kernels a
// strided layout of at most 3 axes and fewer than 2^31 elements (common.cuh Nd3Layout: FastDivmod
// index math, the common broadcasts); `_nd` kernels any layout up to 8 axes (NdLayout, 64-bit
// divisions). Strides are per operand, in elements, 0 on a broadcast axis, negative for reversed views.
//
// unary_real, unary_nd3_real, unary_nd_real:     y = f(x; p0, p1): math and array-scalar arithmetic (EW_*),
//                                                 cumath's NumPy-named functions (EW_SIN ...).
// binary_real, binary_nd3_real, binary_nd_real:  out = a (op) b (BIN_*); the strided forms broadcast.
// compare_nd3_real, compare_nd_real:             out (bool) = a (cmp) b (CMP_*), or a (cmp) p0 when b is NULL.
// where_nd3_real, where_nd_real:                 out = cond ? x : y, cond bool, broadcasting.
// axpby_real:                  out[i] = a * x[i] + b * y[i] (fused: one pass over memory).
//
// The simulator compiles the family in five units (gpublas/runtime/source.py's sim_units), g++ CPU with the
// precompiled header: a first unary op builds 1.5 s, a first binary op 0.8 s, a comparison 0.4 s; the
// any-layout kernels (`_nd`, more than 3 axes after merging: rare) are a unit of their own, 2.3 s (with
// them in each unit the three cost 2.2, 1.3 and 0.8 s; the whole family 4.4 s). A layout kernel is
// most of its unit: g++ makes a loop per op and layout.
// sim unit: unary_real unary_nd3_real
// sim unit: binary_real binary_nd3_real
// sim unit: compare_nd3_real
// sim unit: unary_nd_real binary_nd_real compare_nd_real
// On the simulator each thread walks a run of about a thousand elements (gpublas/runtime/geometry.py's
// flat_geometry), so a launch's blocks go over the cores however few threads they have:
// float exp and sigmoid take 16 elements at a time there (vector_math.h; unary_vector16 below): exp of 2^18
// floats 0.53-0.59x -> 0.87-0.96x NumPy's, 2^22 0.58-0.71x -> 1.06-1.08x (one thread, interleaved runs).
// sim spread: unary_real unary_nd3_real unary_nd_real binary_real binary_nd3_real binary_nd_real
// sim spread: compare_nd3_real compare_nd_real where_nd3_real where_nd_real axpby_real
#include <type_traits>  // std::is_integral, std::is_signed

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
#define EW_INVERT 19    // ~x (integer builds)

// cumath's unary opcodes (gpublas/core/cumath.py), NumPy's semantics; numbered from 32 to leave room above.
#define EW_SIN 32
#define EW_COS 33
#define EW_TAN 34
#define EW_ARCSIN 35
#define EW_ARCCOS 36
#define EW_ARCTAN 37
#define EW_SINH 38
#define EW_COSH 39
#define EW_FLOOR 40
#define EW_CEIL 41
#define EW_TRUNC 42
#define EW_LOG10 43
#define EW_LOG2 44
#define EW_LOG1P 45
#define EW_EXPM1 46
#define EW_EXP2 47
#define EW_SQUARE 48      // x * x
#define EW_RECIPROCAL 49  // 1 / x
#define EW_SIGN 50        // -1, 0 or 1; NaN stays NaN
#define EW_RINT 51        // the nearest integer, halves to even (NumPy's rint and round)

// Complex-only unary opcodes, numbered from 60.
#define EW_CONJ 60        // x.conj()

// Comparison opcodes.
#define CMP_EQ 0
#define CMP_NE 1
#define CMP_LT 2
#define CMP_LE 3
#define CMP_GT 4
#define CMP_GE 5

// Binary opcodes.
#define BIN_ADD 0
#define BIN_SUB 1
#define BIN_MUL 2
#define BIN_DIV 3
#define BIN_POW 4
#define BIN_MAX 5
#define BIN_MIN 6
#define BIN_FLOOR_DIVIDE 7  // NumPy's a // b: floor of the quotient
#define BIN_REMAINDER 8     // NumPy's a % b: the remainder has b's sign
#define BIN_AND 9           // a & b, a | b, a ^ b (integer builds)
#define BIN_OR 10
#define BIN_XOR 11
#define BIN_LSHIFT 12       // NumPy's a << b: 0 once b reaches the width (or is negative)
#define BIN_RSHIFT 13       // NumPy's a >> b: the sign (0 or -1) once b reaches the width (or is negative)

// cumath's binary opcodes, numbered from 16 to leave room above.
#define BIN_FMOD 16     // C's fmod: the remainder has a's sign (NumPy's fmod)
#define BIN_ARCTAN2 17  // atan2(a, b)
#define BIN_HYPOT 18    // sqrt(a*a + b*b) without overflow

// The math functions (ew_exp, ew_log, ew_sqrt, ew_abs, ew_tanh, ew_pow) are common.cuh's.

// NumPy's maximum/minimum: a NaN in either operand gives NaN.
__device__ __forceinline__ acc_real ew_max(acc_real a, acc_real b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ acc_real ew_min(acc_real a, acc_real b) { return (a != a || a < b) ? a : b; }

// NumPy's floor_divide and remainder (npy_divmod): a // b rounds the quotient down, a % b takes b's
// sign, a == (a // b) * b + a % b. Integers: x // 0 and x % 0 are 0 (NumPy's result, without its
// warning), MIN // -1 wraps; floats: x // 0 is x / 0, x % 0 is NaN.
template <class F>
__device__ __forceinline__ F fp_remainder(F a, F b) {
    if (b == (F)0) return fmod(a, b);
    F mod = fmod(a, b);
    if (mod != (F)0) return ((b < (F)0) != (mod < (F)0)) ? mod + b : mod;
    return copysign((F)0, b);
}
template <class F>
__device__ __forceinline__ F fp_floor_divide(F a, F b) {
    if (b == (F)0) return a / b;
    const F mod = fmod(a, b);
    F div = (a - mod) / b;
    if (mod != (F)0 && ((b < (F)0) != (mod < (F)0))) div -= (F)1;
    if (div == (F)0) return copysign((F)0, a / b);
    F q = floor(div);
    return div - q > (F)0.5 ? q + (F)1 : q;
}
template <class T>  // b == -1 (a signed type's overflow case; for an unsigned one, its largest value)
__device__ __forceinline__ bool minus_one(T b) { return std::is_signed<T>::value && b == (T)-1; }
template <class T>
__device__ __forceinline__ T ew_remainder(T a, T b) {
    if (b == (T)0 || minus_one(b)) return (T)0;
    const T r = a % b;
    return (r != (T)0 && ((r < (T)0) != (b < (T)0))) ? r + b : r;
}
template <class T>
__device__ __forceinline__ T ew_floor_divide(T a, T b) {
    if (b == (T)0) return (T)0;
    if (minus_one(b)) return (T)(0ull - (unsigned long long)a);
    const T q = a / b;
    return (a % b != (T)0 && ((a < (T)0) != (b < (T)0))) ? q - (T)1 : q;
}
template <class T>  // C's % has a's sign, as fmod; x fmod 0 is 0 (NumPy's), MIN fmod -1 is 0
__device__ __forceinline__ T ew_fmod(T a, T b) { return (b == (T)0 || minus_one(b)) ? (T)0 : a % b; }
__device__ __forceinline__ float ew_fmod(float a, float b) { return fmod(a, b); }
__device__ __forceinline__ double ew_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float ew_remainder(float a, float b) { return fp_remainder(a, b); }
__device__ __forceinline__ double ew_remainder(double a, double b) { return fp_remainder(a, b); }
__device__ __forceinline__ float ew_floor_divide(float a, float b) { return fp_floor_divide(a, b); }
__device__ __forceinline__ double ew_floor_divide(double a, double b) { return fp_floor_divide(a, b); }

// NumPy's bitwise ufuncs on an integer T (npy_lshift / npy_rshift: a shift by the width or more, or
// by a negative count, gives 0, or -1 for a negative a shifted right); shifted left as unsigned, so
// a negative a wraps instead of C's undefined behaviour. A float build instantiates none of them.
template <int OP, class T>
__device__ __forceinline__ T bitwise_op(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
        const bool within = (unsigned long long)b < sizeof(T) * 8;
        switch (OP) {
            case BIN_AND: return a & b;
            case BIN_OR: return a | b;
            case BIN_XOR: return a ^ b;
            case BIN_LSHIFT: return within ? (T)((unsigned long long)a << b) : (T)0;
            default: return within ? (T)(a >> b) : (a < (T)0 ? (T)-1 : (T)0);  // BIN_RSHIFT
        }
    } else {
        return a;
    }
}
template <class T>
__device__ __forceinline__ T ew_invert(T x) {
    if constexpr (std::is_integral<T>::value) return (T)~x; else return x;
}

// Sigmoid without overflow: exp of a non-positive number only.
__device__ __forceinline__ acc_real ew_sigmoid(acc_real x) {
    if (x >= (acc_real)0) return (acc_real)1 / ((acc_real)1 + ew_exp(-x));
    acc_real e = ew_exp(x);
    return e / ((acc_real)1 + e);
}

// cumath's functions through the math API's overload set: a float build (and a 16-bit one, whose
// compute_t is float) calls the single-precision functions (sinf ...), a double build the double
// ones, an int build (which Python launches with floor, ceil, trunc, square and sign only) goes
// through double.
template <class T> struct MathType { typedef double type; };
template <> struct MathType<float> { typedef float type; };
typedef MathType<acc_real>::type mreal;

// NumPy's sign: 0 for either zero, NaN for NaN.
__device__ __forceinline__ acc_real ew_sign(acc_real x) {
    return x > (acc_real)0 ? (acc_real)1 : (x < (acc_real)0 ? (acc_real)-1 : (x == (acc_real)0 ? (acc_real)0 : x));
}

// The opcodes defined on every type a build may be, complex numbers included (NumPy's arithmetic and
// exp, log, sqrt, abs, conj): field_unary_op / field_binary_op. A complex build (-Dreal=cfloat or
// cdouble) runs only these (gpublas/core/elementwise.py refuses the others for complex arrays; they return
// x or a here) and never instantiates the real-only cases of unary_op / binary_op.
template <int OP, class T>
__device__ __forceinline__ T field_unary_op(T x, T p0) {
    switch (OP) {
        case EW_NEG: return -x;
        case EW_EXP: return ew_exp(x);
        case EW_LOG: return ew_log(x);
        case EW_SQRT: return ew_sqrt(x);
        case EW_ABS: return ew_abs(x);
        case EW_ADD_S: return x + p0;
        case EW_SUB_S: return x - p0;
        case EW_RSUB_S: return p0 - x;
        case EW_MUL_S: return x * p0;
        case EW_DIV_S: return x / p0;
        case EW_RDIV_S: return p0 / x;
        case EW_SQUARE: return x * x;
        case EW_RECIPROCAL: return (T)1 / x;
        case EW_CONJ: if constexpr (is_complex<T>::value) return conj(x); else return x;
        default: return x;
    }
}
template <int OP, class T>
__device__ __forceinline__ T field_binary_op(T a, T b) {
    switch (OP) {
        case BIN_ADD: return a + b;
        case BIN_SUB: return a - b;
        case BIN_MUL: return a * b;
        case BIN_DIV: return a / b;
        default: return a;
    }
}

template <int OP>
__device__ __forceinline__ acc_real unary_op(acc_real x, acc_real p0, acc_real p1) {
    if constexpr (is_complex<acc_real>::value) return field_unary_op<OP>(x, p0);
    else switch (OP) {
        case EW_TANH: return ew_tanh(x);
        case EW_SIGMOID: return ew_sigmoid(x);
        case EW_RELU: return x > (acc_real)0 ? x : (x != x ? x : (acc_real)0);
        case EW_POW_S: return ew_pow(x, p0);
        case EW_RPOW_S: return ew_pow(p0, x);
        case EW_MAX_S: return ew_max(x, p0);
        case EW_MIN_S: return ew_min(x, p0);
        case EW_CLIP: return ew_min(ew_max(x, p0), p1);
        case EW_SIN: return (acc_real)sin((mreal)x);
        case EW_COS: return (acc_real)cos((mreal)x);
        case EW_TAN: return (acc_real)tan((mreal)x);
        case EW_ARCSIN: return (acc_real)asin((mreal)x);
        case EW_ARCCOS: return (acc_real)acos((mreal)x);
        case EW_ARCTAN: return (acc_real)atan((mreal)x);
        case EW_SINH: return (acc_real)sinh((mreal)x);
        case EW_COSH: return (acc_real)cosh((mreal)x);
        case EW_FLOOR: return (acc_real)floor((mreal)x);
        case EW_CEIL: return (acc_real)ceil((mreal)x);
        case EW_TRUNC: return (acc_real)trunc((mreal)x);
        case EW_LOG10: return (acc_real)log10((mreal)x);
        case EW_LOG2: return (acc_real)log2((mreal)x);
        case EW_LOG1P: return (acc_real)log1p((mreal)x);
        case EW_EXPM1: return (acc_real)expm1((mreal)x);
        case EW_EXP2: return (acc_real)exp2((mreal)x);
        case EW_SIGN: return ew_sign(x);
        case EW_INVERT: return ew_invert(x);
        case EW_RINT: return (acc_real)rint((mreal)x);
        default: return field_unary_op<OP>(x, p0);
    }
}

template <int OP>
__device__ __forceinline__ acc_real binary_op(acc_real a, acc_real b) {
    if constexpr (is_complex<acc_real>::value) return field_binary_op<OP>(a, b);
    else switch (OP) {
        case BIN_POW: return ew_pow(a, b);
        case BIN_MAX: return ew_max(a, b);
        case BIN_MIN: return ew_min(a, b);
        case BIN_FLOOR_DIVIDE: return ew_floor_divide(a, b);
        case BIN_REMAINDER: return ew_remainder(a, b);
        case BIN_FMOD: return ew_fmod(a, b);
        case BIN_ARCTAN2: return (acc_real)atan2((mreal)a, (mreal)b);
        case BIN_HYPOT: return (acc_real)hypot((mreal)a, (mreal)b);
        case BIN_AND: case BIN_OR: case BIN_XOR: case BIN_LSHIFT: case BIN_RSHIFT: return bitwise_op<OP>(a, b);
        default: return field_binary_op<OP>(a, b);
    }
}

#define EW_LOOP(i, n) GRID_STRIDE_LOOP(long long, i, n)


// A contiguous layout: every operand's offset is the flat index (NdLayout's walk, without strides).
template <int K>
struct Flat {
    template <class F>
    __device__ __forceinline__ void walk(long long n, F f) const {
        EW_LOOP(i, n) {
            long long off[K];
            for (int k = 0; k < K; ++k) off[k] = i;
            f(off);
        }
    }
};

#if defined(__CUDA_ARCH_SIM__)
// The simulator's float exp and sigmoid: 16 at a time through vector_math.h (a scalar expf is a call g++ cannot
// vectorize: exp of 2^18 floats was 0.45x NumPy's). The walk's elements are gathered 16 at a time in its order
// whatever the layout, a thread's last group padded, so every element gets the vector function's bits (they
// differ from libm's expf in the last bit on some inputs) in every layout and launch geometry.
template <int OP> constexpr bool sim_vector16 = std::is_same<real, float>::value && (OP == EW_EXP || OP == EW_SIGMOID);
template <int OP, class L>
__device__ __forceinline__ void unary_vector16(const real* x, real* y, long long n, const L& lay) {
    gpublas_sim::float16v v = {};
#if !defined(GRID_STRIDE_GPU_FORM)  // (a simulator build of the GPU's loops gathers: its threads have no runs)
    if constexpr (std::is_same<L, Flat<2>>::value) {  // the thread's run, 16 at a time in place
        long long begin, end;
        sim_thread_run(n, begin, end);
        for (long long i = begin; i < end; i += 16) {
            const int m = (int)min(16LL, end - i);
            if (m == 16) memcpy(&v, x + i, sizeof v);
            else for (int l = 0; l < 16; ++l) v[l] = l < m ? (float)load_as(x[i + l]) : 0.0f;
            v = OP == EW_EXP ? exp(v) : sigmoid(v);
            if (m == 16) memcpy(y + i, &v, sizeof v);
            else for (int l = 0; l < m; ++l) y[i + l] = convert<real>(v[l]);
        }
        return;
    }
#endif
    long long at[16];
    int m = 0;
    auto flush = [&]() {
        for (int l = m; l < 16; ++l) v[l] = 0;
        v = OP == EW_EXP ? exp(v) : sigmoid(v);
        for (int l = 0; l < m; ++l) y[at[l]] = convert<real>(v[l]);
        m = 0;
    };
    lay.walk(n, [&](const long long* o) {
        v[m] = (float)load_as(x[o[0]]);
        at[m] = o[1];
        if (++m == 16) flush();
    });
    if (m) flush();
}
#else
template <int OP> constexpr bool sim_vector16 = false;
template <int OP, class L>
__device__ __forceinline__ void unary_vector16(const real*, real*, long long, const L&) {}
#endif

// Operand 0 is x, 1 is y. x and y may be the same array (in-place forms): each element is read
// before it is written, by the same thread, so no pointer here is __restrict__.
template <int OP, class L>
__device__ __forceinline__ void unary_loop(const real* x, real* y, real p0, real p1, long long n, const L& lay) {
    if constexpr (sim_vector16<OP>) {
        unary_vector16<OP>(x, y, n, lay);
    } else {
        const acc_real q0 = load_as(p0), q1 = load_as(p1);
        lay.walk(n, [&](const long long* o) { y[o[1]] = convert<real>(unary_op<OP>(load_as(x[o[0]]), q0, q1)); });
    }
}

template <class L>
__device__ void unary_any(const real* x, real* y, int op, real p0, real p1, long long n, const L& lay) {
    switch (op) {
        case EW_NEG: unary_loop<EW_NEG>(x, y, p0, p1, n, lay); break;
        case EW_EXP: unary_loop<EW_EXP>(x, y, p0, p1, n, lay); break;
        case EW_LOG: unary_loop<EW_LOG>(x, y, p0, p1, n, lay); break;
        case EW_SQRT: unary_loop<EW_SQRT>(x, y, p0, p1, n, lay); break;
        case EW_ABS: unary_loop<EW_ABS>(x, y, p0, p1, n, lay); break;
        case EW_TANH: unary_loop<EW_TANH>(x, y, p0, p1, n, lay); break;
        case EW_SIGMOID: unary_loop<EW_SIGMOID>(x, y, p0, p1, n, lay); break;
        case EW_RELU: unary_loop<EW_RELU>(x, y, p0, p1, n, lay); break;
        case EW_ADD_S: unary_loop<EW_ADD_S>(x, y, p0, p1, n, lay); break;
        case EW_SUB_S: unary_loop<EW_SUB_S>(x, y, p0, p1, n, lay); break;
        case EW_RSUB_S: unary_loop<EW_RSUB_S>(x, y, p0, p1, n, lay); break;
        case EW_MUL_S: unary_loop<EW_MUL_S>(x, y, p0, p1, n, lay); break;
        case EW_DIV_S: unary_loop<EW_DIV_S>(x, y, p0, p1, n, lay); break;
        case EW_RDIV_S: unary_loop<EW_RDIV_S>(x, y, p0, p1, n, lay); break;
        case EW_POW_S: unary_loop<EW_POW_S>(x, y, p0, p1, n, lay); break;
        case EW_RPOW_S: unary_loop<EW_RPOW_S>(x, y, p0, p1, n, lay); break;
        case EW_MAX_S: unary_loop<EW_MAX_S>(x, y, p0, p1, n, lay); break;
        case EW_MIN_S: unary_loop<EW_MIN_S>(x, y, p0, p1, n, lay); break;
        case EW_CLIP: unary_loop<EW_CLIP>(x, y, p0, p1, n, lay); break;
        case EW_SIN: unary_loop<EW_SIN>(x, y, p0, p1, n, lay); break;
        case EW_COS: unary_loop<EW_COS>(x, y, p0, p1, n, lay); break;
        case EW_TAN: unary_loop<EW_TAN>(x, y, p0, p1, n, lay); break;
        case EW_ARCSIN: unary_loop<EW_ARCSIN>(x, y, p0, p1, n, lay); break;
        case EW_ARCCOS: unary_loop<EW_ARCCOS>(x, y, p0, p1, n, lay); break;
        case EW_ARCTAN: unary_loop<EW_ARCTAN>(x, y, p0, p1, n, lay); break;
        case EW_SINH: unary_loop<EW_SINH>(x, y, p0, p1, n, lay); break;
        case EW_COSH: unary_loop<EW_COSH>(x, y, p0, p1, n, lay); break;
        case EW_FLOOR: unary_loop<EW_FLOOR>(x, y, p0, p1, n, lay); break;
        case EW_CEIL: unary_loop<EW_CEIL>(x, y, p0, p1, n, lay); break;
        case EW_TRUNC: unary_loop<EW_TRUNC>(x, y, p0, p1, n, lay); break;
        case EW_LOG10: unary_loop<EW_LOG10>(x, y, p0, p1, n, lay); break;
        case EW_LOG2: unary_loop<EW_LOG2>(x, y, p0, p1, n, lay); break;
        case EW_LOG1P: unary_loop<EW_LOG1P>(x, y, p0, p1, n, lay); break;
        case EW_EXPM1: unary_loop<EW_EXPM1>(x, y, p0, p1, n, lay); break;
        case EW_EXP2: unary_loop<EW_EXP2>(x, y, p0, p1, n, lay); break;
        case EW_SQUARE: unary_loop<EW_SQUARE>(x, y, p0, p1, n, lay); break;
        case EW_RECIPROCAL: unary_loop<EW_RECIPROCAL>(x, y, p0, p1, n, lay); break;
        case EW_SIGN: unary_loop<EW_SIGN>(x, y, p0, p1, n, lay); break;
        case EW_RINT: unary_loop<EW_RINT>(x, y, p0, p1, n, lay); break;
        case EW_CONJ: unary_loop<EW_CONJ>(x, y, p0, p1, n, lay); break;
        case EW_INVERT: unary_loop<EW_INVERT>(x, y, p0, p1, n, lay); break;
    }
}

extern "C" __global__ void unary_real(const real* x, real* y, int op, real p0, real p1, long long n) {
    unary_any(x, y, op, p0, p1, n, Flat<2>());
}

extern "C" __global__ void unary_nd_real(const real* x, real* y, int op, real p0, real p1, long long n,
                                         ND_DIM_PARAMS, ND_STRIDE_PARAMS(sx), ND_STRIDE_PARAMS(sy)) {
    const NdLayout<2> lay = {ND_DIMS, {ND_STRIDES(sx), ND_STRIDES(sy)}};
    unary_any(x, y, op, p0, p1, n, lay);
}

extern "C" __global__ void unary_nd3_real(const real* x, real* y, int op, real p0, real p1, long long n,
                                          ND3_DIM_PARAMS, ND3_STRIDE_PARAMS(sx), ND3_STRIDE_PARAMS(sy)) {
    const Nd3Layout<2> lay = {ND3_DIMS, {ND3_STRIDES(sx), ND3_STRIDES(sy)}};
    unary_any(x, y, op, p0, p1, n, lay);
}

// Operands 0, 1, 2: a, b, out.
template <int OP, class L>
__device__ __forceinline__ void binary_loop(const real* a, const real* b, real* out, long long n, const L& lay) {
    lay.walk(n, [&](const long long* o) { out[o[2]] = convert<real>(binary_op<OP>(load_as(a[o[0]]), load_as(b[o[1]]))); });
}

template <class L>
__device__ void binary_any(const real* a, const real* b, real* out, int op, long long n, const L& lay) {
    switch (op) {
        case BIN_ADD: binary_loop<BIN_ADD>(a, b, out, n, lay); break;
        case BIN_SUB: binary_loop<BIN_SUB>(a, b, out, n, lay); break;
        case BIN_MUL: binary_loop<BIN_MUL>(a, b, out, n, lay); break;
        case BIN_DIV: binary_loop<BIN_DIV>(a, b, out, n, lay); break;
        case BIN_POW: binary_loop<BIN_POW>(a, b, out, n, lay); break;
        case BIN_MAX: binary_loop<BIN_MAX>(a, b, out, n, lay); break;
        case BIN_MIN: binary_loop<BIN_MIN>(a, b, out, n, lay); break;
        case BIN_FLOOR_DIVIDE: binary_loop<BIN_FLOOR_DIVIDE>(a, b, out, n, lay); break;
        case BIN_REMAINDER: binary_loop<BIN_REMAINDER>(a, b, out, n, lay); break;
        case BIN_FMOD: binary_loop<BIN_FMOD>(a, b, out, n, lay); break;
        case BIN_ARCTAN2: binary_loop<BIN_ARCTAN2>(a, b, out, n, lay); break;
        case BIN_HYPOT: binary_loop<BIN_HYPOT>(a, b, out, n, lay); break;
        case BIN_AND: binary_loop<BIN_AND>(a, b, out, n, lay); break;
        case BIN_OR: binary_loop<BIN_OR>(a, b, out, n, lay); break;
        case BIN_XOR: binary_loop<BIN_XOR>(a, b, out, n, lay); break;
        case BIN_LSHIFT: binary_loop<BIN_LSHIFT>(a, b, out, n, lay); break;
        case BIN_RSHIFT: binary_loop<BIN_RSHIFT>(a, b, out, n, lay); break;
    }
}

extern "C" __global__ void binary_real(const real* a, const real* b, real* out, int op, long long n) {
    binary_any(a, b, out, op, n, Flat<3>());
}

extern "C" __global__ void binary_nd_real(const real* a, const real* b, real* out, int op, long long n,
                                          ND_DIM_PARAMS, ND_STRIDE_PARAMS(sa), ND_STRIDE_PARAMS(sb), ND_STRIDE_PARAMS(so)) {
    const NdLayout<3> lay = {ND_DIMS, {ND_STRIDES(sa), ND_STRIDES(sb), ND_STRIDES(so)}};
    binary_any(a, b, out, op, n, lay);
}

extern "C" __global__ void binary_nd3_real(const real* a, const real* b, real* out, int op, long long n,
                                           ND3_DIM_PARAMS, ND3_STRIDE_PARAMS(sa), ND3_STRIDE_PARAMS(sb),
                                           ND3_STRIDE_PARAMS(so)) {
    const Nd3Layout<3> lay = {ND3_DIMS, {ND3_STRIDES(sa), ND3_STRIDES(sb), ND3_STRIDES(so)}};
    binary_any(a, b, out, op, n, lay);
}

template <int OP>
__device__ __forceinline__ bool compare_op(acc_real a, acc_real b) {
    switch (OP) {
        case CMP_EQ: return a == b;
        case CMP_NE: return a != b;
        case CMP_LT: return a < b;
        case CMP_LE: return a <= b;
        case CMP_GT: return a > b;
        default: return a >= b;  // CMP_GE
    }
}

// Operands 0, 1, 2: a, b (unused when b is NULL: the scalar p0 instead), out.
template <int OP, class L>
__device__ __forceinline__ void compare_loop(const real* a, const real* b, real p0, bool* out, long long n,
                                             const L& lay) {
    const acc_real q0 = load_as(p0);
    lay.walk(n, [&](const long long* o) { out[o[2]] = compare_op<OP>(load_as(a[o[0]]), b ? load_as(b[o[1]]) : q0); });
}

template <class L>
__device__ void compare_any(const real* a, const real* b, real p0, bool* out, int op, long long n, const L& lay) {
    switch (op) {
        case CMP_EQ: compare_loop<CMP_EQ>(a, b, p0, out, n, lay); break;
        case CMP_NE: compare_loop<CMP_NE>(a, b, p0, out, n, lay); break;
        case CMP_LT: compare_loop<CMP_LT>(a, b, p0, out, n, lay); break;
        case CMP_LE: compare_loop<CMP_LE>(a, b, p0, out, n, lay); break;
        case CMP_GT: compare_loop<CMP_GT>(a, b, p0, out, n, lay); break;
        case CMP_GE: compare_loop<CMP_GE>(a, b, p0, out, n, lay); break;
    }
}

extern "C" __global__ void compare_nd_real(const real* a, const real* b, real p0, bool* out, int op, long long n,
                                           ND_DIM_PARAMS, ND_STRIDE_PARAMS(sa), ND_STRIDE_PARAMS(sb), ND_STRIDE_PARAMS(so)) {
    const NdLayout<3> lay = {ND_DIMS, {ND_STRIDES(sa), ND_STRIDES(sb), ND_STRIDES(so)}};
    compare_any(a, b, p0, out, op, n, lay);
}

extern "C" __global__ void compare_nd3_real(const real* a, const real* b, real p0, bool* out, int op, long long n,
                                            ND3_DIM_PARAMS, ND3_STRIDE_PARAMS(sa), ND3_STRIDE_PARAMS(sb),
                                            ND3_STRIDE_PARAMS(so)) {
    const Nd3Layout<3> lay = {ND3_DIMS, {ND3_STRIDES(sa), ND3_STRIDES(sb), ND3_STRIDES(so)}};
    compare_any(a, b, p0, out, op, n, lay);
}

// Operands 0..3: cond, x, y, out.
template <class L>
__device__ __forceinline__ void where_loop(const bool* cond, const real* x, const real* y, real* out, long long n,
                                           const L& lay) {
    lay.walk(n, [&](const long long* o) { out[o[3]] = cond[o[0]] ? x[o[1]] : y[o[2]]; });
}

extern "C" __global__ void where_nd_real(const bool* cond, const real* x, const real* y, real* out, long long n,
                                         ND_DIM_PARAMS, ND_STRIDE_PARAMS(sc), ND_STRIDE_PARAMS(sx), ND_STRIDE_PARAMS(sy), ND_STRIDE_PARAMS(so)) {
    const NdLayout<4> lay = {ND_DIMS, {ND_STRIDES(sc), ND_STRIDES(sx), ND_STRIDES(sy), ND_STRIDES(so)}};
    where_loop(cond, x, y, out, n, lay);
}

extern "C" __global__ void where_nd3_real(const bool* cond, const real* x, const real* y, real* out, long long n,
                                          ND3_DIM_PARAMS, ND3_STRIDE_PARAMS(sc), ND3_STRIDE_PARAMS(sx),
                                          ND3_STRIDE_PARAMS(sy), ND3_STRIDE_PARAMS(so)) {
    const Nd3Layout<4> lay = {ND3_DIMS, {ND3_STRIDES(sc), ND3_STRIDES(sx), ND3_STRIDES(sy), ND3_STRIDES(so)}};
    where_loop(cond, x, y, out, n, lay);
}

extern "C" __global__ void axpby_real(compute_t<real> a, const real* x, compute_t<real> b, const real* y, real* out,
                                      long long n) {
    EW_LOOP(i, n) out[i] = convert<real>(a * load_as(x[i]) + b * load_as(y[i]));
}
