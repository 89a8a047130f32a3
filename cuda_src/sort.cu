// sort.cu: a stable LSD radix sort of rows of keys, key-only or key-value, and the selects built on it
// (gpublas/numpy_api/sorting.py). `real` is any type of the keys' width: the kernels see keys as their bit patterns
// (sort_key: unsigned char, short, int or long long) and a runtime `kind` says how to order them:
//   SORT_UNSIGNED  as they are (uint8, bool)
//   SORT_SIGNED    the sign bit flipped (int32, int64)
//   SORT_FLOAT     the sign-flip transform: negatives' bits inverted, positives' sign bit set, so -0.0 sorts
//                  before +0.0; every NaN (magnitude above `inf`, the type's infinity pattern) becomes all ones
//                  and sorts last, in its original order, written back as the type's quiet NaN (float16,
//                  bfloat16, float32, float64)
//   SORT_FLOAT_ZEROS  the same with -0.0 taken as +0.0 (written back as +0.0): NumPy's order, where they are equal
// `desc` inverts the transformed key (a descending sort; NaN then first, as torch.topk's largest).
// Rows: a batch of `rows` rows of n keys, row r at keys + r * n; indices are positions within the row. The launcher
// picks the geometry and passes it as defines (the tests run both on the simulator): the one-block kernels take
// SORT_BITS-bit digits with SORT_THREADS threads of SORT_ITEMS keys (4 / 128 / 16 on a GPU, 8 / 32 / 256 on the
// simulator); longer rows take the onesweep passes (Adinets & Merrill 2022, CUB's DeviceRadixSort): 8-bit digits,
// one histogram of every digit place up front, then ONE launch a place (4 for 32-bit keys). Those tiles hold
// SWEEP_THREADS threads x SWEEP_ITEMS keys, digits counted by sets of SWEEP_SET threads: 256 x 16 by warps on a GPU,
// 32 x 8192 by threads alone on the simulator (where a thread costs more than a key, and a tile of float32 keys
// fits a core's L2 between its counting and its writing).
//
// radix_histogram:  block SWEEP_THREADS, one block per (row, span of `span` keys); the span split among the sets
//                   as a tile's keys are (sweep_item); every digit place of each key counted in one sweep into
//                   HIST_COPIES copies of shared counters [place][digit] (a thread's own with increments; one a
//                   block with shared atomics), summed into hist[place][row][digit] with global atomics.
// radix_onesweep:   block SWEEP_THREADS, one block per tile, tiles taken in the order blocks start (an atomic
//                   counter, so a tile's predecessors are running or done). Set s of the block owns the tile's keys
//                   [s * SET * ITEMS, (s + 1) * SET * ITEMS), lane l of it items u * SET + l (a warp's loads and
//                   stores coalesce). (1) each set counts its digits into its row of cnt[set][digit]; (2) the counts
//                   scanned in (digit, set) order (thread t: digits [t * D, (t + 1) * D), D = 256 / SWEEP_THREADS,
//                   then block_exclusive_scan) give each set's first tile rank per digit; (3) decoupled look-back,
//                   thread t for its digits: publish the tile's count (AGGREGATE), add the predecessors' words back
//                   to the first PREFIX, publish its own PREFIX; with the scanned histogram that is where the tile's
//                   keys of each digit start in the output; (4) rank and write. A warp ranks item u of its lanes at
//                   once (__match_any_sync: lanes of the same digit take consecutive ranks in lane order) into the
//                   tile's sorted order in shared memory, then each warp writes 32 consecutive sorted keys: runs of
//                   one digit, coalesced. A thread alone (the simulator) writes its keys in order straight to their
//                   places. Values ride along (or the key's index). Stable: tile order, then set, then item order.
//                   Per pass and key: one read (twice: counting and ranking, the second from cache), one write.
// radix_sort_block: one block per row, the whole row in shared memory (dynamic: two buffers of keys and of
//                   values): every pass counts into per-thread columns counts[digit][thread], scans them in
//                   (digit, thread) order and scatters between the two buffers, thread t owning keys
//                   [t * per, (t + 1) * per), per = ceil(n / SORT_THREADS).
// topk_select:      one block per row: the k smallest transformed keys of the row (the largest with desc) by a
//                   radix select from the top digit (each pass counts, per thread column, the keys whose higher
//                   digits match the prefix chosen so far; thread d sums digit d; thread 0 picks the digit where
//                   the count reaches k); then each thread counts its keys below / equal to the threshold, one
//                   block_exclusive_scan of both counts packed in a long long places them: the keys below in
//                   index order, then the first `need` equal ones in index order (ties by lower index). Writes k
//                   raw keys and their indices per row, unsorted; radix_sort_block or the passes sort them.
// run_starts:       grid-stride loop, one sorted key per thread: flags[i] = key i starts a run of equal values
//                   (-0.0 equals +0.0; NaN equals NaN unless nan_equal is 0: NumPy's unique).
#include "common.cuh"

