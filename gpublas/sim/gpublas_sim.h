// gpublas_sim.h: the CUDA C dialect of cuda_src/ on a CPU, for the `sim` backend.
//
// The host C++ compiler builds a .cu file with this header force-included (-include). Each kernel
// becomes a plain C++ function of one thread; gpublas appends an entry point per kernel
// (GPUBLAS_SIM_ENTRY) that runs the whole grid:
//   * blocks are spread over the CPU's cores with OpenMP;
//   * the threads of one block run on one OS thread as cooperative fibers. A fiber runs until it
//     reaches a barrier (__syncthreads, or a warp-level intrinsic for the threads of its warp) and
//     then yields to the block's scheduler, which resumes the next fiber. A barrier releases when
//     every live thread of its block (or warp) has arrived, exactly as on the GPU;
//   * __shared__ variables are `static thread_local`: every OS thread has its own copy, shared by
//     the fibers of the block it is running;
//   * kernels without any barrier run on a fast path: a plain loop over the block's threads.
// Fibers switch with a dozen instructions of assembly on x86-64 (no signal-mask system call as
// with swapcontext, see shared/notes/sim-backend.md), handing the CPU straight to the next thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
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

// ---------------------------------------------------------------------------------------------
// Qualifiers
// ---------------------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
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
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

// ---------------------------------------------------------------------------------------------
// Built-in variables: per OS thread, rewritten by the scheduler before it resumes a fiber.
// ---------------------------------------------------------------------------------------------
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local dim3 blockDim;
static thread_local dim3 gridDim;
static const int warpSize = 32;

// ---------------------------------------------------------------------------------------------
// The scheduler
// ---------------------------------------------------------------------------------------------
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
    void (*thunk)(void**) = nullptr;
    void** args = nullptr;
    bool fast = false;      // fast path: no fibers
    unsigned nthreads = 0;  // threads of the current block
    std::vector<WarpSlot> slots;     // [warp][parity][lane]
    std::vector<unsigned> perm;      // this pass's order when it is random
    std::vector<char> dyn_smem;
    uint64_t rng = 0;
};

struct LaunchError {
    std::mutex lock;
    std::string message;
    std::atomic<bool> failed{false};
    void set(const std::string& m) {
        std::lock_guard<std::mutex> g(lock);
        if (!failed.load()) { message = m; failed.store(true); }
    }
};

static LaunchError g_error;
static const char* g_kernel_name = "";
static thread_local Worker* tls_worker = nullptr;

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
    w->thunk(w->args);
    park(w, DONE);  // never resumed: the next block starts every fiber afresh
    __builtin_unreachable();
}

