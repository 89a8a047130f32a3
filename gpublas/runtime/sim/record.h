// record.h: what one kernel launch carries from Python to the simulated grid.
//
// Emulates: the argument buffer cuLaunchKernel copies for a launch. Python packs one record per
// call (backends/sim_launch.py's RECORD, struct.pack in native alignment): a LaunchHeader (grid, block,
// flags, seed, dynamic shared bytes), then each kernel parameter at its C alignment; the kernel's
// thunk reads its parameters back from it (invoke), and arg_layout lets Python check that both
// sides agree on every offset. A Launch is one launch in progress: its record, its thunks and its
// first error, seen by every worker running its blocks. A graph replay (graph_replay.cpp) copies
// recorded records and rewrites their header's order and seed.
// Limits: parameters are passed by value as their bytes (no references, no classes with
// non-trivial copies); a record is at most 4 KB when a graph records it (graph_replay.cpp's buffer).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

namespace gpublas_sim {

// What Python packs for one call (struct.pack, native alignment: backends/sim_launch.py's RECORD): this
// header, then each kernel parameter at its C alignment. Every call has its own record, so launches
// from several host threads never share arguments.
struct LaunchHeader {
    unsigned dims[6];  // grid x, y, z, block x, y, z
    unsigned flags;    // bit 0: fibers needed; bits 1-2: thread order; bit 3: run the fissioned block function;
                       // bit 4: spread the blocks over the cores however few threads the grid has
    unsigned seed;     // of the random thread order
    uint64_t shmem;    // dynamic shared memory bytes
};

// One launch in progress: on the launching thread's stack, seen by every worker running its blocks.
struct Launch {
    const char* name;
    void (*thunk)(const char*);  // runs the kernel for one thread with the packed arguments
    void (*block_thunk)(const char*);  // runs a whole block (the fissioned kernel, fission.h), or null
    const char* args;            // the packed record
    std::atomic<bool> failed{false};   // set once `message` is written
    std::atomic<bool> claimed{false};  // the first fail() writes `message`
    char message[1024] = {};
    unsigned interrupts = 0;  // Runtime::interrupts when the launch began: a change stops it
    std::atomic<bool> interrupted{false};
    std::atomic<bool> fault_claimed{false};  // the first memory fault writes fault_addr
    std::atomic<bool> faulted{false};
    void* fault_addr = nullptr;
    void fail(const char* m) {  // the first error wins; the launch reads `message` after its last block
        if (claimed.exchange(true)) return;
        std::snprintf(message, sizeof message, "kernel '%s': %s", name, m);
        failed.store(true);
    }
};


// Where each parameter of a kernel taking A... sits in the packed record (and, last, its size):
// C's layout rules, which Python's struct module follows in native mode ('@').
template <size_t N>
struct Offsets {
    size_t at[N];
    constexpr size_t& operator[](size_t i) { return at[i]; }
    constexpr const size_t& operator[](size_t i) const { return at[i]; }
};
template <class... A>
static constexpr Offsets<sizeof...(A) + 1> arg_offsets() {
    const size_t sizes[] = {sizeof(A)..., 0}, aligns[] = {alignof(A)..., 1};
    Offsets<sizeof...(A) + 1> off{};
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
