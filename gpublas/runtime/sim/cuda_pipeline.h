// cuda_pipeline.h (simulator): CUDA's asynchronous-copy pipeline primitives (<cuda_pipeline.h>:
// __pipeline_memcpy_async, __pipeline_commit, __pipeline_wait_prior), which on sm_80+ compile to
// cp.async / cp.async.commit_group / cp.async.wait_group, emulated as what they promise once waited for.
//
// __pipeline_memcpy_async copies synchronously, at the call: `size` bytes (4, 8 or 16, both addresses
// aligned to it) of which the last `zfill` are zeros instead of source bytes. Commit and wait do nothing:
// every copy has landed before the call returns. Limits: a kernel that reads the destination before
// waiting for it (a race on the GPU) reads the new data here rather than failing; the copies complete in
// program order of each thread, so no interleaving of in-flight copies is simulated. gpublas_sim.h
// includes this file; cuda_src/ kernels include it as on the GPU.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>

static inline void __pipeline_memcpy_async(void* __restrict dst, const void* __restrict src, size_t size,
                                           size_t zfill = 0) {
    if ((size != 4 && size != 8 && size != 16) || zfill > size ||
        (reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % size) {
        std::fprintf(stderr, "__pipeline_memcpy_async: size %zu, zfill %zu, dst %p, src %p: size must be 4, 8 or 16, "
                     "zfill at most size and both addresses aligned to size\n", size, zfill, dst, src);
        std::abort();
    }
    std::memcpy(dst, src, size - zfill);
    std::memset(static_cast<char*>(dst) + (size - zfill), 0, zfill);
}
static inline void __pipeline_commit() {}
static inline void __pipeline_wait_prior(size_t) {}
