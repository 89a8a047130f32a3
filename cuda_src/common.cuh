// common.cuh: the device header every kernel family shares (cuda_src/*.cu, nn/cuda/*.cu and the
// kernels gpublas.ReductionKernel generates include it). Each idea here is written once:
//
//   ceil_div(a, b)                   a / b rounded up, host and device
//   GRID_STRIDE_LOOP(I, i, n)        for i in [0, n) in a grid-stride loop of index type I: long long,
//                                    or unsigned where small_index(n) holds (n < 2^31, so i + stride
//                                    cannot wrap) and the loop body's index math runs in 32 bits. On the
//                                    simulator each thread walks one contiguous run instead (see below)
//   GRID_STRIDE_FOLD(I, i, n, acc, op, expr)   acc = op(expr, acc) for every i of GRID_STRIDE_LOOP; on the
//                                    simulator in SIM_FOLD_LANES independent partials added in a fixed tree
//   STRIDED_FOLD(I, i, begin, end, me, count, acc, op, expr)   the same for worker `me` of `count` over
//                                    [begin, end): i = begin + me, step count on a GPU; a run on the simulator
//   UNIT_STRIDES(cond, ...);         the statements `...`, and on the simulator a second copy of them taken
//                                    when cond holds, with incx = incy = 1 as constants (g++ vectorizes
//                                    unit-stride loops only); a GPU compiles the statements alone
//   compute_t<T>, load_as(x)         the type a kernel computes in for storage type T (float for
//   convert<T>(v), acc_real          __half and __nv_bfloat16, T itself otherwise) and an element read
//                                    as it; v (any storage or compute type) as a T, rounded once to
//                                    nearest even where T is narrower (CUDA's __float2half_rn ...);
//                                    acc_real is compute_t<real> in a family built for `real`
//   load_run_as(p, out[, n])         a run of consecutive elements as their compute type (vector
//                                    conversions of 16-bit runs on the simulator)
//   load_runs_transposed(p, at, n, out)   W runs (a multiple of 8) read as the rows of their transpose, as
//                                    their compute type (vector shuffles on the simulator)
//   ew_exp, ew_log, ew_sqrt, ew_abs, ew_tanh, ew_pow   float/double overloads (expf for float), int builds;
//                                    exp, log, sqrt and abs of complex numbers too
//   gcomplex<R>, cfloat, cdouble     complex numbers in cuComplex's layout, NumPy's arithmetic (conj, conj_if, abs1)
//   SumOp / MaxOp / MinOp<T>         combiners; MaxOp and MinOp propagate NaN (a NaN anywhere wins)
//   warp_reduce(v, op[, lanes])      shuffle-down tree inside a warp: lane 0 ends with op over the warp
//                                    (over its first `lanes` threads: warp_lanes() for a partial last warp)
//   warp_allreduce(v, op[, width, adjacent_first])   op over each group of `width` consecutive lanes (the warp,
//                                    or the 4 lanes of an mma fragment's row), in every lane of the group: a
//                                    butterfly of xor shuffles, warp_reduce's tree unless adjacent_first
//   block_reduce(v, op, identity)    op over every thread of the block (1-, 2- or 3-D), valid in thread
//                                    0: warps reduce with shuffles, one value per warp goes through
//                                    shared memory and one barrier, warp 0 reduces those. Call it once
//                                    per kernel, or put a __syncthreads() between two calls. On the
//                                    simulator thread 0 computes the same tree from every thread's value
//                                    (warp_reduce_serial; one barrier, no shuffle rounds): the same bits
//   block_allreduce(v, op, identity) the same result handed to every thread (two barriers); may be
//                                    called back to back
//   block_reduce_pair(v, i, better)  (value, index) version for argmax / argmin: `better(bv, bi, av, ai)`
//                                    says whether candidate (bv, bi) beats (av, ai); valid in thread 0
//   warp_inclusive_scan(v)           lane l gets v summed over lanes 0..l (shuffles up)
//   block_exclusive_scan(v, total)   thread t of a 1-D block (blockDim.x a multiple of 32) gets v summed
//                                    over threads 0..t-1, every thread the block's total: warps scan
//                                    with shuffles, warp totals go through shared memory (two
//                                    barriers). Once per kernel, or a __syncthreads() between calls.
//   ACT_*, act_apply, act_grad_from_output   the fused activations of nn's kernels (nn.kernels.ACT reads
//                                    the ACT_* codes from here); the gradient from the forward OUTPUT
//   report_bad_index(check, site, v, pos, limit)   a device-side index check: records the first bad
//                                    index for the host to raise at its next synchronization
//   FastDivmod, div_mod(n, d, rem)   n / d and n % d for 0 <= n, d < 2^31 with one __umulhi and a
//                                    shift (CUTLASS's FastDivmod): the multiplier is computed on the
//                                    host (gpublas.runtime.launch.fast_divisor packs it with d into one
//                                    unsigned long long kernel argument), the shift from d on the
//                                    device (__clz); div_mod falls back to a division for 64-bit n
//   NdLayout<K>, Nd3Layout<K>        strided layouts of K operands (the _nd and _nd3 kernels): up to 8
//                                    axes, or at most 3 with FastDivmod index math; walk(n, f) calls
//                                    f(offsets) per element in a grid-stride loop
//
// Every reduction combines values in an order fixed by the launch shape alone, never by the order
// threads run in: results are bit-identical run to run (and under the simulator's thread orders).
#pragma once

#include <cuda_fp16.h>  // __half and __nv_bfloat16: NVIDIA's on a GPU, gpublas/sim's on the simulator
#include <cuda_bf16.h>
#if defined(__CUDA_ARCH_SIM__)
#include "transpose_runs.h"  // gpublas/sim's: load_runs_transposed's vector shuffles
// (gpublas/sim's vector_math.h, exp, tanh and sigmoid of a run of 16 floats, comes with the force-included
// gpublas_sim.h)
#endif

#define FULL_MASK 0xffffffffu

__host__ __device__ __forceinline__ long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

// True when every index below n fits a 32-bit int (the fast path of the index helpers).
__host__ __device__ __forceinline__ bool small_index(long long n) { return n < 0x7fffffffLL; }

