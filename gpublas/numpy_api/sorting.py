"""Sorting on the device (cuda_src/sort.cu): a stable LSD radix sort of rows, and what stands on it.

    s = gpublas.sort(a, axis=-1);  p = gpublas.argsort(a, kind="stable")
    values, indices = gpublas.topk(logits, 50)             # per row: the 50 largest, descending

Every sort is stable (argsort's `kind` is accepted and ignored: stable is what every kind gets) and
orders as NumPy's: NaN last, -0.0 before +0.0 (NumPy leaves their order open). Keys of any of
bool, uint8, int32, int64, float16, bfloat16, float32, float64 (any integer dtype gpublas holds);
indices are int64. An axis other than the last is moved last through one strided copy; a batch of
rows is sorted by one launch sequence. Rows that fit a block's shared memory sort in one launch
(radix_sort_block); longer ones take one histogram launch for every 8-bit digit place, then one
radix_onesweep launch a place (tiles ranked on chip, their offsets by decoupled look-back).
topk(a, k) is torch.topk's: values largest first (smallest first with largest=False), ties by the
lower index, NaN largest; a k much below the row's length selects the k keys by a radix select
(topk_select) and sorts only them.
"""
import collections

import numpy as np

from ..runtime import dtypes
from ..core.array import DeviceArray
from ..core.checks import as_array, normalize_axes
from ..runtime.launch import ceil_div, get_kernel, simulated

INT64 = np.dtype(np.int64)
KEY_C = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
UNSIGNED, SIGNED, FLOAT, FLOAT_ZEROS = 0, 1, 2, 3  # sort.cu's SORT_UNSIGNED, SORT_SIGNED, SORT_FLOAT, SORT_FLOAT_ZEROS

# The one-block sort and topk_select: a pass sorts by `bits`, a block has `threads`, each walking `items` keys;
# the onesweep passes (8-bit digits): `sweep_threads` threads of `sweep_items` keys a tile, digits counted by sets of
# `sweep_set` threads (32: a warp, ranked by __match_any_sync; 1: each thread alone, plain increments). sort.cu's
# defines.
# radix_histogram: a block counts `hist_tiles` tiles' worth of keys.
Geometry = collections.namedtuple("Geometry", "bits threads items sweep_threads sweep_items sweep_set hist_tiles")
GPU = Geometry(4, 128, 16, 256, 16, 32, 8)   # the one-block counts of a 128-thread block take 8 KB of shared memory
SIM = Geometry(8, 32, 256, 32, 8192, 1, 1)  # a simulated thread costs more than a key: many keys each, counted alone
forced = None                # a Geometry every backend uses (the tests run the GPU's on the simulator)
TOPK_SELECT = 4              # topk selects (rather than sorts the row) when k * TOPK_SELECT < n
TOPK_SELECT_ROWS = 256       # and, on a GPU, the rows are at least this many. topk_select is one block per row, its
                             # time flat while the rows fit the GPU at once (H200, k = 64, measured: 64 x 50257 in
                             # 0.50 ms, one row of 2^20 in 7.8 ms); the onesweep sort's grows with the keys (computed,
                             # not yet measured: ~100 bytes a key with indices, ~0.1 ms per 64 x 50257 at H200
                             # bandwidth), so they cross near 300 rows; `benchmarks sort` on a GPU checks it
HEAVY = ("radix_histogram", "radix_onesweep", "radix_sort_block", "topk_select")  # kernels of heavy blocks
STATUS_LIMIT = 1 << 30       # rows this long or longer take 64-bit look-back words (a 30-bit count otherwise)


def geometry():
    return forced or (SIM if simulated() else GPU)


def kernel(name, itemsize, g=None, status_bits=32):
    """sort.cu's kernel `name` for keys of `itemsize` bytes, built for geometry g (default: the backend's)."""
    g = g or geometry()
    k = get_kernel("sort", name, None, real=KEY_C[itemsize], SORT_BITS=g.bits, SORT_THREADS=g.threads,
                   SORT_ITEMS=g.items, SWEEP_THREADS=g.sweep_threads, SWEEP_ITEMS=g.sweep_items,
                   SWEEP_SET=g.sweep_set, SORT_STATUS_BITS=status_bits)
    # a block of these walks a row or a tile, thousands of keys: the simulator spreads even few of them over its
    # cores (2^20 float32 on 2 cores: 15.5 -> 8.0 ms wall)
    return k.spread_blocks() if name in HEAVY else k