#ifndef SORT_BITS
#define SORT_BITS 4
#endif
#ifndef SORT_THREADS
#define SORT_THREADS 128
#endif
#ifndef SORT_ITEMS
#define SORT_ITEMS 16
#endif
#define SORT_RADIX (1 << SORT_BITS)
#define SORT_TILE (SORT_THREADS * SORT_ITEMS)
// counts[] of a block: thread t's SORT_RADIX digit counts at t * (SORT_RADIX + 1), a row each (consecutive for the
// thread that updates them; the odd row length keeps a GPU's threads on distinct banks)
#define COUNT_AT(d, t) ((t) * (SORT_RADIX + 1) + (d))
#define SORT_COUNTS (SORT_THREADS * (SORT_RADIX + 1))
#define SORT_UNSIGNED 0
#define SORT_SIGNED 1
#define SORT_FLOAT 2
#define SORT_FLOAT_ZEROS 3  // SORT_FLOAT with -0.0 taken as +0.0 (equal keys: NumPy's stable argsort)
static_assert(SORT_THREADS % 32 == 0, "block_exclusive_scan takes whole warps");
#ifndef SWEEP_THREADS
#define SWEEP_THREADS 256
#endif
#ifndef SWEEP_ITEMS
#define SWEEP_ITEMS 16
#endif
#ifndef SWEEP_SET
#define SWEEP_SET 32
#endif
#ifndef SORT_STATUS_BITS
#define SORT_STATUS_BITS 32
#endif
#define SWEEP_BITS 8
#define SWEEP_RADIX (1 << SWEEP_BITS)
#define SWEEP_TILE (SWEEP_THREADS * SWEEP_ITEMS)
#define SWEEP_SETS (SWEEP_THREADS / SWEEP_SET)
#define SORT_PLACES ((int)sizeof(sort_key))  // 8-bit digit places of a key
#define HIST_COPIES (SWEEP_SET == 1 ? SWEEP_THREADS : 1)  // radix_histogram's counters: a thread's own, or a block's
static_assert(SWEEP_THREADS % 32 == 0, "block_exclusive_scan takes whole warps");

template <int S> struct KeyBits;
template <> struct KeyBits<1> { typedef unsigned char type; };
template <> struct KeyBits<2> { typedef unsigned short type; };
template <> struct KeyBits<4> { typedef unsigned int type; };
template <> struct KeyBits<8> { typedef unsigned long long type; };
typedef KeyBits<sizeof(real)>::type sort_key;
#define SORT_SIGN ((sort_key)((sort_key)1 << (8 * sizeof(sort_key) - 1)))

// How keys order: `kind` and the float's infinity pattern, and whether descending. Both directions are written
// without a branch on the key: masks made once from the launch's kind, then ANDs and XORs per key (a float's sign
// is a coin toss, and a CPU, the simulator, mispredicts a branch on it every other key).
__device__ __forceinline__ sort_key all_if(bool c) { return (sort_key)((sort_key)0 - (sort_key)c); }
struct KeyOrder {
    sort_key inf;
    sort_key flt;    // all ones for floats
    sort_key sign;   // the sign bit, but for unsigned keys
    sort_key desc;   // all ones for a descending order
    sort_key zeros;  // -0.0's sign bit, taken away (SORT_FLOAT_ZEROS)
    __device__ __forceinline__ KeyOrder(int kind_, sort_key inf_, int desc_)
        : inf(inf_), flt(all_if(kind_ >= SORT_FLOAT)),
          sign(kind_ != SORT_UNSIGNED ? SORT_SIGN : (sort_key)0), desc(all_if(desc_ != 0)),
          zeros(kind_ == SORT_FLOAT_ZEROS ? SORT_SIGN : (sort_key)0) {}
    __device__ __forceinline__ sort_key to_key(sort_key b) const {
        const sort_key mag = (sort_key)(b & (sort_key)~SORT_SIGN);
        b = (sort_key)(b & ~(zeros & all_if(mag == 0)));
        // floats: negatives inverted, positives' sign set; signed: the sign flipped; NaN (floats): all ones
        const sort_key k = (sort_key)(b ^ ((all_if((b & SORT_SIGN) != 0) & flt) | sign));
        return (sort_key)((k | (flt & all_if(mag > inf))) ^ desc);
    }
    __device__ __forceinline__ sort_key from_key(sort_key k) const {
        k = (sort_key)(k ^ desc);
        // every NaN comes back as the quiet NaN NumPy writes (0x7fc00000 for float32)
        if (flt && k == (sort_key)~(sort_key)0) return (sort_key)(inf | ((inf >> 1) & (sort_key)~inf));
        return (sort_key)(k ^ ((flt & (sort_key)~all_if((k & SORT_SIGN) != 0)) | sign));
    }
};

__device__ __forceinline__ int digit_of(sort_key k, int shift) { return (int)((k >> shift) & (SORT_RADIX - 1)); }