// The grid-stride loop. A GPU wants neighbouring threads on neighbouring elements (coalesced loads), each
// thread stepping by the grid's width. A CPU running the threads one after another wants the opposite: a
// simulated thread takes one contiguous run [g * run, (g + 1) * run) of the n elements (g its index in the
// grid, run = ceil(n / threads) rounded up to 16), so its loop has unit stride, stays in its cache lines and
// is vectorized by g++; the launchers give flat kernels about a thousand elements a thread there
// (gpublas.runtime.launch.SIM_RUN). Each element is still visited once, by one thread, in increasing order
// within the thread. GRID_STRIDE_GPU_FORM builds the GPU's form on the simulator (the tests run both).
#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
// Worker `me` of `count` over [begin, end): its run [begin + me * run, ...), run = ceil(len / count) rounded
// up to 16 elements (whole 64-byte lines of floats), cut at end.
template <class I> __device__ __forceinline__ I sim_run_length(I len, I count) {
    return ((len + count - 1) / count + 15) / 16 * 16;
}
template <class I> __device__ __forceinline__ I sim_run_end(I at, I run, I end) {
    return at < end ? (end - at < run ? end : at + run) : at;
}
// This simulated thread's run [begin, end) of GRID_STRIDE_LOOP's over n items, for a simulator form that walks
// its run itself (in segments, vectors of 16); false when it is empty.
__device__ __forceinline__ bool sim_thread_run(long long n, long long& begin, long long& end) {
    const long long run = sim_run_length<long long>(n, (long long)gridDim.x * blockDim.x);
    begin = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * run;
    end = sim_run_end<long long>(begin, run, n);
    return begin < end;
}
#define GRID_STRIDE_LOOP(I, i, n) \
    for (I i##_run = sim_run_length<I>((I)(n), (I)gridDim.x * blockDim.x), \
           i = ((I)blockIdx.x * blockDim.x + threadIdx.x) * i##_run, i##_end = sim_run_end<I>(i, i##_run, (I)(n)); \
         i < i##_end; ++i)
// acc = op(expr(i), acc) over the worker's run in SIM_FOLD_LANES partials (64 bytes of floats), element i
// going to partial (i - run start) % SIM_FOLD_LANES, the partials then combined pairwise (0 with 8, 1 with
// 9, ..., then 0 with 4, ...) into acc: independent chains g++ vectorizes, the order fixed by the shape and
// the launch alone. acc holds op's identity on entry.
#define SIM_FOLD_LANES 16
#define STRIDED_FOLD(I, i, begin, end, me, count, acc, op, expr) \
    do { \
        const I i##_run = sim_run_length<I>((I)(end) - (I)(begin), (I)(count)); \
        const I i##_begin = (I)(begin) + (I)(me) * i##_run; \
        const I i##_end = sim_run_end<I>(i##_begin, i##_run, (I)(end)); \
        const auto i##_op = op; \
        decltype(acc) i##_lanes[SIM_FOLD_LANES]; \
        for (int l_ = 0; l_ < SIM_FOLD_LANES; ++l_) i##_lanes[l_] = acc; \
        I i##_at = i##_begin; \
        for (; i##_at + SIM_FOLD_LANES <= i##_end; i##_at += SIM_FOLD_LANES) \
            for (int l_ = 0; l_ < SIM_FOLD_LANES; ++l_) { \
                const I i = i##_at + l_; \
                i##_lanes[l_] = i##_op(expr, i##_lanes[l_]); \
            } \
        for (int l_ = 0; i##_at + l_ < i##_end; ++l_) { \
            const I i = i##_at + l_; \
            i##_lanes[l_] = i##_op(expr, i##_lanes[l_]); \
        } \
        for (int w_ = SIM_FOLD_LANES / 2; w_ > 0; w_ /= 2) \
            for (int l_ = 0; l_ < w_; ++l_) i##_lanes[l_] = i##_op(i##_lanes[l_ + w_], i##_lanes[l_]); \
        acc = i##_lanes[0]; \
    } while (0)
#define GRID_STRIDE_FOLD(I, i, n, acc, op, expr) \
    STRIDED_FOLD(I, i, 0, n, (I)blockIdx.x * blockDim.x + threadIdx.x, (I)gridDim.x * blockDim.x, acc, op, expr)
// STRIDED_FOLD of load_as(p[i]); the max and min of floats, doubles and integers read p in 32-byte vectors
// (sim_vector_fold, below: the array form's selects are a compare and a branch per element)
#define STRIDED_FOLD_LOAD(I, i, begin, end, me, count, acc, op, p) \
    do { \
        if (!sim_vector_fold<I>(p, begin, end, me, count, acc, op)) \
            STRIDED_FOLD(I, i, begin, end, me, count, acc, op, load_as((p)[i])); \
    } while (0)
#define UNIT_STRIDES(cond, ...) \
    if (cond) { constexpr long long incx = 1, incy = 1; (void)incx; (void)incy; __VA_ARGS__ } else { __VA_ARGS__ }
#else
#define GRID_STRIDE_LOOP(I, i, n) \
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)(n); i += (I)gridDim.x * blockDim.x)
#define GRID_STRIDE_FOLD(I, i, n, acc, op, expr) \
    GRID_STRIDE_LOOP(I, i, n) acc = op(expr, acc)
#define STRIDED_FOLD(I, i, begin, end, me, count, acc, op, expr) \
    for (I i = (I)(begin) + (me); i < (I)(end); i += (count)) acc = op(expr, acc)
#define STRIDED_FOLD_LOAD(I, i, begin, end, me, count, acc, op, p) \
    STRIDED_FOLD(I, i, begin, end, me, count, acc, op, load_as((p)[i]))
#define UNIT_STRIDES(cond, ...) __VA_ARGS__
#endif