static Worker* worker(unsigned nthreads) {
    Worker* w = tls_worker;
    if (!w) { w = new Worker(); tls_worker = w; }  // lives as long as its OS thread
    if (nthreads > w->nfibers) {
        if (w->stacks) munmap(w->stacks, w->stack_size * w->nfibers);
        delete[] w->fibers;
        w->stack_size = stack_bytes();
        w->stacks = static_cast<char*>(mmap(nullptr, w->stack_size * nthreads, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        if (w->stacks == MAP_FAILED) { w->stacks = nullptr; w->nfibers = 0; return nullptr; }
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
        context_start(&f.ctx, w->stacks + w->stack_size * i, w->stack_size, fiber_entry);
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
        g_error.set(std::string("kernel '") + g_kernel_name + "': " + msg);
        return false;  // the parked fibers are abandoned; the next block starts them afresh
    }
}

static void run_block_fast(Worker* w, unsigned n) {
    const unsigned bx = blockDim.x, by = blockDim.y;
    if (w->order == RANDOM) shuffle_order(w, n);
    for (unsigned k = 0; k < n; ++k) {
        unsigned i = fiber_at(w, k);
        threadIdx = uint3{i % bx, (i / bx) % by, i / (bx * by)};
        w->thunk(w->args);
    }
}

// dims: grid x, y, z, block x, y, z. flags: bit 0 = fibers needed, bits 1-2 = thread order.
static int launch(const char* name, void (*thunk)(void**), const unsigned* dims, size_t shmem, void** args,
                  int flags, unsigned seed) {
    const unsigned gx = dims[0], gy = dims[1], gz = dims[2];
    const unsigned nthreads = dims[3] * dims[4] * dims[5];
    const long nblocks = long(gx) * gy * gz;
    if (nblocks == 0 || nthreads == 0) return 0;
    const bool fibers = flags & 1;
    const int order = (flags >> 1) & 3;
    g_error.failed.store(false);
    g_kernel_name = name;
    const long total = nblocks * nthreads;
    const int chunk = int(std::max(1L, nblocks / 64));
#pragma omp parallel for schedule(dynamic, chunk) if (nblocks > 1 && total >= 4096)
    for (long b = 0; b < nblocks; ++b) {
        if (g_error.failed.load(std::memory_order_relaxed)) continue;
        Worker* w = worker(fibers ? nthreads : 0);
        if (!w) { g_error.set(std::string("kernel '") + name + "': cannot map fiber stacks"); continue; }
        w->thunk = thunk;
        w->args = args;
        w->fast = !fibers;
        w->nthreads = nthreads;
        w->order = order;
        w->rng = (uint64_t(seed) << 32) ^ uint64_t(b) * 0x2545F4914F6CDD1Dull;
        if (w->dyn_smem.size() < shmem + 16) w->dyn_smem.assign(shmem + 16, 0);
        blockDim = dim3(dims[3], dims[4], dims[5]);
        gridDim = dim3(gx, gy, gz);
        blockIdx = uint3{unsigned(b % gx), unsigned((b / gx) % gy), unsigned(b / (long(gx) * gy))};
        if (fibers) run_block_fibers(w, nthreads);
        else run_block_fast(w, nthreads);
    }
    return g_error.failed.load() ? -1 : 0;
}

static inline void* dynamic_shared() {
    Worker* w = tls_worker;
    uintptr_t p = reinterpret_cast<uintptr_t>(w->dyn_smem.data());
    return reinterpret_cast<void*>((p + 15) & ~uintptr_t(15));
}

static inline void misuse(const char* what) {
    g_error.set(std::string("kernel '") + g_kernel_name + "' calls " + what +
                " but was launched on the simulator's fast path (no fibers); please report this");
}

// Unpacks void* args[] into the kernel's parameters (the kernel is inlined into its thunk).
template <class... A, std::size_t... I>
static inline void invoke_packed(void (*f)(A...), void** a, std::index_sequence<I...>) {
    f(*static_cast<std::remove_cv_t<A>*>(a[I])...);
}
template <class... A>
static inline void invoke(void (*f)(A...), void** a) { invoke_packed(f, a, std::index_sequence_for<A...>{}); }
template <class... A>
static inline int arg_sizes(void (*)(A...), int* out) {
    int sizes[] = {int(sizeof(A))..., 0};
    for (size_t i = 0; i < sizeof...(A); ++i) out[i] = sizes[i];
    return int(sizeof...(A));
}

}  // namespace gpublas_sim

#define GPUBLAS_SIM_ENTRY(K)                                                                        \
    static void gpublas_thunk_##K(void** a) { gpublas_sim::invoke(&K, a); }                        \
    extern "C" __attribute__((visibility("default"))) int gpublas_launch_##K(                      \
        const unsigned* dims, size_t shmem, void** args, int flags, unsigned seed) {               \
        return gpublas_sim::launch(#K, &gpublas_thunk_##K, dims, shmem, args, flags, seed);        \
    }                                                                                               \
    extern "C" __attribute__((visibility("default"))) int gpublas_argsizes_##K(int* out) {        \
        return gpublas_sim::arg_sizes(&K, out);                                                     \
    }

extern "C" __attribute__((visibility("default"))) const char* gpublas_sim_error() {
    return gpublas_sim::g_error.message.c_str();
}

// ---------------------------------------------------------------------------------------------
// Barriers and warp intrinsics
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

static inline unsigned gpublas_lane() {
    gpublas_sim::Worker* w = gpublas_sim::tls_worker;
    return w->fast ? 0 : w->cur->linear & 31;
}

