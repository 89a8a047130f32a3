// fission.h: the runtime of fissioned kernels: a whole block as loops over its threads, no fibers.
//
// Emulates: a block of a kernel that reaches barriers, run as one C++ function per block instead of
// one fiber per thread. backends/sim_fission.py rewrites such a kernel at compile time (MCUDA's and
// POCL's loop fission): the code between two barriers becomes a loop over the block's threads (a
// region), a value a thread keeps across a barrier lives in a per-thread array from this Block's
// arena, and __syncthreads() or a warp intrinsic is the boundary between two regions. Each region
// visits the threads in the launch's order (forward, reverse, or a fresh random permutation), so
// a missing barrier still shows as an order-dependent result. A branch or loop around a barrier
// whose condition differs between threads narrows the set of active threads (as a GPU masks
// lanes); a __syncthreads() that only some live threads reach, or that threads which exited miss,
// is the same launch error as with fibers; a warp intrinsic needs every live lane of its warp.
// Warp intrinsics: each live lane publishes its value in a region's last statement, the region
// boundary is the warp barrier, and the next region reads the partner lane's slot (a lane that
// exited never stamps it: the caller's own value comes back, as with fibers).
// Limits: only the kernel shapes the transform accepts run here (the others keep their fibers);
// the arena holds nthreads copies of each kept value (no stack limit applies).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "buffer.h"
#include "scheduler.h"