// A device-side index check (gpublas/runtime/device_checks.py): a kernel that meets an index outside [0, limit)
// records it in check[0..2] = {site, position << 32 | (unsigned)value, limit} and carries on; the host
// raises IndexError at its next synchronization. The first site to report holds the record until the
// host clears it (launches run in order, so that is the earliest launch's); within it the smallest
// position wins (atomicMin; the host clears slot 1 to all ones), the same one under any thread order.
// A NULL check records nothing.
__device__ __forceinline__ void report_bad_index(long long* check, int site, int value, long long position,
                                                 long long limit) {
    unsigned long long* c = (unsigned long long*)check;
    if (c != nullptr) {  // NULL: the launcher asked for no check
        const unsigned long long prev = atomicCAS(&c[0], 0ull, (unsigned long long)site);
        if (prev == 0ull || prev == (unsigned long long)site) {  // else an earlier launch's report stands
            atomicMin(&c[1], ((unsigned long long)position << 32) | (unsigned)value);
            c[2] = (unsigned long long)limit;
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Storage types: 16-bit floats are loaded as float, computed in float and rounded once when stored
// (as CUDA's own bf16 arithmetic and PyTorch do); every other type computes as itself. A new
// storage type is one more Compute specialization (and its row in gpublas/runtime/dtypes.py).
// ---------------------------------------------------------------------------------------------------
template <class T> struct Compute { typedef T type; };
template <> struct Compute<__half> { typedef float type; };
template <> struct Compute<__nv_bfloat16> { typedef float type; };
template <class T> using compute_t = typename Compute<T>::type;

template <class T> __device__ __forceinline__ compute_t<T> load_as(T x) { return (compute_t<T>)x; }

// out[j] = load_as(p[j]) for the n consecutive elements p[0 .. n - 1] (N: a length fixed at compile time). The
// GPU reads them one by one, as load_as; the simulator converts a 16-bit run with vector instructions
// (gpublas/sim's to_floats).
template <class T>
__device__ __forceinline__ void load_run_as(const T* __restrict__ p, compute_t<T>* out, int n) {
#if defined(__CUDA_ARCH_SIM__)
    if constexpr (sizeof(T) == 2 && sizeof(compute_t<T>) == 4) {  // __half, __nv_bfloat16
        gpublas_sim::to_floats(p, out, n);
        return;
    }
#endif
    for (int j = 0; j < n; ++j) out[j] = load_as(p[j]);
}
template <int N, class T>
__device__ __forceinline__ void load_run_as(const T* __restrict__ p, compute_t<T> (&out)[N]) {
#if defined(__CUDA_ARCH_SIM__)
    load_run_as(p, out, N);
#else
#pragma unroll
    for (int j = 0; j < N; ++j) out[j] = load_as(p[j]);
#endif
}

// out[k][r] = load_as(p[at[r] + k]) for k < n, r < W: the W runs p + at[r] (each n consecutive elements; W a
// multiple of 8) as the rows of their transpose. The GPU reads them one by one; the simulator transposes 8 values
// of 8 runs at a time with vector shuffles (gpublas/sim's transpose_runs), 16-bit runs converted first
// (load_run_as).
template <int W, class T>
__device__ __forceinline__ void load_runs_transposed(const T* __restrict__ p, const long long (&at)[W], int n,
                                                     compute_t<T> (*out)[W]) {
#if defined(__CUDA_ARCH_SIM__)
    if constexpr (sizeof(T) == sizeof(compute_t<T>)) {
        gpublas_sim::transpose_runs(p, at, n, out);
    } else {  // converted 32 values of each run at a time, then transposed
        constexpr int CHUNK = 32;
        compute_t<T> runs[W][CHUNK];
        long long runs_at[W];
        for (int r = 0; r < W; ++r) runs_at[r] = r * CHUNK;
        for (int k0 = 0; k0 < n; k0 += CHUNK) {
            const int len = n - k0 < CHUNK ? n - k0 : CHUNK;
            for (int r = 0; r < W; ++r) load_run_as(p + at[r] + k0, runs[r], len);
            gpublas_sim::transpose_runs(&runs[0][0], runs_at, len, out + k0);
        }
    }
    return;
#endif
    for (int k = 0; k < n; ++k)
        for (int r = 0; r < W; ++r) out[k][r] = load_as(p[at[r] + k]);
}

// v as a T: storage types widen to their compute type first (exactly), then one C conversion, which
// for a 16-bit T is CUDA's round-to-nearest-even constructor from float, double or an integer.
// A copy (S == T) keeps every bit, NaN payloads included.
template <class T, class S> struct Convert { static __device__ __forceinline__ T from(S v) { return (T)load_as(v); } };
template <class T> struct Convert<T, T> { static __device__ __forceinline__ T from(T v) { return v; } };
template <class T, class S> __device__ __forceinline__ T convert(S v) { return Convert<T, S>::from(v); }

// ---------------------------------------------------------------------------------------------------
// Complex numbers: gcomplex<R> has cuComplex's layout (cuFloatComplex is a float2, cuDoubleComplex a
// double2: real part x, imaginary part y, aligned to their size), so a complex64 / complex128
// DeviceArray, NumPy's and cuBLAS's buffers are the same bytes. Both backends compile this one
// definition (nvcc on a GPU, g++ on the simulator); cfloat and cdouble are the C types of
// gpublas/runtime/dtypes.py's complex rows (-Dreal=cfloat). A complex type computes as itself. Operators follow
// NumPy: * as (ac - bd, ad + bc), / as NumPy's scaled (Smith's) division, == and != on both parts,
// < <= > >= lexicographic (NumPy's ordering of complex numbers, which its maximum and minimum use).
// A complex scalar kernel parameter passes by value (source.py's codes 'C' and 'Z').
// ---------------------------------------------------------------------------------------------------
template <class R>
struct alignas(2 * sizeof(R)) gcomplex {
    R x, y;
    gcomplex() = default;
    __host__ __device__ __forceinline__ constexpr gcomplex(R re, R im) : x(re), y(im) {}
    template <class S>  // a real number: imaginary part 0 (C's and NumPy's cast); 16-bit floats widen first
    __host__ __device__ __forceinline__ gcomplex(S re) : x((R)(compute_t<S>)re), y((R)0) {}
    template <class S>
    __host__ __device__ __forceinline__ gcomplex(gcomplex<S> z) : x((R)z.x), y((R)z.y) {}
    template <class T>  // the real part as T, only when asked by name: (double)z
    __host__ __device__ __forceinline__ explicit operator T() const { return (T)x; }
    __host__ __device__ __forceinline__ gcomplex& operator+=(gcomplex b) { x += b.x; y += b.y; return *this; }
    __host__ __device__ __forceinline__ gcomplex& operator-=(gcomplex b) { x -= b.x; y -= b.y; return *this; }
    __host__ __device__ __forceinline__ gcomplex& operator*=(gcomplex b) {
        const R re = x * b.x - y * b.y;
        y = x * b.y + y * b.x;
        x = re;
        return *this;
    }
};
typedef gcomplex<float> cfloat;
typedef gcomplex<double> cdouble;
template <class T> struct is_complex { static constexpr bool value = false; };
template <class R> struct is_complex<gcomplex<R> > { static constexpr bool value = true; };

template <class R> __host__ __device__ __forceinline__ gcomplex<R> operator-(gcomplex<R> a) { return {-a.x, -a.y}; }
template <class R> __host__ __device__ __forceinline__ gcomplex<R> operator+(gcomplex<R> a, gcomplex<R> b) {
    return {a.x + b.x, a.y + b.y};
}
template <class R> __host__ __device__ __forceinline__ gcomplex<R> operator-(gcomplex<R> a, gcomplex<R> b) {
    return {a.x - b.x, a.y - b.y};
}
template <class R> __host__ __device__ __forceinline__ gcomplex<R> operator*(gcomplex<R> a, gcomplex<R> b) {
    return {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x};
}
template <class R> __host__ __device__ __forceinline__ gcomplex<R> operator/(gcomplex<R> a, gcomplex<R> b) {
    const R br = b.x < (R)0 ? -b.x : b.x, bi = b.y < (R)0 ? -b.y : b.y;  // NumPy's loops.c.src division
    if (br >= bi) {
        if (br == (R)0 && bi == (R)0) return {a.x / br, a.y / bi};
        const R rat = b.y / b.x, scl = (R)1 / (b.x + b.y * rat);
        return {(a.x + a.y * rat) * scl, (a.y - a.x * rat) * scl};
    }
    const R rat = b.x / b.y, scl = (R)1 / (b.y + b.x * rat);
    return {(a.x * rat + a.y) * scl, (a.y * rat - a.x) * scl};
}
template <class R> __host__ __device__ __forceinline__ bool operator==(gcomplex<R> a, gcomplex<R> b) {
    return a.x == b.x && a.y == b.y;
}
template <class R> __host__ __device__ __forceinline__ bool operator!=(gcomplex<R> a, gcomplex<R> b) { return !(a == b); }
template <class R> __host__ __device__ __forceinline__ bool operator<(gcomplex<R> a, gcomplex<R> b) {
    return a.x < b.x || (a.x == b.x && a.y < b.y);
}
template <class R> __host__ __device__ __forceinline__ bool operator>(gcomplex<R> a, gcomplex<R> b) { return b < a; }
template <class R> __host__ __device__ __forceinline__ bool operator<=(gcomplex<R> a, gcomplex<R> b) {
    return a.x < b.x || (a.x == b.x && a.y <= b.y);
}
template <class R> __host__ __device__ __forceinline__ bool operator>=(gcomplex<R> a, gcomplex<R> b) { return b <= a; }
template <class R> __host__ __device__ __forceinline__ gcomplex<R> conj(gcomplex<R> a) { return {a.x, -a.y}; }
template <class T> __host__ __device__ __forceinline__ T conj(T a) { return a; }  // a real number is its own
template <class T> __host__ __device__ __forceinline__ T conj_if(T a, int cj) { return cj ? conj(a) : a; }
// cuBLAS's |re| + |im| (the magnitude icamax, scasum, LAPACK's pivoting use); |a| for a real number
template <class R> __host__ __device__ __forceinline__ R abs1(gcomplex<R> a) {
    return (a.x < (R)0 ? -a.x : a.x) + (a.y < (R)0 ? -a.y : a.y);
}
template <class T> __host__ __device__ __forceinline__ T abs1(T a) { return a < (T)0 ? -a : a; }

// Warp shuffles move a complex number as its two parts (the hardware shuffles 32-bit words).
template <class R>
__device__ __forceinline__ gcomplex<R> __shfl_down_sync(unsigned mask, gcomplex<R> v, unsigned delta, int width = 32) {
    return {__shfl_down_sync(mask, v.x, delta, width), __shfl_down_sync(mask, v.y, delta, width)};
}
template <class R>
__device__ __forceinline__ gcomplex<R> __shfl_up_sync(unsigned mask, gcomplex<R> v, unsigned delta, int width = 32) {
    return {__shfl_up_sync(mask, v.x, delta, width), __shfl_up_sync(mask, v.y, delta, width)};
}
template <class R>
__device__ __forceinline__ gcomplex<R> __shfl_sync(unsigned mask, gcomplex<R> v, int lane, int width = 32) {
    return {__shfl_sync(mask, v.x, lane, width), __shfl_sync(mask, v.y, lane, width)};
}

// A complex value converts to a real type through its real part (NumPy's astype, C's cast), to bool
// as "nonzero"; complex to complex keeps both parts.
template <class T, class R> struct Convert<T, gcomplex<R> > {
    static __device__ __forceinline__ T from(gcomplex<R> v) { return Convert<T, R>::from(v.x); }
};
template <class R> struct Convert<bool, gcomplex<R> > {
    static __device__ __forceinline__ bool from(gcomplex<R> v) { return v.x != (R)0 || v.y != (R)0; }
};
template <class A, class B> struct Convert<gcomplex<A>, gcomplex<B> > {
    static __device__ __forceinline__ gcomplex<A> from(gcomplex<B> v) { return gcomplex<A>(v); }
};
template <class A> struct Convert<gcomplex<A>, gcomplex<A> > {
    static __device__ __forceinline__ gcomplex<A> from(gcomplex<A> v) { return v; }
};

#ifdef real
// What a family built for `real` computes in. A kernel's scalar parameter of this type is spelled
// compute_t<real> (gpublas/runtime/source.py reads that spelling; the typedef's name it cannot).
typedef compute_t<real> acc_real;
#endif

// ---------------------------------------------------------------------------------------------------
// Math
// ---------------------------------------------------------------------------------------------------
// Math for `real` code: float and double overloads, so float code calls the single-precision
// functions; the templates let an integer build compile. Integer powers are exact, as NumPy's: repeated
// squaring in 64-bit unsigned arithmetic, wrapping as NumPy's do once truncated to T (a GPU's pow of doubles
// is within 2 ulp: 19 ** 3 came out 6858, 3 ** 1 came out 2). A negative exponent (NumPy refuses it; gpublas
// checks scalars only) gives 1 and -1 their powers and 0 otherwise, as the truncated real power would.
template <class T> __device__ __forceinline__ T ew_exp(T x) { return (T)exp((double)x); }
template <class T> __device__ __forceinline__ T ew_log(T x) { return (T)log((double)x); }
template <class T> __device__ __forceinline__ T ew_sqrt(T x) { return (T)sqrt((double)x); }
template <class T> __device__ __forceinline__ T ew_abs(T x) { return x < (T)0 ? -x : x; }
template <class T> __device__ __forceinline__ T ew_tanh(T x) { return (T)tanh((double)x); }
template <class T> __device__ __forceinline__ T ew_pow(T x, T y) {
    if (y < (T)0) return x == (T)1 ? (T)1 : x == (T)-1 ? ((y & (T)1) ? x : (T)1) : (T)0;
    unsigned long long r = 1, b = (unsigned long long)x;
    for (unsigned long long e = (unsigned long long)y; e; e >>= 1) {
        if (e & 1) r *= b;
        b *= b;
    }
    return (T)r;
}
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
// Complex exp, log, sqrt (NumPy's principal branches: log's imaginary part atan2(y, x) in (-pi, pi],
// sqrt's real part >= 0) and |z| as a complex with imaginary part 0 (Python takes |z| of complex
// arrays as hypot of the parts' views, a real array). Each part computes in R's precision.
template <class R> __device__ __forceinline__ gcomplex<R> ew_exp(gcomplex<R> z) {
    const R e = ew_exp(z.x);
    return z.y == (R)0 ? gcomplex<R>(e, z.y) : gcomplex<R>(e * cos(z.y), e * sin(z.y));
}
template <class R> __device__ __forceinline__ gcomplex<R> ew_log(gcomplex<R> z) {
    return {ew_log(hypot(z.x, z.y)), atan2(z.y, z.x)};
}
template <class R> __device__ __forceinline__ gcomplex<R> ew_sqrt(gcomplex<R> z) {
    if (z.x == (R)0 && z.y == (R)0) return {(R)0, z.y};
    if (ew_abs(z.y) == (R)INFINITY) return {(R)INFINITY, z.y};
    const R t = ew_sqrt((ew_abs(z.x) + hypot(z.x, z.y)) * (R)0.5);
    if (z.x >= (R)0) return {t, z.y / (2 * t)};
    return {ew_abs(z.y) / (2 * t), copysign(t, z.y)};
}
template <class R> __device__ __forceinline__ gcomplex<R> ew_abs(gcomplex<R> z) { return {hypot(z.x, z.y), (R)0}; }

// ---------------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------------
template <class T>
struct SumOp {
    __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
template <class T>
struct MaxOp {
    __device__ __forceinline__ T operator()(T a, T b) const { return (a != a || a > b) ? a : b; }
};
template <class T>
struct MinOp {
    __device__ __forceinline__ T operator()(T a, T b) const { return (a != a || a < b) ? a : b; }
};

#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
// STRIDED_FOLD_LOAD's vector form: acc = op over p[i] for worker `me`'s run (STRIDED_FOLD's), when op is the max
// or min of a float, double, int or long long p: the run's 16 lanes in 32-byte vectors, each lane taking the CPU's
// plain max (vmaxps), whether a value was a NaN noted in a separate chain; the lanes combined in STRIDED_FOLD's
// tree (0 with 8, 1 with 9, ..., then 0 with 4, ...). Without a NaN the plain max selects what MaxOp selects: the
// array form's result bit for bit. False (acc untouched) for any other (T, Op), or when the run holds a NaN:
// STRIDED_FOLD then walks it in the array form.
template <class T, class Op> struct SimMinMax { static constexpr int kind = 0; };
template <class T> struct SimMinMax<T, MaxOp<T>> { static constexpr int kind = 1; };
template <class T> struct SimMinMax<T, MinOp<T>> { static constexpr int kind = -1; };
template <class I, class S, class T, class Op>
__device__ __forceinline__ bool sim_vector_fold(const S* __restrict__ p, I begin, I end, I me, I count, T& acc, Op op) {
    constexpr int kind = SimMinMax<T, Op>::kind;
    if constexpr (kind == 0 || !std::is_same<S, T>::value ||
                  !(std::is_floating_point<T>::value || std::is_same<T, int>::value || std::is_same<T, long long>::value)) {
        return false;
    } else {
        typedef T vec __attribute__((vector_size(32)));
        constexpr int L = SIM_FOLD_LANES, W = 32 / sizeof(T), NV = L / W;
        const I run = sim_run_length<I>(end - begin, count);
        const I at0 = begin + me * run, stop = sim_run_end<I>(at0, run, end);
        vec v[NV];
        for (int k = 0; k < NV; ++k) v[k] = vec{} + acc;
        decltype(vec{} != vec{}) nan = {};
        auto fold = [&](int k, vec a) {
            nan |= a != a;
            if constexpr (kind > 0) v[k] = a > v[k] ? a : v[k];
            else v[k] = a < v[k] ? a : v[k];
        };
        I at = at0;
        for (; at + L <= stop; at += L)
            for (int k = 0; k < NV; ++k) {
                vec a;
                memcpy(&a, p + at + k * W, sizeof a);
                fold(k, a);
            }
        T l[L];
        for (int j = 0; j < L; ++j) l[j] = at + j < stop ? p[at + j] : acc;  // the cut end: acc, the identity
        for (int k = 0; k < NV; ++k) {
            vec a;
            memcpy(&a, l + k * W, sizeof a);
            fold(k, a);
        }
        for (int e = 0; e < W; ++e)
            if (nan[e]) return false;
        memcpy(l, v, sizeof l);
        for (int w = L / 2; w > 0; w /= 2)
            for (int j = 0; j < w; ++j) l[j] = op(l[j + w], l[j]);
        acc = l[0];
        return true;
    }
}
#endif

__device__ __forceinline__ int block_thread_id() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ int block_warps() { return (blockDim.x * blockDim.y * blockDim.z + 31) / 32; }

// The lanes of the calling thread's warp that exist: 32, fewer in a block's last warp when the block's thread
// count is not a multiple of 32.
__device__ __forceinline__ int warp_lanes() {
    const int left = blockDim.x * blockDim.y * blockDim.z - (block_thread_id() & ~31);
    return left < 32 ? left : 32;
}

// op over the warp's values, in lane 0: a tree of shuffles down. `lanes` < 32: the warp has only that many
// threads (warp_lanes()); a lane whose partner (lane + offset) does not exist keeps its value: a GPU's shuffle
// from a missing lane returns garbage (it is left out of the mask), which a max would keep.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op, int lanes = 32) {
    const unsigned mask = lanes >= 32 ? FULL_MASK : (1u << lanes) - 1u;
    const int lane = block_thread_id() & 31;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const T other = __shfl_down_sync(mask, v, offset);
        if (lanes >= 32 || lane + offset < lanes) v = op(v, other);  // one return: the sim's fission needs it
    }
    return v;
}

// op over each group of `width` consecutive lanes (a power of two dividing 32: lanes w g .. w g + w - 1), handed to
// every lane of the group (a commutative op gives each the same bits): a butterfly of __shfl_xor_sync. The offsets
// run width / 2, ..., 2, 1, so lane 0 of a warp ends with warp_reduce's tree (warp_reduce_serial computes it on
// one thread), or with adjacent_first 1, 2, ..., width / 2 (attention_half's mma rows: lanes 4g .. 4g + 3). Every
// lane of the warp calls it; width and adjacent_first are constants where it is inlined (the loop unrolls).
template <class T, class Op>
__device__ __forceinline__ T warp_allreduce(T v, Op op, int width = 32, bool adjacent_first = false) {
#pragma unroll
    for (int step = 1; step < width; step <<= 1) {
        const int offset = adjacent_first ? step : width / (2 * step);
        v = op(v, __shfl_xor_sync(FULL_MASK, v, offset));
    }
    return v;
}

// warp_reduce's result in lane 0, computed by one thread from the values a[0 .. n-1] of a warp's n lanes: the
// same pairs in the same order (a lane whose partner is past n keeps its value). a is overwritten.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce_serial(T* a, int n, Op op) {
    for (int offset = 16; offset > 0; offset >>= 1)
        for (int l = 0; l + offset < n && l < offset; ++l) a[l] = op(a[l], a[l + offset]);
    return a[0];
}

#ifndef BLOCK_REDUCE_SERIAL  // -DBLOCK_REDUCE_SERIAL=0 builds the GPU's form on the simulator (for the tests)
#ifdef __CUDA_ARCH_SIM__
#define BLOCK_REDUCE_SERIAL 1  // block_reduce's tree computed by thread 0 (a constant, not #if: the sim's
#else                          // loop fission reads the function as one piece of C++)
#define BLOCK_REDUCE_SERIAL 0
#endif
#endif

template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
    const int tid = block_thread_id();
    if (BLOCK_REDUCE_SERIAL) {
        // The simulator: thread 0 computes the tree of the GPU's code (the else branch) from every thread's
        // value after one barrier, where each of the ten shuffle rounds would be a pass over the block's
        // threads (dot_partial, 16 blocks of 256 on 24.6k values: 142 -> 48 us of CPU). The other threads
        // keep their own v.
        __shared__ T lanes[BLOCK_REDUCE_SERIAL ? 1024 : 1];
        const int threads = blockDim.x * blockDim.y * blockDim.z;
        lanes[tid] = v;
        __syncthreads();
        if (tid == 0) {
            T part[32];
            for (int w = 0; w < 32; ++w)
                part[w] = 32 * w < threads ? warp_reduce_serial(lanes + 32 * w, threads - 32 * w, op) : identity;
            v = warp_reduce_serial(part, threads < 32 ? threads : 32, op);  // warp 0's lanes
        }
    } else {
        __shared__ T warp_part[32];
        const int lane = tid & 31, warp = tid >> 5;
        v = warp_reduce(v, op, warp_lanes());
        if (lane == 0) warp_part[warp] = v;
        __syncthreads();
        v = lane < block_warps() ? warp_part[lane] : identity;
        if (warp == 0) v = warp_reduce(v, op, warp_lanes());
    }
    return v;
}