def key_order(dtype, what="sort"):
    """(kind, the bit pattern of +inf or 0) of keys of `dtype`: how sort.cu orders their bits."""
    dtype = np.dtype(dtype)
    if dtypes.is_float(dtype):
        return FLOAT, int(np.array(np.inf, dtype).view(f"u{dtype.itemsize}"))
    if dtype.kind in "iub" and dtype.itemsize in KEY_C:
        return (SIGNED if dtype.kind == "i" else UNSIGNED), 0
    raise TypeError(f"{what}: cannot sort {dtype} keys (bool, integer and real float dtypes only)")


def sort_rows(x, rows, n, desc=False, values=None, want_values=False, zeros_equal=False):
    """(keys, values) of the `rows` rows of n keys in x (a contiguous DeviceArray of rows * n elements),
    each row sorted stably (descending with desc): keys as a new (rows, n) array of x's dtype, values the
    int64 `values` (rows, n) permuted alike, or each key's index in its row, when `want_values` (else None).
    zeros_equal: -0.0 and +0.0 are equal keys (NumPy's order; both come back as +0.0)."""
    kind, inf = key_order(x.dtype)
    kind = FLOAT_ZEROS if zeros_equal and kind == FLOAT else kind
    size, g = x.itemsize, geometry()
    passes = ceil_div(8 * size, g.bits)
    out = DeviceArray((rows, n), x.dtype)
    vout = DeviceArray((rows, n), INT64) if want_values else None
    if rows * n == 0:
        return out, vout
    args = (kind, inf, int(desc))
    block = kernel("radix_sort_block", size, g)
    shared = 2 * n * (size + 8 * want_values)
    shared += -shared % 8
    if n <= g.threads * g.items and block.static_shared + shared <= block.max_shared_optin:
        if shared > block.max_dynamic_shared:
            block.allow_shared(shared)
        block(rows, g.threads, x, values, n, passes, *args, out, vout, shared=shared)
        return out, vout
    return onesweep(x, rows, n, args, values, vout, out, g)


def onesweep(x, rows, n, args, values, vout, out, g):
    """The passes of sort_rows past one block: one histogram of every digit place, then one radix_onesweep launch
    a place (8 bits), tiles of one pass offset by the look-back; out / vout as sort_rows'."""
    size, tile = x.itemsize, g.sweep_threads * g.sweep_items
    places, tiles = size, ceil_div(n, tile)
    wide = n >= STATUS_LIMIT
    # scratch (one memset), in 32-bit words: the histograms [place][row][digit] (64-bit), each pass's tile counter
    # (an even count: 64-bit words stay aligned), then each pass's look-back words [tile][digit] (64-bit when wide)
    h, c, w = 2 * places * rows * 256, places + places % 2, rows * tiles * 256 * (2 if wide else 1)
    scratch = DeviceArray(h + c + places * w, np.uint32)
    scratch.fill(0)
    hist, claimed, status = scratch[:h], scratch[h:h + c], scratch[h + c:]
    span = tile * g.hist_tiles
    kernel("radix_histogram", size, g)(rows * ceil_div(n, span), g.sweep_threads, x, n, span, *args, hist)
    sweep = kernel("radix_onesweep", size, g, 64 if wide else 32)
    shared = 0 if g.sweep_set == 1 else ceil_div(tile * size, 8) * 8 + tile * 8 * (vout is not None)  # keys, values
    if shared > sweep.max_dynamic_shared:
        sweep.allow_shared(shared)
    keys = [DeviceArray((rows, n), x.dtype) for _ in range(min(places - 1, 2))]
    vals = [DeviceArray((rows, n), INT64) for _ in range(min(places - 1, 2))] if vout is not None else [None, None]
    for p in range(places):
        first, last = p == 0, p == places - 1
        src, vsrc = (x, values) if first else (keys[(p - 1) % 2], vals[(p - 1) % 2])
        dst, vdst = (out, vout) if last else (keys[p % 2], vals[p % 2])
        sweep(rows * tiles, g.sweep_threads, src, vsrc, n, tiles, 8 * p, int(first), int(last), *args,
              hist[2 * p * rows * 256:], status[p * w:], claimed[p:], dst, vdst, shared=shared)
    return out, vout