namespace gpublas_sim {

// One lane's value in a warp exchange: up to 16 bytes, so a complex double crosses in one piece (on
// fibers and on a GPU, common.cuh's gcomplex overloads shuffle its two parts from the same lane).
struct LaneBits {
    uint64_t lo = 0, hi = 0;
    explicit operator bool() const { return (lo | hi) != 0; }
};
template <class T>
static inline LaneBits to_lane_bits(T v) {
    static_assert(sizeof(T) <= sizeof(LaneBits), "a fissioned warp exchange moves at most 16 bytes");
    LaneBits b;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
static inline T from_lane_bits(const LaneBits& b) { T v; std::memcpy(&v, &b, sizeof(T)); return v; }

struct Block {
    unsigned n = 0;                     // threads of the block
    int order = FORWARD;
    const unsigned* perm = nullptr;     // this region's order: thread perm[k] runs k-th
    Worker* w = nullptr;
    unsigned alive = 0;                 // threads that have not exited
    unsigned masked = 0;                // nesting depth of thread-dependent branches and loops
    Buffer<unsigned char> active;  // 1: runs the current region
    Buffer<unsigned char> done;    // 1: exited
    Buffer<uint3> tids;
    uint3 tids_for{0, 0, 0};       // the blockDim tids was built for
    Buffer<LaneBits> slot[2];      // warp exchange values [parity][thread]
    Buffer<unsigned> stamp[2];     // which exchange wrote them
    unsigned pub = 1, rd = 0;      // the exchange being published / being read
    Buffer<char> arena;            // per-thread arrays of this block: one bump allocation each
    Buffer<void*> spill;           // malloc'd when the arena was too small (it grows for the next block)
    size_t used = 0, high = 0;
    Buffer<unsigned> forward_order, reverse_order;

    ~Block() { free_spill(); }
    void free_spill() {
        for (size_t i = 0; i < spill.size(); ++i) std::free(spill[i]);
        spill.clear();
    }

    void reset(Worker* wk, unsigned nthreads) {
        w = wk;
        n = nthreads;
        order = wk->order;
        alive = n;
        masked = 0;
        active.assign(n, 1);
        done.assign(n, 0);
        if (tids.size() != n || tids_for.x != blockDim.x || tids_for.y != blockDim.y) {
            const unsigned bx = blockDim.x, by = blockDim.y;
            tids.resize(n);
            forward_order.resize(n);
            reverse_order.resize(n);
            for (unsigned i = 0; i < n; ++i) {
                tids[i] = uint3{i % bx, (i / bx) % by, i / (bx * by)};
                forward_order[i] = i;
                reverse_order[i] = n - 1 - i;
            }
            tids_for = uint3{bx, by, 0};
        }
        perm = order == REVERSE ? reverse_order.data() : forward_order.data();
        if (high > arena.size()) arena.resize(high + 64);
        free_spill();
        used = 0;
        if (slot[0].size() < n)
            for (int p = 0; p < 2; ++p) { slot[p].resize(n); stamp[p].assign(n, 0); }
    }
    // n values of T (uninitialized), 64-byte aligned, valid until the block ends.
    template <class T>
    __attribute__((always_inline)) T* alloc() {
        const size_t need = (sizeof(T) * n + 63) & ~size_t(63);
        const uintptr_t base = reinterpret_cast<uintptr_t>(arena.data());
        const uintptr_t p = (base + used + 63) & ~uintptr_t(63);
        if (p + need <= base + arena.size()) {
            used = p + need - base;
            return reinterpret_cast<T*>(p);
        }
        return reinterpret_cast<T*>(alloc_spill(need));
    }
    __attribute__((noinline)) void* alloc_spill(size_t need) {
        high = (high > used ? high : used) + need + 64;
        used = high;
        void* p = std::malloc(need + 64);
        if (!p) fail("out of host memory for the block's per-thread arrays");
        spill.push_back(p);
        return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
    }
    // A region: `begin` draws this pass's order; `at(k)` is the k-th thread to run, ~0u if it
    // sits this region out. The region then sets threadIdx (through a pointer: one TLS lookup a block).
    void begin() {
        if (order == RANDOM) { shuffle_order(w, n); perm = w->perm.data(); }
    }
    __attribute__((always_inline)) unsigned at(unsigned k) const {
        const unsigned t = perm[k];
        return active[t] ? t : ~0u;
    }
    void exit(unsigned t) { done[t] = 1; active[t] = 0; --alive; }

    [[noreturn]] void fail(const char* m) {
        w->launch->fail(m);
        gpublas_sim_abandon_block();  // back to the runtime's run_block: the block is abandoned
    }
    unsigned count_active() const {
        unsigned a = 0;
        for (unsigned t = 0; t < n; ++t) a += active[t];
        return a;
    }
    // __syncthreads(): every live thread must be here. False once every thread has exited.
    bool sync() {
        if (alive == 0) return false;
        const unsigned here = masked ? count_active() : alive;
        if (here != alive || alive != n) {
            char msg[256];
            if (alive != n)
                std::snprintf(msg, sizeof msg, "threads diverge at __syncthreads(): %u of %u threads of %s exited "
                              "while %u wait at the barrier", n - alive, n, block_name().s, here);
            else
                std::snprintf(msg, sizeof msg, "threads diverge at __syncthreads(): %u of %u threads of %s reach it "
                              "inside a branch the others did not take", here, n, block_name().s);
            fail(msg);
        }
        return true;
    }
    // The boundary of a warp intrinsic: every live lane of a warp that takes part must be here.
    void warp_sync() {
        if (masked) {
            for (unsigned lo = 0; lo < n; lo += 32) {
                unsigned act = 0, live = 0;
                for (unsigned t = lo; t < n && t < lo + 32; ++t) { act += active[t]; live += !done[t]; }
                if (act && act != live) {
                    char msg[256];
                    std::snprintf(msg, sizeof msg, "threads of warp %u of %s diverge at a warp-level intrinsic: %u of "
                                  "its %u live lanes reach it", lo / 32, block_name().s, act, live);
                    fail(msg);
                }
            }
        }
        rd = pub++;
    }
    template <class T>
    void publish(unsigned t, T v) {
        slot[pub & 1][t] = to_lane_bits(v);
        stamp[pub & 1][t] = pub;
    }
    // The value lane `src` of t's warp published in the exchange being read, or t's own.
    template <class T>
    T read(unsigned t, int src, bool valid) const {
        const unsigned p = rd & 1, from = (t & ~31u) + unsigned(src);
        if (valid && src >= 0 && src < 32 && from < n && stamp[p][from] == rd) return from_lane_bits<T>(slot[p][from]);
        return from_lane_bits<T>(slot[p][t]);
    }
    bool published(unsigned t, int src) const {  // lane src of t's warp published in the exchange being read
        const unsigned from = (t & ~31u) + unsigned(src);
        return from < n && stamp[rd & 1][from] == rd;
    }
    unsigned ballot(unsigned t) const {
        const unsigned p = rd & 1, lo = t & ~31u;
        unsigned b = 0;
        for (unsigned i = 0; i < 32 && lo + i < n; ++i)
            if (stamp[p][lo + i] == rd && slot[p][lo + i]) b |= 1u << i;
        return b;
    }
    unsigned match(unsigned t) const {  // which lanes of t's warp published t's value
        const unsigned p = rd & 1, lo = t & ~31u;
        unsigned b = 0;
        for (unsigned i = 0; i < 32 && lo + i < n; ++i)
            if (stamp[p][lo + i] == rd && slot[p][lo + i].lo == slot[p][t].lo && slot[p][lo + i].hi == slot[p][t].hi)
                b |= 1u << i;
        return b;
    }
    unsigned lanes(unsigned t) const {  // which lanes of t's warp published
        const unsigned p = rd & 1, lo = t & ~31u;
        unsigned b = 0;
        for (unsigned i = 0; i < 32 && lo + i < n; ++i)
            if (stamp[p][lo + i] == rd) b |= 1u << i;
        return b;
    }

    // A branch whose condition differs between threads: the threads whose flag is set run `then`,
    // the others the `else` part, one after the other.
    void push(unsigned char* saved, const unsigned char* flag) {
        std::memcpy(saved, active.data(), n);
        for (unsigned t = 0; t < n; ++t) active[t] = saved[t] && flag[t];
        ++masked;
    }
    void flip(const unsigned char* saved, const unsigned char* flag) {
        for (unsigned t = 0; t < n; ++t) active[t] = saved[t] && !flag[t] && !done[t];
    }
    void pop(const unsigned char* saved) {
        for (unsigned t = 0; t < n; ++t) active[t] = saved[t] && !done[t];
        --masked;
    }
    // A loop whose condition may differ: each iteration keeps the threads whose flag is set; true
    // while any thread goes on.
    void loop_enter(unsigned char* saved) { std::memcpy(saved, active.data(), n); ++masked; }
    bool narrow(const unsigned char* flag) {
        bool any = false;
        for (unsigned t = 0; t < n; ++t) { active[t] = active[t] && flag[t]; any |= active[t] != 0; }
        return any;
    }
};

// The template arguments a call deduces, as the type of a declaration-only twin of the function.
template <class... T> struct TypeList {};
template <int I, class L> struct TypeAtImpl;
template <int I, class H, class... R> struct TypeAtImpl<I, TypeList<H, R...>> : TypeAtImpl<I - 1, TypeList<R...>> {};
template <class H, class... R> struct TypeAtImpl<0, TypeList<H, R...>> { using type = H; };
template <int I, class L> using TypeAt = typename TypeAtImpl<I, L>::type;

// This OS thread's Block, reset for each block the scheduler hands to a fissioned kernel.
static inline Block& fission_block() {
    static thread_local Block b;
    return b;
}
template <class... A>
static inline void run_fissioned(void (*f)(A...), const char* rec) {
    fission_block().reset(tls_worker, blockDim.x * blockDim.y * blockDim.z);
    invoke(f, rec);
}

// Warp intrinsics, read side (the value was published at the end of the previous region). A source lane
// outside the mask hands over fibers.h's unmasked_lane, as on fibers.
template <class T>
static inline T fx_read(const Block& b, unsigned t, unsigned mask, int src, bool valid) {
    if (valid && src >= 0 && src < 32 && !(mask >> src & 1u) && b.published(t, src))
        return from_lane_bits<T>(LaneBits{~uint64_t(0), ~uint64_t(0)});
    return b.read<T>(t, src, valid);
}
template <class T>
static inline T fx_shfl(const Block& b, unsigned t, unsigned mask, int src_lane, int width = 32) {
    const int lane = int(t & 31), base = lane & ~(width - 1);
    return fx_read<T>(b, t, mask, base + (src_lane & (width - 1)), true);
}
template <class T>
static inline T fx_shfl_down(const Block& b, unsigned t, unsigned mask, unsigned delta, int width = 32) {
    const int lane = int(t & 31), base = lane & ~(width - 1), src = lane + int(delta);
    return fx_read<T>(b, t, mask, src, src < base + width);
}
template <class T>
static inline T fx_shfl_up(const Block& b, unsigned t, unsigned mask, unsigned delta, int width = 32) {
    const int lane = int(t & 31), base = lane & ~(width - 1), src = lane - int(delta);
    return fx_read<T>(b, t, mask, src, src >= base);
}
template <class T>
static inline T fx_shfl_xor(const Block& b, unsigned t, unsigned mask, int lane_mask, int width = 32) {
    const int lane = int(t & 31), base = lane & ~(width - 1), src = lane ^ lane_mask;
    return fx_read<T>(b, t, mask, src, src >= base && src < base + width);
}
static inline unsigned fx_ballot(const Block& b, unsigned t, unsigned mask) { return b.ballot(t) & mask; }
static inline int fx_any(const Block& b, unsigned t, unsigned mask) { return (b.ballot(t) & mask) != 0; }
static inline unsigned fx_match_any(const Block& b, unsigned t, unsigned mask) { return b.match(t) & mask; }
static inline int fx_all(const Block& b, unsigned t, unsigned mask) {
    return (b.lanes(t) & mask & ~b.ballot(t)) == 0;
}

}  // namespace gpublas_sim

// The entry points of kernel K whose fissioned block function gpublas_block_K sits beside it.
#define GPUBLAS_SIM_FISSION_ENTRY(K)                                                                  \
    static void gpublas_bthunk_##K(const char* rec) { gpublas_sim::run_fissioned(&gpublas_block_##K, rec); } \
    GPUBLAS_SIM_ENTRY_WITH(K, &gpublas_bthunk_##K)
