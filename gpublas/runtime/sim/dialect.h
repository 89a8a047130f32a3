// dialect.h: the CUDA C language of cuda_src/ as plain C++ (part of the `sim` backend's header).
//
// Emulates: the function and variable qualifiers (__global__, __device__, __shared__ ...), the
// vector types (float2/float4, int4, dim3, uint3 ... with make_*), and the built-in variables
// threadIdx, blockIdx, blockDim, gridDim and warpSize.
// __noinline__ is defined last, in gpublas_sim.h, once every system header is in (see there).
// Limits: __shared__ is `static thread_local` (one copy per OS thread, shared by the fibers of the
// block that thread runs), so a __shared__ variable inside a __device__ function called by several
// kernels is one variable, as it is on the GPU per block; __constant__ and __managed__ are ordinary
// host statics; vector types cover only the ones cuda_src/ uses (no half, no char2/short*), and
// have no operators (CUDA has none either). Built-in variables are per OS thread and rewritten by
// the fiber switcher (fibers.h) before it resumes each fiber.
#pragma once

#include <cstdint>

// ---------------------------------------------------------------------------------------------
// Qualifiers
// ---------------------------------------------------------------------------------------------
// A kernel is `inline`: g++ optimizes and emits only the kernels whose entry points (scheduler.h's
// GPUBLAS_SIM_ENTRY) a library holds, so a unit of a family (backends/sim_build.py) costs its own kernels.
#define __global__ inline
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __restrict__ __restrict
#define __shared__ static thread_local
#define __constant__ static
#define __managed__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __CUDA_ARCH_SIM__ 1
#ifndef CUDART_INF_F
#define CUDART_INF_F __builtin_inff()
#endif

// ---------------------------------------------------------------------------------------------
// Vector types
// ---------------------------------------------------------------------------------------------
#define GPUBLAS_VEC2(T, N, A) \
    struct __attribute__((aligned(A))) N##2 { T x, y; }; \
    static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define GPUBLAS_VEC3(T, N) \
    struct N##3 { T x, y, z; }; \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define GPUBLAS_VEC4(T, N, A) \
    struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
GPUBLAS_VEC2(float, float, 8)   GPUBLAS_VEC3(float, float)   GPUBLAS_VEC4(float, float, 16)
GPUBLAS_VEC2(double, double, 16) GPUBLAS_VEC3(double, double) GPUBLAS_VEC4(double, double, 16)
GPUBLAS_VEC2(int, int, 8)       GPUBLAS_VEC3(int, int)       GPUBLAS_VEC4(int, int, 16)
GPUBLAS_VEC2(unsigned int, uint, 8) GPUBLAS_VEC4(unsigned int, uint, 16)
GPUBLAS_VEC2(long long, longlong, 16)
GPUBLAS_VEC4(char, char, 4)     GPUBLAS_VEC4(unsigned char, uchar, 4)
#undef GPUBLAS_VEC2
#undef GPUBLAS_VEC3
#undef GPUBLAS_VEC4

struct uint3 { unsigned int x, y, z; };
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

// ---------------------------------------------------------------------------------------------
// Built-in variables: per OS thread, rewritten by the scheduler before it resumes a fiber. Each
// module has its own (its kernels read them as the module's thread-locals); the runtime library
// (GPUBLAS_SIM_RUNTIME: runtime.cpp, built once) writes those of the module whose block it runs,
// at the addresses that module's ModuleTls gives for the running OS thread (scheduler.h).
// ---------------------------------------------------------------------------------------------
namespace gpublas_sim {
struct Worker;
struct ModuleTls { uint3* thread_idx; uint3* block_idx; dim3* block_dim; dim3* grid_dim; Worker** worker; };
}  // namespace gpublas_sim
#if defined(GPUBLAS_SIM_RUNTIME)
namespace gpublas_sim {
static thread_local ModuleTls cur_module;  // the module whose block this OS thread runs
}
#define threadIdx (*gpublas_sim::cur_module.thread_idx)
#define blockIdx (*gpublas_sim::cur_module.block_idx)
#define blockDim (*gpublas_sim::cur_module.block_dim)
#define gridDim (*gpublas_sim::cur_module.grid_dim)
#else
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;
#endif
static const int warpSize = 32;