def as_rows(a, axis, what):
    """(contiguous array with `axis` moved last, the axis as a non-negative int) for sorting along
    `axis` (None: the flattened array, as NumPy's)."""
    a = as_array(a, what)
    if axis is None:
        a, axis = a.reshape(-1), 0
    if a.ndim == 0:
        raise np.exceptions.AxisError(f"{what}: axis {axis} is out of bounds for array of dimension 0")
    ax = normalize_axes(axis, a.ndim, what)[0]
    if ax != a.ndim - 1:
        a = a.transpose(tuple(i for i in range(a.ndim) if i != ax) + (ax,))
    return (a if a.c_contiguous else a.copy()), ax


def from_rows(r, shape, ax):
    """The sorted rows r (rows, n) as an array of `shape` (axis ax moved last) with ax put back (a copy then)."""
    r = r.reshape(shape)
    if ax == len(shape) - 1:
        return r
    return r.transpose(tuple(range(ax)) + (len(shape) - 1,) + tuple(range(ax, len(shape) - 1))).copy()


def _sorted(a, axis, what, want_values):
    x, ax = as_rows(a, axis, what)
    n = x.shape[-1]
    keys, vals = sort_rows(x, x.size // n if n else 0, n, want_values=want_values)
    return from_rows(vals if want_values else keys, x.shape, ax)


def _check(kind, order, what):
    if order is not None:
        raise TypeError(f"{what}: order= sorts structured arrays by field, which gpublas does not hold")
    if kind not in (None, "quicksort", "mergesort", "heapsort", "stable"):
        raise ValueError(f"{what}: kind must be one of 'quicksort', 'mergesort', 'heapsort', 'stable', got {kind!r}")


def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """A sorted copy of `a` along `axis` (None: flattened), as numpy.sort; always stable."""
    _check(kind, order, "sort")
    return _sorted(a, axis, "sort", False)


def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """The int64 indices that sort `a` along `axis` (None: flattened), stable, as numpy.argsort(kind='stable')."""
    _check(kind, order, "argsort")
    return _sorted(a, axis, "argsort", True)


def topk(a, k, axis=-1, largest=True, sorted=True):  # noqa: A002 (torch's name)
    """(values, int64 indices) of the k largest (smallest with largest=False) elements along `axis`, as
    torch.topk: largest first, ties by the lower index, NaN the largest; `sorted` is accepted (always sorted)."""
    x, ax = as_rows(a, axis, "topk")
    n = x.shape[-1]
    k = int(k)
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} is out of range for an axis of size {n}")
    rows = x.size // n if n else 0
    shape = x.shape[:-1] + (k,)
    g = geometry()
    if rows * k == 0:
        values, indices = DeviceArray((rows, k), x.dtype), DeviceArray((rows, k), INT64)
    elif k * TOPK_SELECT >= n or n <= g.threads * g.items or (rows < TOPK_SELECT_ROWS and not simulated()):
        keys, vals = sort_rows(x, rows, n, desc=largest, want_values=True)
        values, indices = keys[:, :k].copy(), vals[:, :k].copy()
    else:
        kind, inf = key_order(x.dtype, "topk")
        cand, where = DeviceArray((rows, k), x.dtype), DeviceArray((rows, k), INT64)
        kernel("topk_select", x.itemsize, g)(rows, g.threads, x, n, k, 8 * x.itemsize, kind, inf, int(largest),
                                             cand, where)
        values, indices = sort_rows(cand, rows, k, desc=largest, values=where, want_values=True)
    return from_rows(values, shape, ax), from_rows(indices, shape, ax)
