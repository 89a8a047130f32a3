// guard.h: what the host process needs to survive a simulated kernel: faults and Ctrl-C.
//
// Emulates: the GPU's isolation of a kernel from its host. A memory fault inside a launch (an
// access to an unmapped page: under GPUBLAS_SIM_MEMCHECK=1 every device allocation sits between
// PROT_NONE guard pages, see backends/sim.py, so an access past an allocation faults) is caught
// by a SIGSEGV/SIGBUS handler that records the address and longjmps out of the faulting block; the
// launch fails with a message naming the kernel, block and thread (compute-sanitizer's memcheck
// for "invalid __global__ read/write"), and the process goes on. A SIGINT during a launch bumps an
// interrupt counter that the block loop polls between blocks, so Ctrl-C stops a long launch within
// about one block's time, then Python's own handler raises KeyboardInterrupt.
// Limits: only accesses that reach an unmapped page are seen: an access inside another live
// allocation, inside the pool's rounding of one (512 bytes), or below an allocation by less than
// its first page's slack is not; a caught fault abandons the block mid-way (other blocks' writes
// stay). The handlers are installed at the first launch and re-installed (chaining to whatever
// was there: Python's SIGINT handler, faulthandler) if something replaced them; a SIGINT handler
// set to SIG_IGN or SIG_DFL is left alone. A launch of few blocks re-checks them only when the last
// check is over 20 ms old (the check is three system calls).
//
// One Runtime is shared by every module of the process (backends/sim.py hands the first module's
// to the others through gpublas_sim_attach), since signal dispositions are process-wide.
#pragma once

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <ctime>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>

namespace gpublas_sim {

// Per OS thread: where to return when a fault hits the block this thread is running.
struct FaultCtx {
    jmp_buf back;
    volatile int active = 0;  // 1 while a block runs on this thread
    void* addr = nullptr;     // the faulting address
    int sig = 0;
    int write = -1;           // 1 write, 0 read, -1 unknown
};

struct Runtime {
    std::atomic<unsigned> interrupts{0};  // SIGINTs seen since the process started
    std::mutex lock;                      // guards (re)installing the handlers
    pthread_key_t key;                    // -> this thread's FaultCtx
    struct sigaction old_int, old_segv, old_bus;
    void* ours_int = nullptr;             // the handlers installed (one module's copies)
    void* ours_segv = nullptr;
    void* ours_bus = nullptr;
    std::atomic<int64_t> checked_ns{INT64_MIN / 2};  // when ensure_handlers last queried them
};

static Runtime* g_rt = nullptr;  // this module's view of the process-wide Runtime

static inline void chain(int sig, siginfo_t* si, void* uc, const struct sigaction& old) {
    if (old.sa_flags & SA_SIGINFO) {
        if (old.sa_sigaction) old.sa_sigaction(sig, si, uc);
    } else if (old.sa_handler == SIG_DFL || (sig != SIGINT && old.sa_handler == SIG_IGN)) {
        signal(sig, SIG_DFL);  // a fault nobody handles: returning re-executes it, now fatal
        if (sig == SIGINT) raise(sig);
    } else if (old.sa_handler != SIG_IGN) {
        old.sa_handler(sig);
    }
}

static void on_interrupt(int sig, siginfo_t* si, void* uc) {
    g_rt->interrupts.fetch_add(1, std::memory_order_relaxed);
    chain(sig, si, uc, g_rt->old_int);  // Python's handler: KeyboardInterrupt once the launch returns
}

static void on_fault(int sig, siginfo_t* si, void* uc) {
    FaultCtx* fc = static_cast<FaultCtx*>(pthread_getspecific(g_rt->key));
    if (fc && fc->active) {
        fc->active = 0;
        fc->addr = si->si_addr;
        fc->sig = sig;
#if defined(__x86_64__) && defined(REG_ERR)
        fc->write = (static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#endif
        longjmp(fc->back, 1);  // SA_NODEFER: the signal is not left blocked
    }
    chain(sig, si, uc, sig == SIGBUS ? g_rt->old_bus : g_rt->old_segv);
}

// Installs `fn` for `sig` unless it is there already; the replaced disposition is kept to chain to.
static inline void ensure_handler(int sig, void (*fn)(int, siginfo_t*, void*), struct sigaction& old, void*& ours) {
    struct sigaction cur;
    if (sigaction(sig, nullptr, &cur) != 0) return;
    void* now = (cur.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(cur.sa_sigaction)
                                            : reinterpret_cast<void*>(cur.sa_handler);
    if (ours && now == ours) return;
    if (sig == SIGINT && !(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_IGN || cur.sa_handler == SIG_DFL))
        return;  // Ctrl-C ignored or fatal: not ours to change
    struct sigaction sa = {};
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (sig == SIGINT ? SA_RESTART : SA_NODEFER);
    sigemptyset(&sa.sa_mask);
    old = cur;
    ours = reinterpret_cast<void*>(fn);
    sigaction(sig, &sa, nullptr);
}

static inline int64_t monotonic_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);  // vDSO: no system call
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// At a launch: one sigaction query per signal (three system calls, 1-2 us on a VM: as much as a
// small launch's whole run) when `force` (a launch of many blocks, where it costs nothing) or when
// the last check is older than RECHECK_NS; a small launch soon after a check trusts it.
constexpr int64_t RECHECK_NS = 20000000;  // 20 ms
static inline void ensure_handlers(bool force) {
    Runtime* rt = g_rt;
    const int64_t now = monotonic_ns();
    if (!force && now - rt->checked_ns.load(std::memory_order_relaxed) < RECHECK_NS) return;
    std::lock_guard<std::mutex> g(rt->lock);
    ensure_handler(SIGINT, on_interrupt, rt->old_int, rt->ours_int);
    ensure_handler(SIGSEGV, on_fault, rt->old_segv, rt->ours_segv);
    ensure_handler(SIGBUS, on_fault, rt->old_bus, rt->ours_bus);
    rt->checked_ns.store(now, std::memory_order_relaxed);
}

// This OS thread's FaultCtx, made on first use together with an alternate signal stack (a fault
// may be a fiber's stack overflowing).
static inline FaultCtx* fault_ctx() {
    FaultCtx* fc = static_cast<FaultCtx*>(pthread_getspecific(g_rt->key));
    if (fc) return fc;
    fc = new FaultCtx();
    pthread_setspecific(g_rt->key, fc);
    stack_t ss = {}, old = {};
    if (sigaltstack(nullptr, &old) == 0 && (old.ss_flags & SS_DISABLE)) {
        ss.ss_size = 64 * 1024;
        ss.ss_sp = std::malloc(ss.ss_size);  // lives as long as the thread
        if (ss.ss_sp) sigaltstack(&ss, nullptr);
    }
    return fc;
}

}  // namespace gpublas_sim

#if defined(GPUBLAS_SIM_RUNTIME)
// Shares the process-wide Runtime: called with NULL by the runtime library (which makes it) and with
// its pointer by the other host libraries (graph_replay.cpp).
extern "C" __attribute__((visibility("default"))) void* gpublas_sim_attach(void* rt) {
    using gpublas_sim::Runtime;
    if (!rt) {
        Runtime* r = new Runtime();
        pthread_key_create(&r->key, [](void* p) { delete static_cast<gpublas_sim::FaultCtx*>(p); });
        rt = r;
    }
    gpublas_sim::g_rt = static_cast<Runtime*>(rt);
    return rt;
}
#endif