template <class T, class Op>
__device__ T block_allreduce(T v, Op op, T identity) {
    __shared__ T result;
    v = block_reduce(v, op, identity);
    if (block_thread_id() == 0) result = v;
    __syncthreads();
    return result;  // the next call writes result only after its first barrier, once everyone has read it
}

// warp_reduce for (value, index) pairs; `lanes` as warp_reduce's (a missing partner is never taken).
template <class T, class I, class Better>
__device__ __forceinline__ void warp_reduce_pair(T& v, I& i, Better better, int lanes = 32) {
    const unsigned mask = lanes >= 32 ? FULL_MASK : (1u << lanes) - 1u;
    const int lane = block_thread_id() & 31;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const T ov = __shfl_down_sync(mask, v, offset);
        const I oi = __shfl_down_sync(mask, i, offset);
        if (lane + offset < lanes && better(ov, oi, v, i)) { v = ov; i = oi; }
    }
}

template <class T, class I, class Better>
__device__ void block_reduce_pair(T& v, I& i, Better better) {
    __shared__ T part_v[32];
    __shared__ I part_i[32];
    const int tid = block_thread_id(), lane = tid & 31, warp = tid >> 5;
    warp_reduce_pair(v, i, better, warp_lanes());
    if (lane == 0) { part_v[warp] = v; part_i[warp] = i; }
    __syncthreads();
    if (warp == 0) {
        const int from = lane < block_warps() ? lane : 0;  // lanes past the last warp repeat warp 0's pair
        v = part_v[from];
        i = part_i[from];
        warp_reduce_pair(v, i, better, warp_lanes());
    }
}

