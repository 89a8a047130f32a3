// fibers.h: the threads of one CUDA block on one CPU thread, and the barriers between them.
//
// Emulates: a block's threads and __syncthreads / the warp-level exchange. The threads of one block
// run on one OS thread as cooperative fibers: a fiber runs until it reaches a barrier
// (__syncthreads, or a warp-level intrinsic for the threads of its warp) and then yields; the
// block loop (run_block_fibers) releases a barrier when every live thread of its block (or warp)
// has arrived, exactly as on the GPU. Kernels without any barrier take a fast path instead
// (run_block_fast: a plain loop over the block's threads, no fibers). Thread order within a pass
// is forward, reverse or random (GPUBLAS_SIM_ORDER), so a race shows up as a changed result.
// Divergent __syncthreads (some threads exited) and warp/block barrier deadlocks fail the launch
// naming the block. Each fiber stack has a guard page below it.
// Limits: fibers switch with a dozen instructions of assembly on x86-64 (no signal-mask system call
// as with swapcontext, see docs/sim-backend.md) and fall back to ucontext elsewhere; each fiber has
// a fixed stack (GPUBLAS_SIM_STACK_KB, default 64 KiB), so deep recursion or large local arrays
// overflow it; on fibers every barrier switches every thread, so barrier-heavy kernels simulate
// slowly.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#if defined(GPUBLAS_SIM_RUNTIME)
#include <sys/mman.h>
#endif
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include "buffer.h"
#include "dialect.h"
#include "record.h"

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
    Buffer<WarpSlot> slots;     // [warp][parity][lane]
    Buffer<unsigned> perm;      // this pass's order when it is random
    Buffer<char> dyn_smem;
    uint64_t rng = 0;
};

// The Worker of the block this OS thread runs: the runtime library's own (it makes them) and, in a
// module, that module's copy, which the runtime sets before each block (scheduler.h).
static thread_local Worker* tls_worker = nullptr;

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

#if defined(GPUBLAS_SIM_RUNTIME)  // the block loops: compiled once, in the runtime library
static inline size_t stack_bytes() {
    const char* s = std::getenv("GPUBLAS_SIM_STACK_KB");
    size_t kb = s ? std::strtoul(s, nullptr, 10) : 64;
    return (kb < 16 ? 16 : kb) * 1024;
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
#endif

static inline uint64_t next_random(uint64_t& s) {  // splitmix64
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void shuffle_order(Worker* w, unsigned n) {
    w->perm.resize(n);
    for (unsigned i = 0; i < n; ++i) w->perm[i] = i;
    for (unsigned i = n; i > 1; --i) {
        const unsigned j = unsigned(next_random(w->rng) % i), t = w->perm[i - 1];
        w->perm[i - 1] = w->perm[j];
        w->perm[j] = t;
    }
}

// "block (x, y, z)" of the running block, for error messages: block_name().s
struct BlockName { char s[48]; };
static inline BlockName block_name() {
    BlockName b;
    std::snprintf(b.s, sizeof b.s, "block (%u, %u, %u)", blockIdx.x, blockIdx.y, blockIdx.z);
    return b;
}

#if defined(GPUBLAS_SIM_RUNTIME)
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
            unsigned lo = warp * 32, hi = n < lo + 32 ? n : lo + 32, wdone = 0, wwarp = 0, wsync = 0;
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
                          "while %u wait at the barrier", done, n, block_name().s, at_sync);
        else
            std::snprintf(msg, sizeof msg, "threads of %s deadlock: %u wait at __syncthreads() while others of "
                          "their warp wait at a warp-level intrinsic", block_name().s, at_sync);
        w->launch->fail(msg);
        return false;  // the parked fibers are abandoned; the next block starts them afresh
    }
}

static void run_block_fast(Worker* w, unsigned n) {
    const unsigned bx = blockDim.x, by = blockDim.y;
    void (*const thunk)(const char*) = w->launch->thunk;
    const char* const args = w->launch->args;
    uint3* const tid = &threadIdx;  // the module's, for this OS thread
    if (w->order == FORWARD) {  // index order: counters, not three divisions per thread
        unsigned x = 0, y = 0, z = 0;
        for (unsigned k = 0; k < n; ++k) {
            *tid = uint3{x, y, z};
            thunk(args);
            if (++x == bx) { x = 0; if (++y == by) { y = 0; ++z; } }
        }
        return;
    }
    if (w->order == RANDOM) shuffle_order(w, n);
    for (unsigned k = 0; k < n; ++k) {
        unsigned i = fiber_at(w, k);
        *tid = uint3{i % bx, (i / bx) % by, i / (bx * by)};
        thunk(args);
    }
}
#endif

static inline void* dynamic_shared() {
    Worker* w = tls_worker;
    uintptr_t p = reinterpret_cast<uintptr_t>(w->dyn_smem.data());
    return reinterpret_cast<void*>((p + 15) & ~uintptr_t(15));
}

static inline void misuse(const char* what) {
    char msg[192];
    std::snprintf(msg, sizeof msg, "calls %s but was launched on the simulator's fast path (no fibers); please "
                  "report this", what);
    tls_worker->launch->fail(msg);
}
}  // namespace gpublas_sim

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
// The value a lane outside a shuffle's mask hands over: undefined on a GPU, all one bits here (NaN, -1), so a kernel
// that uses it shows (a lane past the warp's width or the block's threads keeps its own value, as before).
template <class T>
static inline T unmasked_lane() {
    uint64_t ones = ~uint64_t(0);
    return from_bits<T>(ones);
}
template <class T>
static inline T shuffle(T var, int src, bool valid, unsigned mask) {
    unsigned stamp, lane;
    WarpSlot* s = warp_exchange(to_bits(var), stamp, lane);
    if (!valid || src < 0 || src > 31 || s[src].stamp != stamp) return var;
    if (!(mask >> src & 1u)) return unmasked_lane<T>();
    return from_bits<T>(s[src].value);
}
}  // namespace gpublas_sim
