// sort.cu: a stable LSD radix sort of rows of keys, key-only or key-value, and the selects built on it
// (gpublas/sorting.py). `real` is any type of the keys' width: the kernels see keys as their bit patterns
// (sort_key: unsigned char, short, int or long long) and a runtime `kind` says how to order them:
//   SORT_UNSIGNED  as they are (uint8, bool)
//   SORT_SIGNED    the sign bit flipped (int32, int64)
//   SORT_FLOAT     the sign-flip transform: negatives' bits inverted, positives' sign bit set, so -0.0 sorts
//                  before +0.0; every NaN (magnitude above `inf`, the type's infinity pattern) becomes all ones
//                  and sorts last, in its original order, written back as the type's quiet NaN (float16,
//                  bfloat16, float32, float64)
//   SORT_FLOAT_ZEROS  the same with -0.0 taken as +0.0 (written back as +0.0): NumPy's order, where they are equal
// `desc` inverts the transformed key (a descending sort; NaN then first, as torch.topk's largest).
// A pass sorts by SORT_BITS bits of the transformed key; the launcher picks the geometry (SORT_BITS,
// SORT_THREADS, SORT_ITEMS: 4 / 128 / 16 on a GPU, 8 / 32 / 256 on the simulator, where a thread costs more
// than an element) and passes it as defines; the tests run both geometries on the simulator.
// Rows: a batch of `rows` rows of n keys, row r at keys + r * n; indices are positions within the row.
//
// radix_histogram:  block SORT_THREADS, one block per (row, tile of SORT_TILE keys): thread t counts the digits
//                   of the tile's keys [t * SORT_ITEMS, (t + 1) * SORT_ITEMS) into its column of the shared
//                   counts[digit][thread]; then thread t sums digits t, t + SORT_THREADS, ... over the columns
//                   into hist[(row * SORT_RADIX + digit) * tiles + tile]. The exclusive scan of hist (scan.cu)
//                   is where each (row, digit, tile)'s keys go in the whole batch: rows are n apart.
// radix_scatter:    the same blocks and counts; the counts scanned in (digit, thread) order (thread t scans the
//                   SORT_RADIX entries [t * SORT_RADIX, (t + 1) * SORT_RADIX), common.cuh's block_exclusive_scan
//                   joins the threads) give each thread's first rank per digit within the tile; thread t then
//                   writes its keys in order to base[digit] + rank++: stable, as the tile's order is the threads'
//                   order and each thread's keys are consecutive. Values ride along (or the key's index).
// radix_sort_block: one block per row, the whole row in shared memory (dynamic: two buffers of keys and of
//                   values): every pass counts, scans and scatters as above, between the two buffers, with
//                   thread t owning keys [t * per, (t + 1) * per), per = ceil(n / SORT_THREADS).
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
static_assert(SWEEP_THREADS % 32 == 0, "block_exclusive_scan takes whole warps");

template <int S> struct KeyBits;
template <> struct KeyBits<1> { typedef unsigned char type; };
template <> struct KeyBits<2> { typedef unsigned short type; };
template <> struct KeyBits<4> { typedef unsigned int type; };
template <> struct KeyBits<8> { typedef unsigned long long type; };
typedef KeyBits<sizeof(real)>::type sort_key;
#define SORT_SIGN ((sort_key)((sort_key)1 << (8 * sizeof(sort_key) - 1)))