template <class T>
static inline T __shfl_sync(unsigned, T var, int src_lane, int width = 32) {
    int lane = int(gpublas_lane()), base = lane & ~(width - 1);
    return gpublas_sim::shuffle(var, base + (src_lane & (width - 1)), true, width);
}
template <class T>
static inline T __shfl_down_sync(unsigned, T var, unsigned delta, int width = 32) {
    int lane = int(gpublas_lane()), base = lane & ~(width - 1), src = lane + int(delta);
    return gpublas_sim::shuffle(var, src, src < base + width, width);
}
template <class T>
static inline T __shfl_up_sync(unsigned, T var, unsigned delta, int width = 32) {
    int lane = int(gpublas_lane()), base = lane & ~(width - 1), src = lane - int(delta);
    return gpublas_sim::shuffle(var, src, src >= base, width);
}
template <class T>
static inline T __shfl_xor_sync(unsigned, T var, int lane_mask, int width = 32) {
    int lane = int(gpublas_lane()), base = lane & ~(width - 1), src = lane ^ lane_mask;
    return gpublas_sim::shuffle(var, src, src >= base && src < base + width, width);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    unsigned stamp, lane, ballot = 0;
    gpublas_sim::WarpSlot* s = gpublas_sim::warp_exchange(pred != 0, stamp, lane);
    for (unsigned i = 0; i < 32; ++i)
        if (s[i].stamp == stamp && s[i].value) ballot |= 1u << i;
    return ballot & mask;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) {
    unsigned stamp, lane, all = 1;
    gpublas_sim::WarpSlot* s = gpublas_sim::warp_exchange(pred != 0, stamp, lane);
    for (unsigned i = 0; i < 32; ++i)
        if ((mask >> i & 1) && s[i].stamp == stamp && !s[i].value) all = 0;
    return int(all);
}
static inline void __syncwarp(unsigned = 0xffffffffu) {
    unsigned stamp, lane;
    gpublas_sim::warp_exchange(0, stamp, lane);
}
static inline unsigned __activemask() {
    gpublas_sim::Worker* w = gpublas_sim::tls_worker;
    unsigned warp = w->cur ? w->cur->linear >> 5 : 0, mask = 0;
    if (w->fast) return 1u;
    for (unsigned i = 0; i < 32 && warp * 32 + i < w->nthreads; ++i)
        if (w->fibers[warp * 32 + i].state != gpublas_sim::DONE) mask |= 1u << i;
    return mask;
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---------------------------------------------------------------------------------------------
// Atomics (blocks run on several OS threads, so these are real atomics)
// ---------------------------------------------------------------------------------------------
template <class T>
static inline T gpublas_atomic_float_op(T* p, T v, T (*op)(T, T)) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    U* up = reinterpret_cast<U*>(p);
    U old = __atomic_load_n(up, __ATOMIC_RELAXED), want;
    do {
        T cur; std::memcpy(&cur, &old, sizeof(T));
        T nv = op(cur, v); std::memcpy(&want, &nv, sizeof(T));
    } while (!__atomic_compare_exchange_n(up, &old, want, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    T r; std::memcpy(&r, &old, sizeof(T)); return r;
}
static inline float atomicAdd(float* p, float v) { return gpublas_atomic_float_op<float>(p, v, [](float a, float b) { return a + b; }); }
static inline double atomicAdd(double* p, double v) { return gpublas_atomic_float_op<double>(p, v, [](double a, double b) { return a + b; }); }
static inline float atomicMax(float* p, float v) { return gpublas_atomic_float_op<float>(p, v, [](float a, float b) { return a > b ? a : b; }); }
static inline float atomicMin(float* p, float v) { return gpublas_atomic_float_op<float>(p, v, [](float a, float b) { return a < b ? a : b; }); }
static inline float atomicExch(float* p, float v) { float r; __atomic_exchange(p, &v, &r, __ATOMIC_SEQ_CST); return r; }
#define GPUBLAS_INT_ATOMICS(T)                                                                         \
    static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }          \
    static inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }        \
    static inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }      \
    static inline T atomicCAS(T* p, T cmp, T v) {                                                      \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; \
    }                                                                                                  \
    static inline T atomicMax(T* p, T v) {                                                             \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                   \
        while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {} \
        return old;                                                                                    \
    }                                                                                                  \
    static inline T atomicMin(T* p, T v) {                                                             \
        T old = __atomic_load_n(p, __ATOMIC_RELAXED);                                                   \
        while (old > v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {} \
        return old;                                                                                    \
    }
GPUBLAS_INT_ATOMICS(int)
GPUBLAS_INT_ATOMICS(unsigned int)
GPUBLAS_INT_ATOMICS(unsigned long long)
#undef GPUBLAS_INT_ATOMICS

// ---------------------------------------------------------------------------------------------
// Math functions and intrinsics (expf, tanhf, fmaxf ... come from <cmath> as they are)
// ---------------------------------------------------------------------------------------------
// glibc declares its own __expf, __logf ... : map CUDA's fast intrinsics onto the ordinary functions.
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __powf(x, y) powf(x, y)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __tanhf(x) tanhf(x)
static inline float __fdividef(float x, float y) { return x / y; }
static inline float fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __fadd_rn(float x, float y) { return x + y; }
static inline float __fmul_rn(float x, float y) { return x * y; }
static inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
static inline double __dadd_rn(double x, double y) { return x + y; }
static inline double __dmul_rn(double x, double y) { return x * y; }
static inline double __fma_rn(double x, double y, double z) { return fma(x, y, z); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
static inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
static inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
static inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
static inline int __float2int_rn(float x) { return int(nearbyintf(x)); }
static inline int __float2int_rz(float x) { return int(x); }
static inline int __float2int_rd(float x) { return int(floorf(x)); }
static inline int __float2int_ru(float x) { return int(ceilf(x)); }
static inline int __double2int_rn(double x) { return int(nearbyint(x)); }
static inline float __int2float_rn(int x) { return float(x); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz(unsigned(x)) : 32; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
    return __builtin_bswap32(x);
}
static inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)((__uint128_t(a) * b) >> 64);
}
template <class T>
static inline T __ldg(const T* p) { return *p; }
// CUDA's min/max overloads: by value, in the operands' common type.
template <class A, class B>
static inline std::common_type_t<A, B> min(A a, B b) { return b < a ? b : a; }
template <class A, class B>
static inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }

