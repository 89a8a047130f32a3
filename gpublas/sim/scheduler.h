// scheduler.h: a CUDA grid on the CPU: the block loop, fibers for a block's threads, barriers.
//
// Emulates: a launch (gpublas_launch_<kernel>(record), emitted per kernel by GPUBLAS_SIM_ENTRY) runs
// every block of the grid; blocks are spread over the CPU's cores with OpenMP. Grid, block and
// arguments come from a record Python packs per call, and errors are kept per launch, so host
// threads may launch at the same time (the launch runs without the GIL). The threads of one block
// run on one OS thread as cooperative fibers: a fiber runs until it reaches a barrier
// (__syncthreads, or a warp-level intrinsic for the threads of its warp) and then yields; the
// scheduler releases a barrier when every live thread of its block (or warp) has arrived, exactly
// as on the GPU. Kernels without any barrier (found by backends/sim.py from the source) take a
// fast path: a plain loop over the block's threads, no fibers; barrier kernels the compile step
// could rewrite (backends/sim_fission.py) run each block as one call of their fissioned block
// function instead (fission.h: loops over threads between barriers). Thread order within a pass is
// forward, reverse or random (GPUBLAS_SIM_ORDER), so a race shows up as a changed result.
// Divergent __syncthreads (some threads exited) and warp/block barrier deadlocks become a launch
// error naming the kernel and block; so does a memory fault in a block (guard.h), and a SIGINT
// stops the launch between blocks. Each fiber stack has a guard page below it.
// Limits: fibers switch with a dozen instructions of assembly on x86-64 (no signal-mask system call
// as with swapcontext, see docs/sim-backend.md) and fall back to ucontext elsewhere; each fiber has
// a fixed stack (GPUBLAS_SIM_STACK_KB, default 64 KiB), so deep recursion or large local arrays
// overflow it; no cooperative groups, no grid-wide sync, no dynamic parallelism, no clusters;
// on fibers every barrier switches every thread, so barrier-heavy kernels simulate slowly.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <type_traits>
#include <ucontext.h>
#include <utility>
#include <vector>

#include "dialect.h"
#include "guard.h"

namespace gpublas_sim {

enum FiberState { READY, AT_SYNC, AT_WARP, DONE };
enum Order { FORWARD = 0, REVERSE = 1, RANDOM = 2 };

// ---- context switching -----------------------------------------------------------------------
// On x86-64 a switch saves the six callee-saved registers on the old stack, swaps stack pointers
// and pops the new fiber's registers: a dozen instructions, no system call. Elsewhere it falls
// back to ucontext's swapcontext (correct, slower).
#if defined(__x86_64__)
struct Context { void* sp; };
extern "C" void gpublas_sim_switch(void** save_sp, void* new_sp);
__asm__(".text\n"
        ".p2align 4\n"
        ".hidden gpublas_sim_switch\n"
        ".globl gpublas_sim_switch\n"
        ".type gpublas_sim_switch,@function\n"
        "gpublas_sim_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size gpublas_sim_switch, .-gpublas_sim_switch\n");
static inline void context_switch(Context* from, Context* to) { gpublas_sim_switch(&from->sp, to->sp); }
// A fresh stack whose first switch "returns" into entry with the ABI's alignment.
static inline void context_start(Context* c, char* stack, size_t size, void (*entry)()) {
    uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;                               // entry's return address: it never returns
    *--sp = reinterpret_cast<void*>(entry);        // popped by the switch's `ret`
    for (int i = 0; i < 6; ++i) *--sp = nullptr;   // rbp rbx r12-r15
    c->sp = sp;
}
#else
struct Context { ucontext_t uc; };
static inline void context_switch(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }
static inline void context_start(Context* c, char* stack, size_t size, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, entry, 0);
}
#endif

struct Fiber {
    Context ctx;            // where the fiber is parked
    FiberState state;
    uint3 tid;
    unsigned linear;        // threadIdx flattened: x + y*bx + z*bx*by
    unsigned warp_gen;      // how many warp-level exchanges this thread has made
};

// One slot per lane and buffer parity: value plus the warp_gen stamp that wrote it.
struct WarpSlot { uint64_t value; unsigned stamp; };

