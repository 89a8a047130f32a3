// buffer.h: a growable array of trivially copyable values (malloc / realloc), for the structs the
// modules and the runtime library share: the Worker's warp slots, random order and dynamic shared
// memory (fibers.h), a fissioned block's per-thread state and arena (fission.h), mma.sync's scratch.
//
// Why not std::vector: every module force-includes these headers, and libstdc++'s <vector>,
// <string>, <mutex> and <algorithm> were half of the precompiled header's build (2.3 -> 1.1-1.2 s of
// g++ CPU without them, 69 -> 45 MB) and of its load in every module's compile (docs/sim-backend.md, "The
// first run"). The module side of the simulator headers includes only C headers, <cmath>, <atomic>,
// <type_traits>, <utility> and immintrin.h; the runtime library's own parts (GPUBLAS_SIM_RUNTIME)
// include what they like.
// Limits: T must be trivially copyable (realloc moves the bytes); growing never shrinks; an allocation
// that fails aborts the process with a message (as std::bad_alloc uncaught would).
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace gpublas_sim {

template <class T>
struct Buffer {
    static_assert(std::is_trivially_copyable<T>::value, "Buffer holds trivially copyable values only");
    T* ptr = nullptr;
    size_t len = 0, cap = 0;

    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { std::free(ptr); }

    T* data() { return ptr; }
    const T* data() const { return ptr; }
    size_t size() const { return len; }
    T& operator[](size_t i) { return ptr[i]; }
    const T& operator[](size_t i) const { return ptr[i]; }

    void reserve(size_t n) {
        if (n <= cap) return;
        const size_t grown = cap * 2 > n ? cap * 2 : n;
        T* p = static_cast<T*>(std::realloc(static_cast<void*>(ptr), grown * sizeof(T)));
        if (!p) {
            std::fprintf(stderr, "gpublas sim: out of host memory (%zu bytes)\n", grown * sizeof(T));
            std::abort();
        }
        ptr = p;
        cap = grown;
    }
    void resize(size_t n) {  // new elements are zeroed
        reserve(n);
        if (n > len) std::memset(static_cast<void*>(ptr + len), 0, (n - len) * sizeof(T));
        len = n;
    }
    void resize(size_t n, const T& v) {  // new elements are v
        reserve(n);
        for (size_t i = len; i < n; ++i) ptr[i] = v;
        len = n;
    }
    void assign(size_t n, const T& v) {
        reserve(n);
        for (size_t i = 0; i < n; ++i) ptr[i] = v;
        len = n;
    }
    void push_back(const T& v) {
        reserve(len + 1);
        ptr[len++] = v;
    }
    void clear() { len = 0; }
};

}  // namespace gpublas_sim