// Thread t's column of counts[digit * SORT_THREADS + t]: the digits of keys[first .. end).
__device__ __forceinline__ void count_digits(const sort_key* __restrict__ keys, long long first, long long end,
                                             int shift, int* counts) {
    const int t = threadIdx.x;
    for (int d = 0; d < SORT_RADIX; ++d) counts[COUNT_AT(d, t)] = 0;
    for (long long i = first; i < end; ++i) ++counts[COUNT_AT(digit_of(keys[i], shift), t)];
}

// Thread t's share [first, end) of a row of n keys one block walks: ceil(n / SORT_THREADS) consecutive keys.
__device__ __forceinline__ void thread_range(long long n, long long& first, long long& end) {
    const long long per = ceil_div(n, SORT_THREADS);
    first = threadIdx.x * per < n ? threadIdx.x * per : n;
    end = first + per < n ? first + per : n;
}

// counts[] (SORT_RADIX x SORT_THREADS, digit-major) replaced by its exclusive scan in that order: each thread's
// first rank per digit among the block's keys. Call between two barriers.
__device__ __forceinline__ void scan_counts(int* counts) {
    const int e0 = threadIdx.x * SORT_RADIX;  // this thread's entries e0 .. e0 + SORT_RADIX - 1: digit e / T, thread e % T
    long long sum = 0;
    for (int e = e0; e < e0 + SORT_RADIX; ++e) sum += counts[COUNT_AT(e / SORT_THREADS, e % SORT_THREADS)];
    long long total;
    long long run = block_exclusive_scan(sum, total);
    for (int e = e0; e < e0 + SORT_RADIX; ++e) {
        int& c = counts[COUNT_AT(e / SORT_THREADS, e % SORT_THREADS)];
        const int v = c;
        c = (int)run;
        run += v;
    }
}

// ---- the onesweep passes (SWEEP_*): 8-bit digits, tiles ranked in shared memory, decoupled look-back ----
// Thread t of a tile takes SWEEP_ITEMS keys: set s = t / SWEEP_SET of SWEEP_SET threads owns the tile's keys
// [s * SWEEP_SET * SWEEP_ITEMS, (s + 1) * SWEEP_SET * SWEEP_ITEMS), lane l = t % SWEEP_SET its items u * SWEEP_SET + l
// (a warp: loads and stores coalesce; one thread: a run of consecutive keys). A set counts digits in its own row of
// counters: a thread alone with plain increments, a warp with shared-memory atomics.
__device__ __forceinline__ int sweep_item(int u) {
    const int t = threadIdx.x;
    return (t / SWEEP_SET) * (SWEEP_SET * SWEEP_ITEMS) + u * SWEEP_SET + t % SWEEP_SET;
}
#if SWEEP_SET == 1
#define SWEEP_COUNT(c) (++(c))
#else
#define SWEEP_COUNT(c) atomicAdd(&(c), 1)
#endif
// The look-back's wait for another block's word: the simulator lets the OS thread running that block go first.
#if defined(__CUDA_ARCH_SIM__)
#include <sched.h>
#define spin_pause() sched_yield()
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
#define spin_pause() __nanosleep(32)
#else
#define spin_pause() ((void)0)
#endif
#define SWEEP_DIGIT(k, shift) ((int)(((k) >> (shift)) & (SWEEP_RADIX - 1)))

// radix_histogram's counting: keys rk[0 .. len) split among the sets as a tile's are, every digit place of each key
// counted into cnt[copy][place][digit] (a copy a thread alone, one a block with warps).
__device__ __forceinline__ void hist_count_as(const sort_key* __restrict__ rk, long long len, KeyOrder order,
                                              int* cnt) {
    const int t = threadIdx.x;
    const long long piece = ceil_div(len, SWEEP_SETS);
    const long long lo = (t / SWEEP_SET) * piece < len ? (t / SWEEP_SET) * piece : len;
    const long long hi = lo + piece < len ? lo + piece : len;
    int* mine = cnt + (SWEEP_SET == 1 ? t : 0) * SORT_PLACES * SWEEP_RADIX;
    for (long long i = lo + t % SWEEP_SET; i < hi; i += SWEEP_SET) {
        const sort_key k = order.to_key(rk[i]);
        for (int p = 0; p < SORT_PLACES; ++p)  // an unsigned digit: no sign extension in a CPU's index
            SWEEP_COUNT(mine[p * SWEEP_RADIX + (unsigned)SWEEP_DIGIT(k, p * SWEEP_BITS)]);
    }
}
// A thread alone (the simulator) spends a pass's time on its per-key instructions: there a loop that transforms keys
// is inlined once per kind of key, its KeyOrder's masks constants (SORT_FLOAT_ZEROS, rare, and a GPU keep one loop).
// WITH_ORDER runs CALL with `o` the KeyOrder of (kind, inf, desc); use it in __device__ functions (no barriers).
#define SWEEP_FIXED_KINDS (SWEEP_SET == 1)
#define WITH_KIND(K, inf, desc, CALL) { const KeyOrder o((K), (inf), (desc)); CALL; }
#define WITH_ORDER(kind, inf, desc, CALL)                                                                         \
    do {                                                                                                          \
        if (SWEEP_FIXED_KINDS && (kind) == SORT_FLOAT) WITH_KIND(SORT_FLOAT, inf, desc, CALL)                     \
        else if (SWEEP_FIXED_KINDS && (kind) == SORT_SIGNED) WITH_KIND(SORT_SIGNED, inf, desc, CALL)              \
        else if (SWEEP_FIXED_KINDS && (kind) == SORT_UNSIGNED) WITH_KIND(SORT_UNSIGNED, inf, desc, CALL)          \
        else WITH_KIND(kind, inf, desc, CALL)                                                                     \
    } while (0)
