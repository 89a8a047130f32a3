// gpublas_sim.h: the CUDA C dialect of cuda_src/ on a CPU, for the `sim` backend.
//
// The host C++ compiler builds a .cu file with this header force-included (-include). Each kernel
// becomes a plain C++ function of one thread; gpublas appends an entry point per kernel
// (GPUBLAS_SIM_ENTRY, scheduler.h) that runs the whole grid. The emulation is split by concern,
// each file opening with what it emulates and its limits:
//   buffer.h      the growable arrays the modules and the runtime library share
//   dialect.h     qualifiers, vector types, built-in variables
//   guard.h       fault catching (memcheck) and Ctrl-C between blocks, for the host's sake (runtime only)
//   record.h      the record one launch carries: header, packed arguments, the launch's error
//   fibers.h      a block's threads as fibers, __syncthreads and the warp barrier
//   scheduler.h   the grid's block loop over the cores, launch errors, the per-kernel entry points
//   runtime.cpp   not a header: defines GPUBLAS_SIM_RUNTIME and includes this one, so that the block loop,
//                 fiber scheduler and fault handling above compile once, into the runtime library every
//                 module launches through (the modules' own builds leave them out)
//   intrinsics.h  warp shuffles and votes, atomics, math and bit intrinsics
//   fission.h     blocks of barrier kernels as loops over their threads (backends/sim_fission.py)
//   wmma.h        nvcuda::wmma (tensor cores), warp-collective
//   mma_sync.h    mma.sync m16n8k8 TF32 (cuda_src/mma.cuh's mma_tf32_m16n8k8), warp-collective
//   cuda_pipeline.h  cp.async (__pipeline_memcpy_async / commit / wait_prior), synchronous
// cuda_fp16.h and cuda_bf16.h (__half, __nv_bfloat16) are not force-included: common.cuh includes
// them, as it includes NVIDIA's on a GPU, and transpose_runs.h (its load_runs_transposed's shuffles).
// How it was designed and what it costs: docs/sim-backend.md. cuda_runtime.h and mma.h here are empty
// stand-ins so that a .cu's own #include lines resolve.
// What a module sees (the side without GPUBLAS_SIM_RUNTIME) includes no libstdc++ container, string,
// mutex or algorithm header: they were half of the precompiled header's build and size (buffer.h). A
// kernel source that wants one includes it itself (<vector>, <string>, <algorithm>, <mutex> parse with the
// __noinline__ macro below defined; <memory> does not).
#pragma once

// Before any header declares it: a kernel's tanhf (and tanh of a float) calls intrinsics.h's
// gpublas_sim_tanhf, not glibc's (about 2.5x slower, through expm1f). expf stays glibc's: the sim's own
// (an out-of-line call like this one) was slower than it in softmax_xent_forward (152 -> 191 us).
#pragma redefine_extname tanhf gpublas_sim_tanhf

#include "buffer.h"   // the growable arrays the modules and the runtime share (no libstdc++ containers)
#include "dialect.h"
#include "record.h"
#include "fibers.h"
#include "scheduler.h"
#include "intrinsics.h"
#include "fission.h"  // the runtime of kernels whose blocks run as loops over threads
#include "wmma.h"
#include "mma_sync.h"
#include "cuda_pipeline.h"  // cp.async pipeline primitives as synchronous copies

// __noinline__ last: libstdc++ spells GCC's attribute with that reserved name in some of its headers
// (__attribute__((__noinline__)) in bits/shared_ptr_base.h since GCC 12, [[__gnu__::__noinline__]] in
// others), and a macro of that name defined before them breaks them ("'noinline' was not declared in this
// scope": CUDA's nvcc has it as a keyword, not a macro). So every system header a kernel or the stand-in
// headers (cuda_fp16.h, cuda_pipeline.h, transpose_runs.h) include comes in before it; a system header a .cu
// includes itself afterwards is parsed with the macro defined.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <type_traits>
#define __noinline__ __attribute__((noinline))