struct Worker {
    Context sched;          // the block scheduler's own context
    Fiber* fibers = nullptr;
    unsigned nfibers = 0;   // fibers allocated
    char* stacks = nullptr;
    size_t stack_size = 0;
    Fiber* cur = nullptr;
    unsigned pos = 0;       // position of `cur` in this pass's order
    int order = FORWARD;
    struct Launch* launch = nullptr;  // the launch whose block this worker runs
    bool fast = false;      // fast path: no fibers
    unsigned nthreads = 0;  // threads of the current block
    std::vector<WarpSlot> slots;     // [warp][parity][lane]
    std::vector<unsigned> perm;      // this pass's order when it is random
    std::vector<char> dyn_smem;
    uint64_t rng = 0;
};

// What Python packs for one call (struct.pack, native alignment: backends/sim.py's RECORD): this
// header, then each kernel parameter at its C alignment. Every call has its own record, so launches
// from several host threads never share arguments.
struct LaunchHeader {
    unsigned dims[6];  // grid x, y, z, block x, y, z
    unsigned flags;    // bit 0: fibers needed; bits 1-2: thread order; bit 3: run the fissioned block function
    unsigned seed;     // of the random thread order
    uint64_t shmem;    // dynamic shared memory bytes
};

// One launch in progress: on the launching thread's stack, seen by every worker running its blocks.
struct Launch {
    const char* name;
    void (*thunk)(const char*);  // runs the kernel for one thread with the packed arguments
    void (*block_thunk)(const char*);  // runs a whole block (the fissioned kernel, fission.h), or null
    const char* args;            // the packed record
    std::mutex lock;
    std::string message;
    std::atomic<bool> failed{false};
    unsigned interrupts = 0;  // Runtime::interrupts when the launch began: a change stops it
    std::atomic<bool> interrupted{false};
    std::atomic<bool> faulted{false};
    void* fault_addr = nullptr;
    void fail(const std::string& m) {  // the first error wins
        std::lock_guard<std::mutex> g(lock);
        if (!failed.load()) { message = "kernel '" + std::string(name) + "': " + m; failed.store(true); }
    }
};

static thread_local Worker* tls_worker = nullptr;
static thread_local std::string tls_error;  // the calling thread's last launch error
static thread_local bool tls_faulted = false;         // whether a memory fault stopped it
static thread_local void* tls_fault_addr = nullptr;  // and where

static inline size_t stack_bytes() {
    const char* s = std::getenv("GPUBLAS_SIM_STACK_KB");
    size_t kb = s ? std::strtoul(s, nullptr, 10) : 64;
    return (kb < 16 ? 16 : kb) * 1024;
}

static inline unsigned fiber_at(Worker* w, unsigned k) {
    return w->order == FORWARD ? k : w->order == REVERSE ? w->nthreads - 1 - k : w->perm[k];
}

// Parks the running fiber in `why` and hands the CPU to the next READY fiber of this pass, or
// back to the scheduler when the pass is over. The switcher sets threadIdx for whom it resumes.
static inline void park(Worker* w, FiberState why) {
    Fiber* f = w->cur;
    f->state = why;
    for (unsigned k = w->pos + 1; k < w->nthreads; ++k) {
        Fiber* next = &w->fibers[fiber_at(w, k)];
        if (next->state == READY) {
            w->cur = next;
            w->pos = k;
            threadIdx = next->tid;
            context_switch(&f->ctx, &next->ctx);
            return;
        }
    }
    context_switch(&f->ctx, &w->sched);
}

static void fiber_entry() {
    Worker* w = tls_worker;
    w->launch->thunk(w->launch->args);
    park(w, DONE);  // never resumed: the next block starts every fiber afresh
    __builtin_unreachable();
}