__device__ __forceinline__ void hist_count(const sort_key* __restrict__ rk, long long len, int kind, sort_key inf,
                                           int desc, int* cnt) {
    WITH_ORDER(kind, inf, desc, hist_count_as(rk, len, o, cnt));
}

// cnt[set][digit] += this thread's keys of the tile rk (tile_n keys, transformed when asked) of each digit.
__device__ __forceinline__ void sweep_count_as(const sort_key* __restrict__ rk, int tile_n, int transform,
                                               KeyOrder order, int shift, int* cnt) {
    int* mine = cnt + (threadIdx.x / SWEEP_SET) * SWEEP_RADIX;
    if (SWEEP_SET == 1) {  // a thread alone: its run of items, cut at the tile's end (a short row's tile: most
        const int lo = sweep_item(0) < tile_n ? sweep_item(0) : tile_n;  // threads have none)
        const int hi = lo + SWEEP_ITEMS < tile_n ? lo + SWEEP_ITEMS : tile_n;
        for (int i = lo; i < hi; ++i) SWEEP_COUNT(mine[SWEEP_DIGIT(transform ? order.to_key(rk[i]) : rk[i], shift)]);
        return;
    }
    for (int u = 0; u < SWEEP_ITEMS; ++u) {
        const int i = sweep_item(u);
        if (i < tile_n) SWEEP_COUNT(mine[SWEEP_DIGIT(transform ? order.to_key(rk[i]) : rk[i], shift)]);
    }
}
__device__ __forceinline__ void sweep_count(const sort_key* __restrict__ rk, int tile_n, int transform, int kind,
                                            sort_key inf, int desc, int shift, int* cnt) {
    if (SWEEP_FIXED_KINDS && transform) WITH_ORDER(kind, inf, desc, sweep_count_as(rk, tile_n, 1, o, shift, cnt));
    else sweep_count_as(rk, tile_n, transform, KeyOrder(kind, inf, desc), shift, cnt);
}

// The digits this thread scans and looks back for: d = threadIdx.x * SWEEP_DIGITS + j.
#define SWEEP_DIGITS (SWEEP_RADIX / SWEEP_THREADS)
static_assert(SWEEP_RADIX % SWEEP_THREADS == 0, "a thread takes whole digits");
static_assert(SWEEP_SET == 1 || SWEEP_SET == 32, "a set is one thread or one warp");

// cnt[set][d] := the first rank of set's keys of digit d in the tile (the counts scanned in (digit, set) order);
// count[d] = the tile's keys of digit d (this thread's digits); returns the tile rank of this thread's first digit.
// Call between barriers (it has two of its own).
__device__ __forceinline__ int sweep_scan(int* cnt, int* count) {
    int sum = 0;
    for (int j = 0; j < SWEEP_DIGITS; ++j) {
        const int d = threadIdx.x * SWEEP_DIGITS + j;
        int run = 0;
        for (int s = 0; s < SWEEP_SETS; ++s) {
            const int c = cnt[s * SWEEP_RADIX + d];
            cnt[s * SWEEP_RADIX + d] = run;
            run += c;
        }
        count[d] = run;
        sum += run;
    }
    int total;
    const int first = block_exclusive_scan(sum, total);
    int at = first;
    for (int j = 0; j < SWEEP_DIGITS; ++j) {
        const int d = threadIdx.x * SWEEP_DIGITS + j;
        for (int s = 0; s < SWEEP_SETS; ++s) cnt[s * SWEEP_RADIX + d] += at;
        at += count[d];
    }
    return first;
}

// Tile status words of the look-back: a flag in the top two bits (0: not yet, AGGREGATE: the tile's own count,
// PREFIX: the count of the row's tiles up to and including it), the count below.
#if SORT_STATUS_BITS == 64
typedef unsigned long long sweep_status;
#else
typedef unsigned int sweep_status;
#endif
#define STATUS_SHIFT (8 * sizeof(sweep_status) - 2)
#define STATUS_AGGREGATE ((sweep_status)1 << STATUS_SHIFT)
#define STATUS_PREFIX ((sweep_status)2 << STATUS_SHIFT)
#define STATUS_COUNT(v) ((long long)((v) & (STATUS_AGGREGATE - 1)))

