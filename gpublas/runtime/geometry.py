"""Launch shapes: how many blocks of how many threads a launcher asks for, per backend.

    grid, block = flat_geometry(n)     # a flat kernel over n elements (BLAS-1, elementwise)
    grid, block = geometry_1d(n)       # any grid-stride kernel
    k.launch(grid, block, ...)

A GPU wants enough threads to cover the elements (BLOCK per block, at most GRID_STRIDE_BLOCKS blocks: a
grid-stride loop covers the rest). The simulator runs threads one after another, so a thread costs a function
call: grid-stride kernels get SIM_ELEMENTS_PER_THREAD elements a thread there, and flat kernels SIM_RUN, one
contiguous run (common.cuh's GRID_STRIDE_LOOP) that g++ vectorizes. The simulator spreads the blocks of a
flat launch over the CPU's cores from SIM_SPREAD elements on (the kernels say so with `// sim spread:` lines,
source.sim_spread); a smaller one is a single block that the calling thread runs alone.
"""
from . import backends

BLOCK = 256              # threads per block of every 1-D kernel launch
GRID_STRIDE_BLOCKS = 4096  # a grid-stride loop needs no more blocks than keep a GPU busy
# On the sim backend a thread costs far more than an element (a function call per thread), so its
# grid-stride loops get 8 elements per thread: the same kernels, an eighth of the threads. Flat kernels over
# memory (BLAS-1, elementwise, reductions) ask for SIM_RUN: a simulated thread then walks one contiguous run
# of about that many elements (common.cuh's GRID_STRIDE_LOOP on the sim), which g++ vectorizes.
SIM_ELEMENTS_PER_THREAD = 8
SIM_RUN = 1024
# From this many elements a flat launch on the sim is SIM_BLOCK_RUNS-thread blocks that the runtime spreads
# over the cores; below it one block on the calling thread: waking the other OpenMP threads (they sleep between
# launches) costs 10-15 us on a shared 2-core VM, where float32 axpy takes 30 us at 2^17 and 40 at 2^18 on one
# core. Two threads, float32, us (min of 7 batches, three runs): axpy 2^18 37-45 -> 36-51, 2^20 143-150 -> 92-106,
# dot 2^20 190-206 -> 112-150, x + y 2^20 289-305 -> 139-167.
SIM_SPREAD = 1 << 18
SIM_BLOCK_RUNS = 32  # 32 runs of SIM_RUN elements: the unit the cores take blocks in (schedule(dynamic))
# A reduction's first pass on the sim from SIM_SPREAD elements: each thread takes this many runs (its block's threads
# save their partials around the block's barrier: 2^22 float32 sum 1.18 -> 0.92 ms, nrm2 1.72 -> 1.41, kernel alone)
SIM_REDUCE_RUNS = 8


def ceil_div(a, b):
    return -(-a // b)


def simulated():
    """True on the sim backend, where a thread (and each barrier it reaches) costs far more than an
    element: launchers there pick fewer threads per block or fewer blocks; the kernels are the same."""
    return backends.current().name == "sim"


def grid_1d(n, block=BLOCK, cap=GRID_STRIDE_BLOCKS, sim_run=SIM_ELEMENTS_PER_THREAD):
    """Blocks of `block` threads for a grid-stride loop over n elements: enough for one element per
    thread (`sim_run` on the sim), at most `cap`; 0 for n == 0 (the launch is skipped)."""
    blocks = -(-int(n) // (block * sim_run if simulated() else block))  # ceil_div, at every launch
    return blocks if blocks < cap else cap


def geometry_1d(n, cap=GRID_STRIDE_BLOCKS, sim_run=SIM_ELEMENTS_PER_THREAD):
    """(grid, block) for a grid-stride loop over n elements whose kernel takes any block size: BLOCK
    threads per block, except on the sim when n needs fewer threads than a block (`sim_run` elements
    each): then as few whole warps as cover n. A simulated thread costs a function call whether or
    not it finds an element (x + y of 1 element: 256 calls, half of the launch's 2 us run)."""
    if n < BLOCK * sim_run and simulated():
        return (1 if n else 0), (-(-int(n) // (32 * sim_run)) or 1) * 32
    return grid_1d(n, BLOCK, cap, sim_run), BLOCK


def flat_geometry(n):
    """(grid, block) for a flat kernel over n elements (BLAS-1, elementwise): geometry_1d's on a GPU. On the
    sim a thread per run of SIM_RUN elements, in one block below SIM_SPREAD elements (a grid-stride loop takes
    any block size: 2^10 elements are one thread's run, where 32 threads of 32 elements cost 0.3 us more),
    else in blocks of SIM_BLOCK_RUNS threads that the cores share. Kept per size: a launcher asks for the same
    few again and again."""
    sim = simulated()
    cache = _FLAT[sim]
    g = cache.get(n)
    if g is None:
        n = int(n)
        runs = -(-n // SIM_RUN) or 1
        if not sim:
            g = geometry_1d(n, sim_run=SIM_RUN)
        elif n < SIM_SPREAD:
            g = (1 if n else 0), runs
        else:
            g = min(-(-runs // SIM_BLOCK_RUNS), GRID_STRIDE_BLOCKS), SIM_BLOCK_RUNS
        if len(cache) < 4096:
            cache[n] = g
    return g


_FLAT = {True: {}, False: {}}  # simulated() -> {n: flat_geometry(n)}


def fast_divisor(d):
    """Divisor d (0 <= d < 2^31) packed with its multiplier for common.cuh's FastDivmod:
    d | m << 32 with m = ceil(2^(31 + ceil(log2 d)) / d), passed as one unsigned long long argument
    (0 and 1 carry no multiplier). CUTLASS's find_divisor."""
    d = int(d)
    if not 0 <= d < 1 << 31:
        raise ValueError(f"fast_divisor: {d} is outside [0, 2^31)")
    if d <= 1:
        return d
    p = 31 + (d - 1).bit_length()  # 31 + ceil(log2 d)
    return d | (((1 << p) + d - 1) // d) << 32