// How keys order: `kind` and the float's infinity pattern, and whether descending.
struct KeyOrder {
    int kind;
    sort_key inf;
    int desc;
    __device__ __forceinline__ sort_key to_key(sort_key b) const {
        sort_key k = b;
        if (kind == SORT_FLOAT_ZEROS && (sort_key)(b & (sort_key)~SORT_SIGN) == 0) b = 0;
        if (kind >= SORT_FLOAT)
            k = (sort_key)(b & (sort_key)~SORT_SIGN) > inf ? (sort_key)~(sort_key)0
                : (b & SORT_SIGN) ? (sort_key)~b : (sort_key)(b | SORT_SIGN);
        else if (kind == SORT_SIGNED)
            k = (sort_key)(b ^ SORT_SIGN);
        return desc ? (sort_key)~k : k;
    }
    __device__ __forceinline__ sort_key from_key(sort_key k) const {
        if (desc) k = (sort_key)~k;
        if (kind >= SORT_FLOAT) {  // every NaN comes back as the quiet NaN NumPy writes (0x7fc00000 for float32)
            if (k == (sort_key)~(sort_key)0) return (sort_key)(inf | ((inf >> 1) & (sort_key)~inf));
            return (k & SORT_SIGN) ? (sort_key)(k ^ SORT_SIGN) : (sort_key)~k;
        }
        if (kind == SORT_SIGNED) return (sort_key)(k ^ SORT_SIGN);
        return k;
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
// Thread t of a tile holds SWEEP_ITEMS keys: set s = t / SWEEP_SET of SWEEP_SET threads owns the tile's keys
// [s * SWEEP_SET * SWEEP_ITEMS, (s + 1) * SWEEP_SET * SWEEP_ITEMS), lane l = t % SWEEP_SET its items u * SWEEP_SET + l
// (a warp: loads coalesce; one thread: a run of consecutive keys). A set counts digits in its own row of counters.
__device__ __forceinline__ int sweep_item(int u) {
    const int t = threadIdx.x;
    return (t / SWEEP_SET) * (SWEEP_SET * SWEEP_ITEMS) + u * SWEEP_SET + t % SWEEP_SET;
}

// This thread's keys of the tile starting at rk (tile_n of them; transformed when asked); past the end, ones.
__device__ __forceinline__ void sweep_load(const sort_key* __restrict__ rk, int tile_n, int transform, KeyOrder order,
                                           sort_key (&k)[SWEEP_ITEMS]) {
    for (int u = 0; u < SWEEP_ITEMS; ++u) {
        const int i = sweep_item(u);
        k[u] = i < tile_n ? (transform ? order.to_key(rk[i]) : rk[i]) : (sort_key)~(sort_key)0;
    }
}

// cnt[set][digit] += this thread's keys of each digit (cnt zeroed by the caller; a set of one thread counts with
// plain increments, a warp with shared-memory atomics).
__device__ __forceinline__ void sweep_count(const sort_key (&k)[SWEEP_ITEMS], int tile_n, int shift, int* cnt) {
    int* mine = cnt + (threadIdx.x / SWEEP_SET) * SWEEP_RADIX;
    for (int u = 0; u < SWEEP_ITEMS; ++u) {
        if (sweep_item(u) >= tile_n) continue;
        const int d = (int)((k[u] >> shift) & (SWEEP_RADIX - 1));
#if SWEEP_SET == 1
        ++mine[d];
#else
        atomicAdd(&mine[d], 1);
#endif
    }
}

// The lanes of this warp whose d equals this lane's (every lane of the warp calls it).
__device__ __forceinline__ unsigned warp_match(int d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    return __match_any_sync(FULL_MASK, d);
#else  // the simulator: one ballot a bit of d (0 .. SWEEP_RADIX)
    unsigned m = FULL_MASK;
    for (int b = 0; b <= SWEEP_BITS; ++b) {
        const unsigned ones = __ballot_sync(FULL_MASK, (d >> b) & 1);
        m &= (d >> b) & 1 ? ones : ~ones;
    }
    return m;
#endif
}

// rank[u] = where key u goes in the tile sorted stably by digit: cnt[set][d] holds the set's first rank of digit d
// (sweep_scan) and moves past each key the set ranks. A warp ranks item u of its 32 lanes at once: the lanes of
// the same digit (warp_match) take consecutive ranks in lane order, the highest of them moves the counter.
__device__ __forceinline__ void sweep_rank(const sort_key (&k)[SWEEP_ITEMS], int tile_n, int shift, int* cnt,
                                           int (&rank)[SWEEP_ITEMS]) {
    int* mine = cnt + (threadIdx.x / SWEEP_SET) * SWEEP_RADIX;
    for (int u = 0; u < SWEEP_ITEMS; ++u) {
        const int d = sweep_item(u) < tile_n ? (int)((k[u] >> shift) & (SWEEP_RADIX - 1)) : SWEEP_RADIX;
#if SWEEP_SET == 1
        rank[u] = d < SWEEP_RADIX ? mine[d]++ : 0;
#else
        const unsigned lane = threadIdx.x & 31;
        const unsigned peers = warp_match(d);
        const int at = d < SWEEP_RADIX ? mine[d] : 0;
        rank[u] = at + __popc(peers & ((1u << lane) - 1));
        __syncwarp();
        if (d < SWEEP_RADIX && (peers >> lane) == 1u) mine[d] = at + __popc(peers);  // the highest lane of its digit
        __syncwarp();
#endif
    }
}

// The digits this thread scans and looks back for: d = threadIdx.x * SWEEP_DIGITS + j.
#define SWEEP_DIGITS (SWEEP_RADIX / SWEEP_THREADS)
static_assert(SWEEP_RADIX % SWEEP_THREADS == 0, "a thread takes whole digits");
static_assert(SWEEP_SET == 1 || SWEEP_SET == 32, "a set is one thread or one warp");

// cnt[set][d] := the first rank of set's keys of digit d in the tile (the counts scanned in (digit, set) order);
// count[j] = the tile's keys of this thread's digit j; returns the tile rank of this thread's first digit.
// Call between barriers (it has two of its own).
__device__ __forceinline__ int sweep_scan(int* cnt, int (&count)[SWEEP_DIGITS]) {
    int sum = 0;
    for (int j = 0; j < SWEEP_DIGITS; ++j) {
        const int d = threadIdx.x * SWEEP_DIGITS + j;
        int run = 0;
        for (int s = 0; s < SWEEP_SETS; ++s) {
            const int c = cnt[s * SWEEP_RADIX + d];
            cnt[s * SWEEP_RADIX + d] = run;
            run += c;
        }
        count[j] = run;
        sum += run;
    }
    int total;
    const int first = block_exclusive_scan(sum, total);
    int at = first;
    for (int j = 0; j < SWEEP_DIGITS; ++j) {
        const int d = threadIdx.x * SWEEP_DIGITS + j;
        for (int s = 0; s < SWEEP_SETS; ++s) cnt[s * SWEEP_RADIX + d] += at;
        at += count[j];
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
        while (v == 0) v = status[j * SWEEP_RADIX + d];  // its block has claimed the tile and is running
        before += STATUS_COUNT(v);
        if (v & STATUS_PREFIX) break;
    }
    *mine = STATUS_PREFIX | (sweep_status)(before + count);
    return before;
}

extern "C" __global__ void radix_histogram(const sort_key* __restrict__ keys, long long n, int tiles, int places,
                                           int kind, unsigned long long inf, int desc,
                                           unsigned long long* __restrict__ hist) {
    __shared__ int cnt[SWEEP_SETS * SWEEP_RADIX];
    const long long rows = gridDim.x / tiles, row = blockIdx.x / tiles;
    const long long first = (long long)(blockIdx.x % tiles) * SWEEP_TILE;
    const int tile_n = (int)(n - first < SWEEP_TILE ? n - first : SWEEP_TILE);
    sort_key k[SWEEP_ITEMS];
    sweep_load(keys + row * n + first, tile_n, 1, KeyOrder{kind, (sort_key)inf, desc}, k);
    for (int p = 0; p < places; ++p) {
        for (int e = threadIdx.x; e < SWEEP_SETS * SWEEP_RADIX; e += SWEEP_THREADS) cnt[e] = 0;
        __syncthreads();
        sweep_count(k, tile_n, p * SWEEP_BITS, cnt);
        __syncthreads();
        for (int d = threadIdx.x; d < SWEEP_RADIX; d += SWEEP_THREADS) {
            int sum = 0;
            for (int s = 0; s < SWEEP_SETS; ++s) sum += cnt[s * SWEEP_RADIX + d];
            if (sum != 0) atomicAdd(&hist[(p * rows + row) * SWEEP_RADIX + d], (unsigned long long)sum);
        }
        __syncthreads();
    }
}

extern "C" __global__ void radix_onesweep(const sort_key* __restrict__ keys, const long long* __restrict__ vals,
                                          long long n, int tiles, int shift, int transform_in, int transform_out,
                                          int kind, unsigned long long inf, int desc,
                                          const unsigned long long* __restrict__ hist, sweep_status* status,
                                          int* claimed, sort_key* __restrict__ keys_out,
                                          long long* __restrict__ vals_out) {
    __shared__ int cnt[SWEEP_SETS * SWEEP_RADIX];
    __shared__ long long base[SWEEP_RADIX];  // where digit d's keys of the tile go, less their tile rank
    __shared__ long long xchg[SWEEP_TILE];   // the tile's keys, then its values, in their sorted order
    __shared__ long long tile_id;
    const KeyOrder order{kind, (sort_key)inf, desc};
    const int t = threadIdx.x;
    if (t == 0) tile_id = atomicAdd(claimed, 1);  // tiles in the order blocks start: a predecessor always runs
    for (int e = t; e < SWEEP_SETS * SWEEP_RADIX; e += SWEEP_THREADS) cnt[e] = 0;
    __syncthreads();
    const long long g = tile_id;
    const long long row = g / tiles;
    const long long tile = g % tiles;
    const long long first = tile * SWEEP_TILE;
    const int tile_n = (int)(n - first < SWEEP_TILE ? n - first : SWEEP_TILE);
    sort_key k[SWEEP_ITEMS];
    sweep_load(keys + row * n + first, tile_n, transform_in, order, k);
    sweep_count(k, tile_n, shift, cnt);
    __syncthreads();
    int count[SWEEP_DIGITS];
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
        base[d] = row * n + before + start[j] + look_back(status, g, tile, d, count[j]) - at;
        at += count[j];
    }
    int rank[SWEEP_ITEMS];
    sweep_rank(k, tile_n, shift, cnt, rank);
    sort_key* xk = (sort_key*)xchg;
    for (int u = 0; u < SWEEP_ITEMS; ++u)
        if (sweep_item(u) < tile_n) xk[rank[u]] = k[u];
    __syncthreads();
    unsigned char dig[SWEEP_ITEMS];  // the digit of sorted key t + u * SWEEP_THREADS: the values go where it went
    for (int u = 0; u < SWEEP_ITEMS; ++u) {
        const int i = t + u * SWEEP_THREADS;
        if (i < tile_n) {
            const sort_key key = xk[i];
            dig[u] = (unsigned char)((key >> shift) & (SWEEP_RADIX - 1));
            keys_out[base[dig[u]] + i] = transform_out ? order.from_key(key) : key;
        }
    }
    if (vals_out != nullptr) {
        __syncthreads();
        for (int u = 0; u < SWEEP_ITEMS; ++u) {
            const int i = sweep_item(u);
            if (i < tile_n) xchg[rank[u]] = vals != nullptr ? vals[row * n + first + i] : first + i;
        }
        __syncthreads();
        for (int u = 0; u < SWEEP_ITEMS; ++u) {
            const int i = t + u * SWEEP_THREADS;
            if (i < tile_n) vals_out[base[dig[u]] + i] = xchg[i];
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

extern "C" __global__ void topk_select(const sort_key* __restrict__ keys, long long n, long long k, int bits,
                                       int kind, unsigned long long inf, int desc, sort_key* __restrict__ cand,
                                       long long* __restrict__ cand_idx) {
    __shared__ int counts[SORT_COUNTS];
    __shared__ long long hist[SORT_RADIX];
    __shared__ sort_key chosen[2];  // the prefix so far, and the mask of its digits
    __shared__ long long still;     // how many keys equal to the prefix are still to take
    const KeyOrder order{kind, (sort_key)inf, desc};
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
        for (long long i = first; i < end; ++i) {
            const sort_key key = order.to_key(rk[i]);
            if ((key & mask) == prefix) ++counts[COUNT_AT(digit_of(key, shift), t)];
        }
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
    long long below = 0;
    long long equal = 0;
    for (long long i = first; i < end; ++i) {
        const sort_key key = order.to_key(rk[i]);
        below += key < threshold;
        equal += key == threshold;
    }
    long long total;
    const long long before = block_exclusive_scan(below | equal << 32, total);
    const long long all_below = total & 0xffffffffLL;
    below = before & 0xffffffffLL;
    equal = before >> 32;
    for (long long i = first; i < end; ++i) {
        const sort_key key = order.to_key(rk[i]);
        long long pos = -1;
        if (key < threshold) pos = below++;
        else if (key == threshold && equal < need) pos = all_below + equal++;
        if (pos >= 0) {
            cand[row * k + pos] = rk[i];
            cand_idx[row * k + pos] = i;
        }
    }
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