// The keys of digit d in the row's tiles before tile g (global tile g = row * tiles + tile), count the tile's own:
// publishes the aggregate, walks back over the predecessors' words (waiting for each to be set) until a prefix,
// then publishes its own prefix. Tile 0 of a row publishes its prefix at once.
__device__ __forceinline__ long long look_back(volatile sweep_status* status, long long g, long long tile, int d,
                                               int count) {
    volatile sweep_status* mine = status + g * SWEEP_RADIX + d;
    if (tile == 0) {
        *mine = STATUS_PREFIX | (sweep_status)count;
        return 0;
    }
    *mine = STATUS_AGGREGATE | (sweep_status)count;
    long long before = 0;
    for (long long j = g - 1;; --j) {
        sweep_status v = status[j * SWEEP_RADIX + d];
        while (v == 0) {  // its block has claimed the tile and is running
            spin_pause();
            v = status[j * SWEEP_RADIX + d];
        }
        before += STATUS_COUNT(v);
        if (v & STATUS_PREFIX) break;
    }
    *mine = STATUS_PREFIX | (sweep_status)(before + count);
    return before;
}

// A thread alone scatters its keys in order, straight to their places (base[digit] + tile rank; a CPU's stores gain
// nothing from runs): the simulator's pass. One loop per form (keys transformed on the way in / out, values read /
// made / none), chosen once outside it: the loop then holds no test of a launch argument, and its next place per
// digit is one 64-bit counter of the thread's own (pos), as a CPU's radix sort keeps it.
template <bool IN, bool OUT, int VALS>  // VALS: 0 none, 1 the key's index, 2 read from rv
__device__ __forceinline__ void scatter_alone_run(const sort_key* __restrict__ rk, const long long* __restrict__ rv,
                                                  long long first, int lo, int hi, KeyOrder order, int shift,
                                                  long long* __restrict__ pos, sort_key* __restrict__ keys_out,
                                                  long long* __restrict__ vals_out) {
    for (int i = lo; i < hi; ++i) {
        const sort_key k = IN ? order.to_key(rk[i]) : rk[i];
        const long long to = pos[SWEEP_DIGIT(k, shift)]++;
        keys_out[to] = OUT ? order.from_key(k) : k;
        if (VALS) vals_out[to] = VALS == 2 ? rv[i] : first + i;
    }
}
template <bool IN, bool OUT>
__device__ __forceinline__ void scatter_alone_vals(const sort_key* __restrict__ rk, const long long* __restrict__ rv,
                                                   long long first, int lo, int hi, KeyOrder order, int shift,
                                                   long long* pos, sort_key* keys_out, long long* vals_out) {
    if (vals_out == nullptr)
        scatter_alone_run<IN, OUT, 0>(rk, rv, first, lo, hi, order, shift, pos, keys_out, vals_out);
    else if (rv == nullptr)
        scatter_alone_run<IN, OUT, 1>(rk, rv, first, lo, hi, order, shift, pos, keys_out, vals_out);
    else
        scatter_alone_run<IN, OUT, 2>(rk, rv, first, lo, hi, order, shift, pos, keys_out, vals_out);
}
__device__ __forceinline__ void sweep_scatter_alone(const sort_key* __restrict__ rk, const long long* __restrict__ rv,
                                                    long long first, int tile_n, int transform_in, int transform_out,
                                                    int kind, sort_key inf, int desc, int shift, int* cnt,
                                                    const long long* base, sort_key* __restrict__ keys_out,
                                                    long long* __restrict__ vals_out) {
    long long pos[SWEEP_RADIX];  // where this thread's next key of each digit goes
    const int* mine = cnt + threadIdx.x * SWEEP_RADIX;
    for (int d = 0; d < SWEEP_RADIX; ++d) pos[d] = base[d] + mine[d];
    const int lo = sweep_item(0) < tile_n ? sweep_item(0) : tile_n;  // a set of one: items u = lo + u
    const int hi = lo + SWEEP_ITEMS < tile_n ? lo + SWEEP_ITEMS : tile_n;
    if (transform_in && transform_out)
        WITH_ORDER(kind, inf, desc, (scatter_alone_vals<true, true>(rk, rv, first, lo, hi, o, shift, pos, keys_out,
                                                                    vals_out)));
    else if (transform_in)
        WITH_ORDER(kind, inf, desc, (scatter_alone_vals<true, false>(rk, rv, first, lo, hi, o, shift, pos, keys_out,
                                                                     vals_out)));
    else if (transform_out)
        WITH_ORDER(kind, inf, desc, (scatter_alone_vals<false, true>(rk, rv, first, lo, hi, o, shift, pos, keys_out,
                                                                     vals_out)));
    else
        scatter_alone_vals<false, false>(rk, rv, first, lo, hi, KeyOrder(kind, inf, desc), shift, pos, keys_out,
                                         vals_out);
}