// ---------------------------------------------------------------------------------------------
// Tensor cores: nvcuda::wmma, simulated warp-collectively. Every lane's fragment holds the whole
// tile, so load/mma/store compute the same tile in every lane (stores write identical values) and
// loops over `num_elements` stay correct. Each *_sync call is a warp barrier, as on the GPU.
// TF32 inputs keep the upper 19 bits of each float, as the tensor cores read them.
// ---------------------------------------------------------------------------------------------
namespace nvcuda {
namespace wmma {
static inline float __float_to_tf32(float x) {  // round to nearest, ties away (cvt.rna.tf32.f32)
    uint32_t u; std::memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    std::memcpy(&x, &u, 4); return x;
}
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
namespace precision { struct tf32 {}; }
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
    static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
    static constexpr int num_elements = rows * cols;
    using element_type = std::conditional_t<std::is_same<T, precision::tf32>::value, float, T>;
    element_type x[rows * cols];
};

static inline void warp_sync_point() { __syncwarp(); }

template <class Use, int M, int N, int K, class T, class Layout, class P>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const P* p, unsigned ldm) {
    warp_sync_point();
    using F = fragment<Use, M, N, K, T, Layout>;
    const bool col = std::is_same<Layout, col_major>::value;
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c)
            f.x[r * F::cols + c] = col ? p[c * ldm + r] : p[r * ldm + c];
}
template <int M, int N, int K, class T, class P>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const P* p, unsigned ldm, layout_t l) {
    warp_sync_point();
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) f.x[r * N + c] = l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}
template <int M, int N, int K, class T, class P>
static inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t l) {
    warp_sync_point();
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) (l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * N + c];
    warp_sync_point();
}
template <class Use, int M, int N, int K, class T, class Layout, class V>
static inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, V v) {
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}
template <class In>
static inline float tensor_input(float v) {
    if (!std::is_same<In, precision::tf32>::value) return v;
    uint32_t u; std::memcpy(&u, &v, 4); u &= 0xffffe000u; std::memcpy(&v, &u, 4); return v;
}
template <int M, int N, int K, class TA, class LA, class LB, class TC>
static inline void mma_sync(fragment<accumulator, M, N, K, TC>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                            const fragment<matrix_b, M, N, K, TA, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
    warp_sync_point();
    TC out[M * N];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            TC acc = c.x[i * N + j];
            for (int k = 0; k < K; ++k) acc += tensor_input<TA>(a.x[i * K + k]) * tensor_input<TA>(b.x[k * N + j]);
            out[i * N + j] = acc;
        }
    std::memcpy(d.x, out, sizeof out);
}
}  // namespace wmma
}  // namespace nvcuda