static Worker* worker(unsigned nthreads) {
    Worker* w = tls_worker;
    if (!w) { w = new Worker(); tls_worker = w; }  // lives as long as its OS thread
    if (nthreads > w->nfibers) {
        if (w->stacks) munmap(w->stacks, w->stack_size * w->nfibers);
        delete[] w->fibers;
        w->stack_size = stack_bytes() + 4096;  // + its guard page; 17 pages by default, not a power of two
        w->stacks = static_cast<char*>(mmap(nullptr, w->stack_size * nthreads, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        if (w->stacks == MAP_FAILED) { w->stacks = nullptr; w->nfibers = 0; return nullptr; }
        for (unsigned i = 0; i < nthreads; ++i)  // a guard page under each stack: overflow faults
            mprotect(w->stacks + w->stack_size * i, 4096, PROT_NONE);
        w->fibers = new Fiber[nthreads];
        w->nfibers = nthreads;
    }
    return w;
}

static inline uint64_t next_random(uint64_t& s) {  // splitmix64
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void shuffle_order(Worker* w, unsigned n) {
    w->perm.resize(n);
    for (unsigned i = 0; i < n; ++i) w->perm[i] = i;
    for (unsigned i = n; i > 1; --i) std::swap(w->perm[i - 1], w->perm[next_random(w->rng) % i]);
}

static std::string block_name() {
    char b[96];
    std::snprintf(b, sizeof b, "block (%u, %u, %u)", blockIdx.x, blockIdx.y, blockIdx.z);
    return b;
}

// Runs one block's threads as fibers. Returns false after recording an error.
static bool run_block_fibers(Worker* w, unsigned n) {
    const unsigned bx = blockDim.x, by = blockDim.y;
    for (unsigned i = 0; i < n; ++i) {
        Fiber& f = w->fibers[i];
        // Stack tops staggered by a page (the stride) and a cache line (i & 63): with a power-of-two
        // stride every fiber's top maps to the same L1/L2 sets, and a barrier touches them all.
        context_start(&f.ctx, w->stacks + w->stack_size * i, w->stack_size - (i & 63) * 64, fiber_entry);
        f.state = READY;
        f.linear = i;
        f.tid = uint3{i % bx, (i / bx) % by, i / (bx * by)};
        f.warp_gen = 0;
    }
    const unsigned nwarps = (n + 31) / 32;
    w->slots.assign(size_t(nwarps) * 64, WarpSlot{0, ~0u});
    for (;;) {
        // One pass: every READY fiber runs, in order, until it parks (fibers hand over directly).
        if (w->order == RANDOM) shuffle_order(w, n);
        for (unsigned k = 0; k < n; ++k) {
            Fiber* f = &w->fibers[fiber_at(w, k)];
            if (f->state != READY) continue;
            w->cur = f;
            w->pos = k;
            threadIdx = f->tid;
            context_switch(&w->sched, &f->ctx);
            break;
        }
        // Every fiber has now parked: decide which barrier releases.
        unsigned done = 0, at_sync = 0, released = 0;
        for (unsigned warp = 0; warp < nwarps; ++warp) {
            unsigned lo = warp * 32, hi = std::min(n, lo + 32), wdone = 0, wwarp = 0, wsync = 0;
            for (unsigned i = lo; i < hi; ++i) {
                FiberState s = w->fibers[i].state;
                wdone += s == DONE; wwarp += s == AT_WARP; wsync += s == AT_SYNC;
            }
            done += wdone; at_sync += wsync;
            if (wwarp && !wsync) {
                for (unsigned i = lo; i < hi; ++i)
                    if (w->fibers[i].state == AT_WARP) w->fibers[i].state = READY;
                released += wwarp;
            }
        }
        if (done == n) return true;
        if (released) continue;
        if (at_sync == n - done && done == 0) {
            for (unsigned i = 0; i < n; ++i) w->fibers[i].state = READY;
            continue;
        }
        char msg[256];
        if (at_sync == n - done)
            std::snprintf(msg, sizeof msg, "threads diverge at __syncthreads(): %u of %u threads of %s exited "
                          "while %u wait at the barrier", done, n, block_name().c_str(), at_sync);
        else
            std::snprintf(msg, sizeof msg, "threads of %s deadlock: %u wait at __syncthreads() while others of "
                          "their warp wait at a warp-level intrinsic", block_name().c_str(), at_sync);
        w->launch->fail(msg);
        return false;  // the parked fibers are abandoned; the next block starts them afresh
    }
}

static void run_block_fast(Worker* w, unsigned n) {
    const unsigned bx = blockDim.x, by = blockDim.y;
    if (w->order == RANDOM) shuffle_order(w, n);
    for (unsigned k = 0; k < n; ++k) {
        unsigned i = fiber_at(w, k);
        threadIdx = uint3{i % bx, (i / bx) % by, i / (bx * by)};
        w->launch->thunk(w->launch->args);
    }
}

// The message for a fault caught in the block this worker ran.
static void report_fault(Worker* w, const FaultCtx* fc) {
    Launch* L = w->launch;
    const char* what = fc->write == 1 ? "write to" : fc->write == 0 ? "read of" : "access to";
    char msg[320];
    std::snprintf(msg, sizeof msg, "illegal %s address %#zx by %s, thread (%u, %u, %u)%s", what,
                  size_t(reinterpret_cast<uintptr_t>(fc->addr)),
                  block_name().c_str(), threadIdx.x, threadIdx.y, threadIdx.z,
                  w->stacks && static_cast<char*>(fc->addr) >= w->stacks &&
                          static_cast<char*>(fc->addr) < w->stacks + w->stack_size * w->nfibers
                      ? ": the thread's stack overflowed (GPUBLAS_SIM_STACK_KB raises it)" : "");
    {
        std::lock_guard<std::mutex> g(L->lock);
        if (!L->faulted.load()) { L->fault_addr = fc->addr; L->faulted.store(true); }
    }
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
static int launch(const char* name, void (*thunk)(const char*), void (*block_thunk)(const char*), const char* record) {
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
    ensure_handlers();
    Launch L;
    L.name = name;
    L.thunk = thunk;
    L.block_thunk = block_thunk;
    L.args = record;
    L.interrupts = g_rt->interrupts.load();
    const long total = nblocks * nthreads;
    const int chunk = int(std::max(1L, nblocks / 64));
#pragma omp parallel for schedule(dynamic, chunk) if (nblocks > 1 && total >= 4096)
    for (long b = 0; b < nblocks; ++b) {
        if (L.failed.load(std::memory_order_relaxed) || L.interrupted.load(std::memory_order_relaxed)) continue;
        if (g_rt->interrupts.load(std::memory_order_relaxed) != L.interrupts) { L.interrupted.store(true); continue; }
        Worker* w = worker(fibers ? nthreads : 0);
        if (!w) { L.fail("cannot map fiber stacks"); continue; }
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
    }
    if (L.failed.load()) {
        tls_error = L.message;
        tls_faulted = L.faulted.load();
        tls_fault_addr = L.fault_addr;
        return -1;
    }
    return L.interrupted.load() ? -2 : 0;
}

static inline void* dynamic_shared() {
    Worker* w = tls_worker;
    uintptr_t p = reinterpret_cast<uintptr_t>(w->dyn_smem.data());
    return reinterpret_cast<void*>((p + 15) & ~uintptr_t(15));
}

static inline void misuse(const char* what) {
    tls_worker->launch->fail(std::string("calls ") + what +
                             " but was launched on the simulator's fast path (no fibers); please report this");
}

// Where each parameter of a kernel taking A... sits in the packed record (and, last, its size):
// C's layout rules, which Python's struct module follows in native mode ('@').
template <class... A>
static constexpr std::array<size_t, sizeof...(A) + 1> arg_offsets() {
    const size_t sizes[] = {sizeof(A)..., 0}, aligns[] = {alignof(A)..., 1};
    std::array<size_t, sizeof...(A) + 1> off{};
    size_t at = sizeof(LaunchHeader);
    for (size_t i = 0; i < sizeof...(A); ++i) {
        at = (at + aligns[i] - 1) / aligns[i] * aligns[i];
        off[i] = at;
        at += sizes[i];
    }
    off[sizeof...(A)] = at;
    return off;
}
template <class T>
static inline T load_arg(const char* p) { T v; std::memcpy(&v, p, sizeof(T)); return v; }

// Calls the kernel with its parameters read from the record (the kernel is inlined into its thunk).
template <class... A, std::size_t... I>
static inline void invoke_packed(void (*f)(A...), const char* rec, std::index_sequence<I...>) {
    constexpr auto off = arg_offsets<A...>();
    f(load_arg<std::remove_cv_t<A>>(rec + off[I])...);
}
template <class... A>
static inline void invoke(void (*f)(A...), const char* rec) { invoke_packed(f, rec, std::index_sequence_for<A...>{}); }
// sizes[i] and offsets[i] of each parameter, for Python to check against the signature it parsed.
template <class... A>
static inline int arg_layout(void (*)(A...), int* sizes, int* offsets) {
    constexpr auto off = arg_offsets<A...>();
    const int sz[] = {int(sizeof(A))..., 0};
    for (size_t i = 0; i < sizeof...(A); ++i) { sizes[i] = sz[i]; offsets[i] = int(off[i]); }
    return int(sizeof...(A));
}

}  // namespace gpublas_sim

#define GPUBLAS_SIM_ENTRY(K) GPUBLAS_SIM_ENTRY_WITH(K, nullptr)
#define GPUBLAS_SIM_ENTRY_WITH(K, BLOCK_THUNK)                                                      \
    static void gpublas_thunk_##K(const char* rec) { gpublas_sim::invoke(&K, rec); }               \
    extern "C" __attribute__((visibility("default"))) int gpublas_launch_##K(const char* record) { \
        return gpublas_sim::launch(#K, &gpublas_thunk_##K, BLOCK_THUNK, record);                    \
    }                                                                                               \
    extern "C" __attribute__((visibility("default"))) int gpublas_arglayout_##K(int* sizes, int* offsets) { \
        return gpublas_sim::arg_layout(&K, sizes, offsets);                                         \
    }

extern "C" __attribute__((visibility("default"))) const char* gpublas_sim_error() {
    return gpublas_sim::tls_error.c_str();  // the calling thread's last failed launch
}
extern "C" __attribute__((visibility("default"))) int gpublas_sim_fault(void** addr) {
    *addr = gpublas_sim::tls_fault_addr;  // whether a memory fault stopped it, and where
    return gpublas_sim::tls_faulted;
}

// ---------------------------------------------------------------------------------------------
// Barriers: __syncthreads, and the warp exchange every warp-level intrinsic is built on
// ---------------------------------------------------------------------------------------------
static inline void __syncthreads() {
    gpublas_sim::Worker* w = gpublas_sim::tls_worker;
    if (w->fast) { if (w->nthreads > 1) gpublas_sim::misuse("__syncthreads()"); return; }
    gpublas_sim::park(w, gpublas_sim::AT_SYNC);
}

namespace gpublas_sim {
// Every live lane of the warp publishes a 64-bit value, waits for the others, and gets the slot
// array back; a lane's slot counts only if its stamp matches (lanes that exited never match).
static inline WarpSlot* warp_exchange(uint64_t value, unsigned& stamp_out, unsigned& lane_out) {
    Worker* w = tls_worker;
    Fiber* f = w->cur;
    if (w->fast) {  // no fibers: one thread at a time, so a lane sees only itself
        static thread_local WarpSlot alone[32];
        if (w->nthreads > 1) misuse("a warp-level intrinsic");
        stamp_out = 0;
        lane_out = 0;
        alone[0] = WarpSlot{value, 0};
        return alone;
    }
    const unsigned lane = f->linear & 31, warp = f->linear >> 5;
    const unsigned stamp = f->warp_gen++;
    WarpSlot* slots = &w->slots[size_t(warp) * 64 + (stamp & 1) * 32];
    slots[lane] = WarpSlot{value, stamp};
    park(w, AT_WARP);
    stamp_out = stamp;
    lane_out = lane;
    return slots;
}
template <class T>
static inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
    uint64_t b = 0; std::memcpy(&b, &v, sizeof(T)); return b;
}
template <class T>
static inline T from_bits(uint64_t b) { T v; std::memcpy(&v, &b, sizeof(T)); return v; }
template <class T>
static inline T shuffle(T var, int src, bool valid, int) {
    unsigned stamp, lane;
    WarpSlot* s = warp_exchange(to_bits(var), stamp, lane);
    if (!valid || src < 0 || src > 31 || s[src].stamp != stamp) return var;
    return from_bits<T>(s[src].value);
}
}  // namespace gpublas_sim