// The lanes of this warp whose d equals this lane's (every lane of the warp calls it): __match_any_sync from sm_70,
// one ballot a bit of d (0 .. SWEEP_RADIX) elsewhere (the simulator; -DSWEEP_MATCH_ANY builds __match_any_sync
// there, for the tests). Two definitions under #if: the simulator's front end reads the branch of the build.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700) || defined(SWEEP_MATCH_ANY)
__device__ __forceinline__ unsigned warp_match(int d) { return __match_any_sync(FULL_MASK, d); }
#else
__device__ __forceinline__ unsigned warp_match(int d) {
    unsigned m = FULL_MASK;
    for (int b = 0; b <= SWEEP_BITS; ++b) {
        const unsigned ones = __ballot_sync(FULL_MASK, (d >> b) & 1);
        m &= (d >> b) & 1 ? ones : ~ones;
    }
    return m;
}
#endif

// A warp ranks one item of its 32 lanes at once (every lane calls it; d = SWEEP_RADIX for no key): the lanes of the
// same digit take consecutive ranks in lane order from the warp's counter, the highest of them moves it.
__device__ __forceinline__ int warp_rank(int d, int* cnt) {
    int* mine = cnt + (threadIdx.x / 32) * SWEEP_RADIX;
    const unsigned lane = threadIdx.x & 31;
    const unsigned peers = warp_match(d);
    const int at = d < SWEEP_RADIX ? mine[d] : 0;
    __syncwarp();
    if (d < SWEEP_RADIX && (peers >> lane) == 1u) mine[d] = at + __popc(peers);
    __syncwarp();
    return at + __popc(peers & ((1u << lane) - 1));
}

extern "C" __global__ void radix_histogram(const sort_key* __restrict__ keys, long long n, long long span, int kind, unsigned long long inf, int desc,
                                           unsigned long long* __restrict__ hist) {
    __shared__ int cnt[HIST_COPIES * SORT_PLACES * SWEEP_RADIX];
    const long long chunks = ceil_div(n, span);
    const long long rows = gridDim.x / chunks, row = blockIdx.x / chunks;
    const long long first = (blockIdx.x % chunks) * span;
    const int t = threadIdx.x;
    for (int e = t; e < HIST_COPIES * SORT_PLACES * SWEEP_RADIX; e += SWEEP_THREADS) cnt[e] = 0;
    __syncthreads();
    hist_count(keys + row * n + first, n - first < span ? n - first : span, kind, (sort_key)inf, desc, cnt);
    __syncthreads();
    for (int e = t; e < SORT_PLACES * SWEEP_RADIX; e += SWEEP_THREADS) {
        long long sum = 0;
        for (int c = 0; c < HIST_COPIES; ++c) sum += cnt[c * SORT_PLACES * SWEEP_RADIX + e];
        if (sum != 0) atomicAdd(&hist[((e / SWEEP_RADIX) * rows + row) * SWEEP_RADIX + e % SWEEP_RADIX],
                                (unsigned long long)sum);
    }
}

