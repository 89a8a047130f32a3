// graph_replay.cpp: a sim graph's replay: every recorded launch, copy and memset in one call.
//
// Emulates: cuGraphLaunch. While a stream captures (gpublas.graph), backends/sim_graph.py records
// each launch on it as the kernel's entry point (gpublas_launch_<kernel>, scheduler.h) and the
// record Python packed for it (record.h), and each copy or memset as its operands; a replay hands
// the whole list to gpublas_sim_replay, which runs it in order as the eager calls would have run,
// without coming back to Python between ops. Each launch runs on a copy of its record whose header
// gets the thread order asked now and a seed of its own, so replays from several host threads
// never share a record and GPUBLAS_SIM_ORDER / sim_thread_order still apply. A SIGINT stops the
// replay between ops (and a long launch between blocks, as eagerly); the first op that fails stops
// it and its index comes back, so Python reads that kernel's error from its own module.
// Limits: copies and memsets run unguarded (as eagerly: a bad pointer faults the process); a
// record is at most 4 KB (Python refuses a bigger one when it records it).
#define GPUBLAS_SIM_RUNTIME 1  // guard.h's gpublas_sim_attach: this library shares the runtime's Runtime
#include <chrono>
#include <cstdint>
#include <cstring>

#include "guard.h"
#include "record.h"

namespace {

// One recorded op: backends/sim_graph.py's Op (ctypes.Structure, same field order and types).
struct ReplayOp {
    int (*entry)(const char*);  // a launch: the kernel's entry point; null for a copy or memset
    const char* record;         // a launch: its record (LaunchHeader, then the packed arguments)
    uint64_t bytes;             // the record's bytes, or the copy's or memset's
    void* dst;                  // a copy's or memset's destination
    const void* src;            // a copy's source; null for a memset
    int64_t value;              // a memset's byte
};

constexpr size_t RECORD_MAX = 4096;

}  // namespace

// Runs ops[0..n) in order. `order` is the thread order for every launch (record.h's flags bits
// 1-2), `seed` the first launch's seed (launch i gets seed + i). With `ms` non-null each op's host
// time in milliseconds is written there (the profiler's rows). Returns 0, or the failing op's
// status (-1: a launch error, read from its module; -2: interrupted) with its index in *at.
extern "C" __attribute__((visibility("default")))
int gpublas_sim_replay(const ReplayOp* ops, int64_t n, unsigned order, unsigned seed, double* ms, int64_t* at) {
    using namespace gpublas_sim;
    using clock = std::chrono::steady_clock;
    ensure_handlers(true);
    const unsigned interrupts = g_rt->interrupts.load();
    alignas(16) char record[RECORD_MAX];
    for (int64_t i = 0; i < n; ++i) {
        if (g_rt->interrupts.load(std::memory_order_relaxed) != interrupts) { *at = i; return -2; }
        const ReplayOp& op = ops[i];
        const clock::time_point t0 = ms ? clock::now() : clock::time_point();
        int status = 0;
        if (op.entry) {
            std::memcpy(record, op.record, op.bytes);
            LaunchHeader h;
            std::memcpy(&h, record, sizeof h);
            h.flags = (h.flags & ~6u) | (order & 3u) << 1;
            h.seed = seed + unsigned(i);
            std::memcpy(record, &h, sizeof h);
            status = op.entry(record);
        } else if (op.src) {
            std::memmove(op.dst, op.src, op.bytes);
        } else {
            std::memset(op.dst, int(op.value), op.bytes);
        }
        if (ms) ms[i] = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
        if (status) { *at = i; return status; }
    }
    return 0;
}
