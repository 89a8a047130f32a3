// scheduler.h: a CUDA grid on the CPU: the block loop of one launch and its errors.
//
// Emulates: a launch (gpublas_launch_<kernel>(record), emitted per kernel by GPUBLAS_SIM_ENTRY)
// runs every block of the grid; blocks are spread over the CPU's cores with OpenMP (a grid under 4,096
// threads only when its kernel said its blocks are heavy: Kernel.spread_blocks). Grid, block and
// arguments come from the record Python packs per call (record.h), and errors are kept per launch,
// so host threads may launch at the same time (the launch runs without the GIL). Each block runs
// its threads as fibers (fibers.h) when the kernel reaches a barrier, as one call of its fissioned
// block function when the compile step could rewrite it (backends/sim_fission.py, fission.h: loops
// over threads between barriers), else as a plain loop over its threads. A memory fault in a block
// (guard.h) becomes a launch error naming the kernel, block and thread; a SIGINT stops the launch
// between blocks.
// The block loop lives in the runtime library (GPUBLAS_SIM_RUNTIME: gpublas/runtime/sim/runtime.cpp, built once
// per compiler, flags and CPU, loaded before any module, backends/sim.py); a module holds its kernels, their
// thunks and entry points only, which call gpublas_sim_launch with the module's ModuleTls (dialect.h), so a
// module's g++ run no longer compiles the runtime (0.7-0.8 s of CPU each).
// Limits: no cooperative groups, no grid-wide sync, no dynamic parallelism, no clusters.
#pragma once

#include <cstdint>
#include <cstdio>

#include "dialect.h"
#include "record.h"
#include "fibers.h"

#if defined(GPUBLAS_SIM_RUNTIME)
#include <algorithm>
#include <string>

#include "guard.h"

namespace gpublas_sim {

static thread_local std::string tls_error;  // the calling thread's last launch error
static thread_local bool tls_faulted = false;         // whether a memory fault stopped it
static thread_local void* tls_fault_addr = nullptr;  // and where

// The message for a fault caught in the block this worker ran.
static void report_fault(Worker* w, const FaultCtx* fc) {
    Launch* L = w->launch;
    const char* what = fc->write == 1 ? "write to" : fc->write == 0 ? "read of" : "access to";
    char msg[320];
    std::snprintf(msg, sizeof msg, "illegal %s address %#zx by %s, thread (%u, %u, %u)%s", what,
                  size_t(reinterpret_cast<uintptr_t>(fc->addr)),
                  block_name().s, threadIdx.x, threadIdx.y, threadIdx.z,
                  w->stacks && static_cast<char*>(fc->addr) >= w->stacks &&
                          static_cast<char*>(fc->addr) < w->stacks + w->stack_size * w->nfibers
                      ? ": the thread's stack overflowed (GPUBLAS_SIM_STACK_KB raises it)" : "");
    if (!L->fault_claimed.exchange(true)) { L->fault_addr = fc->addr; L->faulted.store(true); }
    L->fail(msg);
}

// Runs one block with this thread's fault context armed. A fault anywhere in it (on a fiber's
// stack or this one) longjmps back here; the block's parked fibers are abandoned (the next block
// starts them afresh).
// A fissioned block (fission.h) that fails a barrier check longjmps here too, its error recorded.
static __attribute__((noinline)) void run_block(Worker* w, unsigned n, bool fibers, bool fission, FaultCtx* fc) {
    if (int why = setjmp(fc->back)) {
        if (why == 1) report_fault(w, fc);
        return;
    }
    fc->active = 1;
    if (fission) w->launch->block_thunk(w->launch->args);
    else if (fibers) run_block_fibers(w, n);
    else run_block_fast(w, n);
    fc->active = 0;
}

// Returns 0, or -1 with tls_error set (and tls_faulted when a memory fault stopped it), or -2
// when a SIGINT arrived: the blocks not yet started were skipped.
static int launch(const char* name, void (*thunk)(const char*), void (*block_thunk)(const char*),
                  void (*tls)(ModuleTls*), const char* record) {
    LaunchHeader h;
    std::memcpy(&h, record, sizeof h);
    const unsigned gx = h.dims[0], gy = h.dims[1], gz = h.dims[2];
    const unsigned nthreads = h.dims[3] * h.dims[4] * h.dims[5];
    const long nblocks = long(gx) * gy * gz;
    if (nblocks == 0 || nthreads == 0) return 0;
    const bool fission = (h.flags & 8) && block_thunk;
    const bool fibers = (h.flags & 1) && !fission;
    const int order = (h.flags >> 1) & 3;
    const size_t shmem = h.shmem;
    ensure_handlers(nblocks >= 16);
    Launch L;
    L.name = name;
    L.thunk = thunk;
    L.block_thunk = block_thunk;
    L.args = record;
    L.interrupts = g_rt->interrupts.load();
    const long total = nblocks * nthreads;
    const int chunk = int(std::max(1L, nblocks / 64));
    auto block = [&](long b) {
        if (L.failed.load(std::memory_order_relaxed) || L.interrupted.load(std::memory_order_relaxed)) return;
        if (g_rt->interrupts.load(std::memory_order_relaxed) != L.interrupts) { L.interrupted.store(true); return; }
        Worker* w = worker(fibers ? nthreads : 0);
        if (!w) { L.fail("cannot map fiber stacks"); return; }
        tls(&cur_module);  // the launching module's built-in variables and Worker, for this OS thread
        *cur_module.worker = w;
        w->launch = &L;
        w->fast = !fibers;  // also when fissioned: a barrier the transform missed is reported
        w->nthreads = nthreads;
        w->order = order;
        w->rng = (uint64_t(h.seed) << 32) ^ uint64_t(b) * 0x2545F4914F6CDD1Dull;
        if (w->dyn_smem.size() < shmem + 16) w->dyn_smem.assign(shmem + 16, 0);
        blockDim = dim3(h.dims[3], h.dims[4], h.dims[5]);
        gridDim = dim3(gx, gy, gz);
        blockIdx = uint3{unsigned(b % gx), unsigned((b / gx) % gy), unsigned(b / (long(gx) * gy))};
        run_block(w, nthreads, fibers, fission, fault_ctx());
    };
    if (nblocks > 1 && (total >= 4096 || (h.flags & 16))) {  // 16: Kernel.spread_blocks (heavy blocks)
#pragma omp parallel for schedule(dynamic, chunk)
        for (long b = 0; b < nblocks; ++b) block(b);
    } else {  // a small launch: no OpenMP region (entering one costs as much as running the launch)
        for (long b = 0; b < nblocks; ++b) block(b);
    }
    if (L.failed.load()) {
        tls_error = L.message;
        tls_faulted = L.faulted.load();
        tls_fault_addr = L.fault_addr;
        return -1;
    }
    return L.interrupted.load() ? -2 : 0;
}

}  // namespace gpublas_sim