extern "C" __global__ void radix_onesweep(const sort_key* __restrict__ keys, const long long* __restrict__ vals,
                                          long long n, int tiles, int shift, int transform_in, int transform_out,
                                          int kind, unsigned long long inf, int desc,
                                          const unsigned long long* __restrict__ hist, sweep_status* status,
                                          int* claimed, sort_key* __restrict__ keys_out,
                                          long long* __restrict__ vals_out) {
    __shared__ int cnt[SWEEP_SETS * SWEEP_RADIX];
    __shared__ int count[SWEEP_RADIX];       // the tile's keys of each digit
    __shared__ long long base[SWEEP_RADIX];  // where digit d's keys of the tile go, less their tile rank
    __shared__ long long tile_id;
    extern __shared__ long long xchg[];      // the tile's keys in their sorted order, then (vals_out) its values
    const KeyOrder order{kind, (sort_key)inf, desc};
    const int t = threadIdx.x;
    if (t == 0) tile_id = atomicAdd(claimed, 1);  // tiles in the order blocks start: a predecessor always runs
    for (int d = t % SWEEP_SET; d < SWEEP_RADIX; d += SWEEP_SET) cnt[(t / SWEEP_SET) * SWEEP_RADIX + d] = 0;  // its set's
    __syncthreads();
    const long long g = tile_id;
    const long long row = g / tiles;
    const long long first = (g % tiles) * SWEEP_TILE;
    const int tile_n = (int)(n - first < SWEEP_TILE ? n - first : SWEEP_TILE);
    const sort_key* rk = keys + row * n + first;
    sweep_count(rk, tile_n, transform_in, kind, (sort_key)inf, desc, shift, cnt);
    __syncthreads();
    int at = sweep_scan(cnt, count);
    __syncthreads();
    long long start[SWEEP_DIGITS];  // the digits' first places in the sorted row: the histogram scanned
    long long sum = 0;
    for (int j = 0; j < SWEEP_DIGITS; ++j) {
        start[j] = sum;
        sum += (long long)hist[row * SWEEP_RADIX + t * SWEEP_DIGITS + j];
    }
    long long total;
    const long long before = block_exclusive_scan(sum, total);
    for (int j = 0; j < SWEEP_DIGITS; ++j) {
        const int d = t * SWEEP_DIGITS + j;
        base[d] = row * n + before + start[j] + look_back(status, g, g % tiles, d, count[d]) - at;
        at += count[d];
    }
    __syncthreads();
    const long long* rv = vals != nullptr ? vals + row * n + first : nullptr;
    if (SWEEP_SET == 1) {
        sweep_scatter_alone(rk, rv, first, tile_n, transform_in, transform_out, kind, (sort_key)inf, desc, shift, cnt,
                            base, keys_out, vals_out);
    } else {  // a warp ranks its keys into the tile's sorted order in shared memory, then writes runs of one digit
        sort_key* xk = (sort_key*)xchg;
        long long* xv = vals_out != nullptr ? xchg + ceil_div(SWEEP_TILE * sizeof(sort_key), 8) : nullptr;
        sort_key k[SWEEP_ITEMS];  // loaded together (registers), then ranked one item at a time
        for (int u = 0; u < SWEEP_ITEMS; ++u) {
            const int i = sweep_item(u);
            k[u] = i < tile_n ? (transform_in ? order.to_key(rk[i]) : rk[i]) : (sort_key)0;
        }
        for (int u = 0; u < SWEEP_ITEMS; ++u) {
            const int i = sweep_item(u);
            const int d = i < tile_n ? SWEEP_DIGIT(k[u], shift) : SWEEP_RADIX;
            const int r = warp_rank(d, cnt);
            if (i < tile_n) {
                xk[r] = k[u];
                if (xv != nullptr) xv[r] = rv != nullptr ? rv[i] : first + i;
            }
        }
        __syncthreads();
        for (int u = 0; u < SWEEP_ITEMS; ++u) {  // 32 consecutive sorted keys a warp
            const int i = sweep_item(u);
            if (i < tile_n) {
                const sort_key k = xk[i];
                const long long to = base[SWEEP_DIGIT(k, shift)] + i;
                keys_out[to] = transform_out ? order.from_key(k) : k;
                if (vals_out != nullptr) vals_out[to] = xv[i];
            }
        }
    }
}

extern "C" __global__ void radix_sort_block(const sort_key* __restrict__ keys, const long long* __restrict__ vals,
                                            long long n, int passes, int kind, unsigned long long inf, int desc,
                                            sort_key* __restrict__ keys_out, long long* __restrict__ vals_out) {
    __shared__ int counts[SORT_COUNTS];
    extern __shared__ long long smem[];  // values [2][n] when vals_out is given, then keys [2][n]
    const KeyOrder order{kind, (sort_key)inf, desc};
    const int t = threadIdx.x;
    const long long row = blockIdx.x;
    long long first, end;
    thread_range(n, first, end);
    long long* sv = smem;
    sort_key* sk = (sort_key*)(smem + (vals_out != nullptr ? 2 * n : 0));
    for (long long i = first; i < end; ++i) {
        sk[i] = order.to_key(keys[row * n + i]);
        if (vals_out != nullptr) sv[i] = vals != nullptr ? vals[row * n + i] : i;
    }
    int cur = 0;
    for (int p = 0; p < passes; ++p) {
        __syncthreads();
        const sort_key* from = sk + cur * n;
        count_digits(from, first, end, p * SORT_BITS, counts);
        __syncthreads();
        scan_counts(counts);
        __syncthreads();
        sort_key* to = sk + (1 - cur) * n;
        for (long long i = first; i < end; ++i) {
            const int d = digit_of(from[i], p * SORT_BITS);
            const int pos = counts[COUNT_AT(d, t)]++;
            to[pos] = from[i];
            if (vals_out != nullptr) sv[(1 - cur) * n + pos] = sv[cur * n + i];
        }
        cur = 1 - cur;
    }
    __syncthreads();
    for (long long i = first; i < end; ++i) {
        keys_out[row * n + i] = order.from_key(sk[cur * n + i]);
        if (vals_out != nullptr) vals_out[row * n + i] = sv[cur * n + i];
    }
}