template <class T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
        const T u = __shfl_up_sync(FULL_MASK, v, offset);
        if (lane >= offset) v += u;
    }
    return v;
}

template <class T>
__device__ T block_exclusive_scan(T v, T& total) {
    __shared__ T warp_part[32];  // inclusive sums of the warp totals, after the second barrier
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const T inclusive = warp_inclusive_scan(v);
    if (lane == 31) warp_part[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {  // each lane reads and rewrites only its own slot
        const T w = warp_inclusive_scan(lane < warps ? warp_part[lane] : (T)0);
        if (lane < warps) warp_part[lane] = w;
    }
    __syncthreads();
    total = warp_part[warps - 1];
    return (warp > 0 ? warp_part[warp - 1] : (T)0) + inclusive - v;
}

// ---------------------------------------------------------------------------------------------------
// Activations, fused into nn's kernels (bias + activation, conv output, LSTM gates)
// ---------------------------------------------------------------------------------------------------
#define ACT_IDENTITY 0
#define ACT_RELU 1
#define ACT_TANH 2
#define ACT_SIGMOID 3
#define ACT_GELU 4       // x Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))                    (torch's approximate='none')
#define ACT_GELU_TANH 5  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))         (approximate='tanh', GPT-2's)

template <class T>
__device__ __forceinline__ T sigmoid(T v) { return (T)1 / ((T)1 + exp(-v)); }

template <class T>
__device__ __forceinline__ T act_apply(T v, int act) {
    if (act == ACT_RELU) return v > (T)0 ? v : (T)0;
    if (act == ACT_TANH) return tanh(v);
    if (act == ACT_SIGMOID) return sigmoid(v);
    if (act == ACT_GELU) return (T)0.5 * v * ((T)1 + erf(v * (T)0.70710678118654752440));
    if (act == ACT_GELU_TANH) {
        const T k = (T)0.79788456080286535588;  // sqrt(2 / pi)
        return (T)0.5 * v * ((T)1 + tanh(k * (v + (T)0.044715 * v * v * v)));
    }
    return v;
}

// act'(x) written in terms of the forward output y = act(x): relu y > 0, tanh 1 - y^2, sigmoid y (1 - y)
template <class T>
__device__ __forceinline__ T act_grad_from_output(T y, int act) {
    if (act == ACT_RELU) return y > (T)0 ? (T)1 : (T)0;
    if (act == ACT_TANH) return (T)1 - y * y;
    if (act == ACT_SIGMOID) return y * ((T)1 - y);
    return (T)1;  // the GELUs have no form in y: act_grad_from_input (nn.kernels refuses them here)
}

// act'(x) from the forward INPUT x, for activations whose derivative has no form in y (the GELUs):
//   gelu:      Phi(x) + x phi(x) = 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)
//   gelu_tanh: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2), t = tanh(sqrt(2 / pi) (x + 0.044715 x^3))
// the others through act_grad_from_output(act_apply(x))
template <class T>
__device__ __forceinline__ T act_grad_from_input(T x, int act) {
    if (act == ACT_GELU)
        return (T)0.5 * ((T)1 + erf(x * (T)0.70710678118654752440)) +
               x * exp((T)-0.5 * x * x) * (T)0.39894228040143267794;  // 1 / sqrt(2 pi)
    if (act == ACT_GELU_TANH) {
        const T k = (T)0.79788456080286535588, x2 = x * x;
        const T t = tanh(k * (x + (T)0.044715 * x2 * x));
        return (T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * k * ((T)1 + (T)0.134145 * x2);
    }
    return act_grad_from_output(act_apply(x, act), act);
}

// ---------------------------------------------------------------------------------------------------
// Index math
// ---------------------------------------------------------------------------------------------------
// ceil(log2(d)) for 1 <= d < 2^31 (CEIL_LOG2_CLZ builds the device's __clz form on the simulator, for the tests)
__host__ __device__ __forceinline__ int ceil_log2(unsigned d) {
#if defined(__CUDA_ARCH__) || defined(CEIL_LOG2_CLZ)
    int a = 31 - __clz(d);
#else
    int a = 31 - __builtin_clz(d);
#endif
    return a + ((d & (d - 1)) != 0);
}

struct FastDivmod {
    int d;
    unsigned mul, shift;
    // packed = d | multiplier << 32, as gpublas.runtime.launch.fast_divisor(d) builds it (d = 1: multiplier 0)
    __host__ __device__ __forceinline__ explicit FastDivmod(unsigned long long packed)
        : d((int)(packed & 0x7fffffffULL)), mul((unsigned)(packed >> 32)),
          shift(d > 1 ? (unsigned)ceil_log2((unsigned)d) - 1u : 0u) {}
    // n / d for 0 <= n < 2^31
    __device__ __forceinline__ unsigned div(unsigned n) const { return d == 1 ? n : __umulhi(n, mul) >> shift; }
};

// q = n / d and rem = n % d: with a 32-bit index (the small_index path) by the multiplier, with a
// 64-bit one by a plain division. A kernel body templated on its index type is written once.
__device__ __forceinline__ unsigned div_mod(unsigned n, const FastDivmod& d, unsigned& rem) {
    const unsigned q = d.div(n);
    rem = n - q * (unsigned)d.d;
    return q;
}
__device__ __forceinline__ long long div_mod(long long n, const FastDivmod& d, long long& rem) {
    const long long q = n / d.d;
    rem = n - q * d.d;
    return q;
}

// Strided N-d indexing (gpublas/core/layout.py's kernel_dims merges axes first). Two layouts, each with
// walk(n, f): the grid-stride loop over elements [0, n) calling f(off), off[k] being the element's
// offset in operand k, in elements (a stride may be negative, or 0 for a broadcast operand).
//
// NdLayout<K>: up to ND_MAX = 8 axes d[0..7] (outermost first, padded at the front with 1s), 64-bit
// index; element i is placed by dividing down the axes, stopping once the remaining index is 0.
//
// On the simulator both walk a thread's contiguous run (GRID_STRIDE_LOOP's) by rows of the innermost axis
// instead (sim_walk_rows): the run's first element is placed by division once, then the innermost index steps
// along a row and the outer ones carry, so an element costs an add where it cost up to eight 64-bit divisions
// (a (B, H, T, D) -> (B, T, H, D) head merge of 2^15 floats: 0.86 ms -> see memory.cu's header). Rows whose
// operands all step by 1 run as a unit-stride loop g++ vectorizes. The same elements, each once, in the same
// order within a thread as the division form (GRID_STRIDE_GPU_FORM builds that one on the simulator).
// UNIT_LOOP false (NdLayout's: the rare any-layout `_nd` kernels) leaves out that explicit unit-stride loop: g++
// versions the strided loop for stride 1 itself, and the unit loop doubled every op's code (elementwise.cu's `_nd`
// unit, float: 13.1 -> 7.6 s of g++; a 4-axis view of 2^18 floats, x + x, x * 2, x < x, astype, within the
// per-process noise, 0.10-0.16 ms either way, one thread).
#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
// f(off) for the elements of [0, n) in this thread's run, over A axes d[0..A-1] (d[0] only bounds: the run
// ends before axis 0 wraps) and K operands' strides s[k][0..A-1].
template <bool UNIT_LOOP = true, int K, int A, class F>
__device__ __forceinline__ void sim_walk_rows(long long n, const long long (&d)[A], const long long (&s)[K][A], F f) {
    const long long run = sim_run_length<long long>(n, (long long)gridDim.x * blockDim.x);
    long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * run;
    const long long end = sim_run_end<long long>(i, run, n);
    if (i >= end) return;
    long long c[A], row[K] = {};  // the outer coordinates and each operand's offset of their row's start
    long long r = i;
    for (int a = A - 1; a > 0; --a) {
        c[a] = r % d[a];
        r /= d[a];
    }
    c[0] = r;
    for (int a = 0; a < A - 1; ++a)
        for (int k = 0; k < K; ++k) row[k] += c[a] * s[k][a];
    long long step[K];  // locals: g++ need not reload them past f's stores
    bool unit = true;
    for (int k = 0; k < K; ++k) {
        step[k] = s[k][A - 1];
        unit = unit && step[k] == 1;
    }
    const long long width = d[A - 1];
    long long at = c[A - 1];  // the innermost index
    for (;;) {
        const long long m = width - at < end - i ? width - at : end - i;
        if (UNIT_LOOP && unit) {
            for (long long j = at; j < at + m; ++j) {
                long long o[K];
                for (int k = 0; k < K; ++k) o[k] = row[k] + j;
                f(o);
            }
        } else {
            for (long long j = at; j < at + m; ++j) {
                long long o[K];
                for (int k = 0; k < K; ++k) o[k] = row[k] + j * step[k];
                f(o);
            }
        }
        i += m;
        if (i >= end) return;
        at = 0;  // the next row: carry into the outer axes (axis 0 never wraps inside [0, n))
        for (int a = A - 2; a >= 0; --a) {
            ++c[a];
            for (int k = 0; k < K; ++k) row[k] += s[k][a];
            if (a == 0 || c[a] < d[a]) break;
            for (int k = 0; k < K; ++k) row[k] -= c[a] * s[k][a];
            c[a] = 0;
        }
    }
}
#endif
#define ND_MAX 8
// An _nd kernel's parameters are d0..d7 (ND_DIM_PARAMS) and, per operand, <p>0..<p>7
// (ND_STRIDE_PARAMS(p)); the signature parser expands both. ND_DIMS and ND_STRIDES build its
// NdLayout from them: `NdLayout<2> lay = {ND_DIMS, {ND_STRIDES(sx), ...}}`.
#define ND_DIM_PARAMS long long d0, long long d1, long long d2, long long d3, long long d4, long long d5, long long d6, long long d7
#define ND_STRIDE_PARAMS(p) long long p##0, long long p##1, long long p##2, long long p##3, long long p##4, long long p##5, long long p##6, long long p##7
#define ND_DIMS {d0, d1, d2, d3, d4, d5, d6, d7}
#define ND_STRIDES(p) {p##0, p##1, p##2, p##3, p##4, p##5, p##6, p##7}
template <int K>
struct NdLayout {
    long long d[ND_MAX];
    long long s[K][ND_MAX];
    __device__ __forceinline__ void offsets(long long i, long long (&off)[K]) const {
        for (int k = 0; k < K; ++k) off[k] = 0;
#pragma unroll
        for (int a = ND_MAX - 1; a >= 0; --a) {
            if (i == 0) break;
            const long long q = i / d[a], r = i - q * d[a];
            for (int k = 0; k < K; ++k) off[k] += r * s[k][a];
            i = q;
        }
    }
    template <class F>
    __device__ __forceinline__ void walk(long long n, F f) const {
#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
        sim_walk_rows<false>(n, d, s, f);
#else
        GRID_STRIDE_LOOP(long long, i, n) {
            long long off[K];
            offsets(i, off);
            f(off);
        }
#endif
    }
};

// Nd3Layout<K>: the low-rank case most merged layouts reach (a bias broadcast is 2 axes, a
// per-channel scale of NCHW data 3): at most 3 axes and n < 2^31. Dims d1, d2 come as FastDivmod
// divisors (gpublas.runtime.launch.fast_divisor; d0 is what remains), so an element costs two multiply-high
// divisions (none along an axis of size 1), no 64-bit division, and the kernel takes 2 + 3 K
// parameters instead of 8 + 8 K. Parameters: ND3_DIM_PARAMS, then ND3_STRIDE_PARAMS(p) per operand;
// `Nd3Layout<2> lay = {ND3_DIMS, {ND3_STRIDES(sx), ...}}`.
#define ND3_DIM_PARAMS unsigned long long d1, unsigned long long d2
#define ND3_STRIDE_PARAMS(p) long long p##0, long long p##1, long long p##2
#define ND3_DIMS FastDivmod(d1), FastDivmod(d2)
#define ND3_STRIDES(p) {p##0, p##1, p##2}
template <int K>
struct Nd3Layout {
    FastDivmod d1, d2;
    long long s[K][3];
    // off[k..K-1] of the element at coordinates (i0, i1, i2), unrolled over the operands at compile time
    template <int k = 0>
    __device__ __forceinline__ void place(long long (&off)[K], unsigned i0, unsigned i1, unsigned i2) const {
        off[k] = i0 * s[k][0] + i1 * s[k][1] + i2 * s[k][2];
        if constexpr (k + 1 < K) place<k + 1>(off, i0, i1, i2);
    }
    template <class F>
    __device__ __forceinline__ void walk(long long n, F f) const {
#if defined(__CUDA_ARCH_SIM__) && !defined(GRID_STRIDE_GPU_FORM)
        const long long dims[3] = {n, d1.d, d2.d};  // d0 only bounds the walk
        sim_walk_rows(n, dims, s, f);
#else
        const Nd3Layout lay = *this;  // a local copy stays in registers: stores through f cannot change it
        GRID_STRIDE_LOOP(unsigned, i, n) {
            unsigned i1, i2;
            const unsigned q = div_mod(i, lay.d2, i2), i0 = div_mod(q, lay.d1, i1);
            long long off[K];
            lay.place(off, i0, i1, i2);
            f(off);
        }
#endif
    }
};