extern "C" __attribute__((visibility("default"))) int gpublas_sim_launch(
        const char* name, void (*thunk)(const char*), void (*block_thunk)(const char*),
        void (*tls)(gpublas_sim::ModuleTls*), const char* record) {
    return gpublas_sim::launch(name, thunk, block_thunk, tls, record);
}
// A fissioned block (fission.h) that failed a barrier check, its error recorded: back to run_block.
extern "C" __attribute__((visibility("default"), noreturn)) void gpublas_sim_abandon_block() {
    gpublas_sim::FaultCtx* fc = gpublas_sim::fault_ctx();
    fc->active = 0;
    longjmp(fc->back, 2);
}
extern "C" __attribute__((visibility("default"))) const char* gpublas_sim_error() {
    return gpublas_sim::tls_error.c_str();  // the calling thread's last failed launch
}
extern "C" __attribute__((visibility("default"))) int gpublas_sim_fault(void** addr) {
    *addr = gpublas_sim::tls_fault_addr;  // whether a memory fault stopped it, and where
    return gpublas_sim::tls_faulted;
}
#else
// A module's side: the runtime library's launch and block abandon (resolved when the module loads),
// and where this module's built-in variables and Worker pointer are for the calling OS thread.
extern "C" __attribute__((visibility("default"))) int gpublas_sim_launch(
        const char* name, void (*thunk)(const char*), void (*block_thunk)(const char*),
        void (*tls)(gpublas_sim::ModuleTls*), const char* record);
extern "C" __attribute__((visibility("default"), noreturn)) void gpublas_sim_abandon_block();
namespace gpublas_sim {
static void module_tls(ModuleTls* t) {
    *t = ModuleTls{&threadIdx, &blockIdx, &blockDim, &gridDim, &tls_worker};
}
}  // namespace gpublas_sim
#endif

#define GPUBLAS_SIM_ENTRY(K) GPUBLAS_SIM_ENTRY_WITH(K, nullptr)
#define GPUBLAS_SIM_ENTRY_WITH(K, BLOCK_THUNK)                                                      \
    static void gpublas_thunk_##K(const char* rec) { gpublas_sim::invoke(&K, rec); }               \
    extern "C" __attribute__((visibility("default"))) int gpublas_launch_##K(const char* record) { \
        return gpublas_sim_launch(#K, &gpublas_thunk_##K, BLOCK_THUNK, &gpublas_sim::module_tls, record); \
    }                                                                                               \
    extern "C" __attribute__((visibility("default"))) int gpublas_arglayout_##K(int* sizes, int* offsets) { \
        return gpublas_sim::arg_layout(&K, sizes, offsets);                                         \
    }