// topk_select's walks over a thread's keys rk[first .. end), each inlined once per kind of key on the simulator
// (WITH_ORDER): (1) thread t's column of counts, by digit at `shift`, of its keys whose higher digits are the prefix
__device__ __forceinline__ void select_count_as(const sort_key* __restrict__ rk, long long first, long long end,
                                                KeyOrder order, sort_key prefix, sort_key mask, int shift,
                                                int* counts) {
    for (long long i = first; i < end; ++i) {
        const sort_key key = order.to_key(rk[i]);
        if ((key & mask) == prefix) ++counts[COUNT_AT(digit_of(key, shift), threadIdx.x)];
    }
}
// (2) its keys below the threshold | those equal to it << 32
__device__ __forceinline__ long long select_tally_as(const sort_key* __restrict__ rk, long long first, long long end,
                                                     KeyOrder order, sort_key threshold) {
    long long below = 0;
    long long equal = 0;
    for (long long i = first; i < end; ++i) {
        const sort_key key = order.to_key(rk[i]);
        below += key < threshold;
        equal += key == threshold;
    }
    return below | equal << 32;
}
// (3) its keys below the threshold written from cand[below], the first `need` - equal equal ones from cand[equal]
__device__ __forceinline__ void select_write_as(const sort_key* __restrict__ rk, long long first, long long end,
                                                KeyOrder order, sort_key threshold, long long need, long long below,
                                                long long equal, long long all_below, sort_key* __restrict__ cand,
                                                long long* __restrict__ cand_idx) {
    for (long long i = first; i < end; ++i) {
        const sort_key key = order.to_key(rk[i]);
        long long pos = -1;
        if (key < threshold) pos = below++;
        else if (key == threshold && equal < need) pos = all_below + equal++;
        if (pos >= 0) {
            cand[pos] = rk[i];
            cand_idx[pos] = i;
        }
    }
}

extern "C" __global__ void topk_select(const sort_key* __restrict__ keys, long long n, long long k, int bits,
                                       int kind, unsigned long long inf, int desc, sort_key* __restrict__ cand,
                                       long long* __restrict__ cand_idx) {
    __shared__ int counts[SORT_COUNTS];
    __shared__ long long hist[SORT_RADIX];
    __shared__ sort_key chosen[2];  // the prefix so far, and the mask of its digits
    __shared__ long long still;     // how many keys equal to the prefix are still to take
    const int t = threadIdx.x;
    const long long row = blockIdx.x;
    long long first, end;
    thread_range(n, first, end);
    const sort_key* rk = keys + row * n;
    if (t == 0) {
        chosen[0] = chosen[1] = 0;
        still = k;
    }
    for (int shift = ((bits - 1) / SORT_BITS) * SORT_BITS; shift >= 0; shift -= SORT_BITS) {
        __syncthreads();
        const sort_key prefix = chosen[0];
        const sort_key mask = chosen[1];
        for (int d = 0; d < SORT_RADIX; ++d) counts[COUNT_AT(d, t)] = 0;
        WITH_ORDER(kind, (sort_key)inf, desc, select_count_as(rk, first, end, o, prefix, mask, shift, counts));
        __syncthreads();
        for (int d = t; d < SORT_RADIX; d += SORT_THREADS) {
            long long sum = 0;
            for (int u = 0; u < SORT_THREADS; ++u) sum += counts[COUNT_AT(d, u)];
            hist[d] = sum;
        }
        __syncthreads();
        if (t == 0) {
            long long need = still;
            int d = 0;
            for (; d < SORT_RADIX - 1 && hist[d] < need; ++d) need -= hist[d];
            chosen[0] = (sort_key)(prefix | ((sort_key)d << shift));
            chosen[1] = (sort_key)(mask | ((sort_key)(SORT_RADIX - 1) << shift));
            still = need;
        }
    }
    __syncthreads();
    const sort_key threshold = chosen[0];
    const long long need = still;
    long long tally = 0;
    WITH_ORDER(kind, (sort_key)inf, desc, tally = select_tally_as(rk, first, end, o, threshold));
    long long total;
    const long long before = block_exclusive_scan(tally, total);
    WITH_ORDER(kind, (sort_key)inf, desc, select_write_as(rk, first, end, o, threshold, need, before & 0xffffffffLL,
                                                          before >> 32, total & 0xffffffffLL, cand + row * k,
                                                          cand_idx + row * k));
}

extern "C" __global__ void run_starts(const sort_key* __restrict__ s, long long n, int kind, unsigned long long inf,
                                      int nan_equal, bool* __restrict__ flags) {
    const KeyOrder order{kind, (sort_key)inf, 0};
    GRID_STRIDE_LOOP(long long, i, n) {
        bool start = i == 0;
        if (!start) {
            const sort_key a = s[i - 1];
            const sort_key b = s[i];
            const bool zeros = kind >= SORT_FLOAT && (sort_key)((a | b) & (sort_key)~SORT_SIGN) == 0;
            const sort_key ka = order.to_key(a);
            start = (ka != order.to_key(b) && !zeros) || (ka == (sort_key)~(sort_key)0 && kind >= SORT_FLOAT && !nan_equal);
        }
        flags[i] = start;
    }
}
