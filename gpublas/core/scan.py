"""Exclusive prefix sums on the device (cuda_src/scan.cu): where each selected element of a boolean
mask goes (gpublas.core.gather), exact and deterministic (integer sums in an order the launch shape fixes).

    sums, total = exclusive_scan(mask.reshape(-1))   # sums[i] = mask[0] + ... + mask[i-1]; sums[n] = total
"""
import numpy as np

from ..runtime import source
from .array import DeviceArray
from ..runtime.launch import BLOCK, ceil_div, get_kernel, grid_1d

_DEFINES = source.int_defines("scan.cu", "SCAN_")
SCAN_BLOCK, SCAN_TILE = _DEFINES["SCAN_BLOCK"], _DEFINES["SCAN_TILE"]


def exclusive_scan(x):
    """(sums, total) for a contiguous 1-D DeviceArray x of n elements (any dtype, each converted to
    int64): `sums` holds n + 1 int64, sums[i] = x[0] + ... + x[i-1] and sums[n] = the total, which
    is also read back as the Python int `total` (one 8-byte copy: the caller sizes its result by it)."""
    if x.ndim != 1 or not x.c_contiguous:
        raise ValueError(f"exclusive_scan: a contiguous 1-D array, got shape {x.shape} strides {x.strides}")
    sums = DeviceArray(x.size + 1, np.int64)
    scan_into(x, sums)
    return sums, int(sums[x.size].get())


def scan_into(x, sums):
    """sums[:n + 1] = the exclusive scan of x (contiguous, 1-D) and its total, nothing read back (the radix
    sort's digit offsets): tiles, then the tile totals scanned the same
    way (one more level per factor of SCAN_TILE), then each tile's start added."""
    n = x.size
    if n == 0:
        sums.fill(0)
        return
    tiles = ceil_div(n, SCAN_TILE)
    scan_tiles = get_kernel("scan", "scan_tiles_real", x.dtype)
    if tiles == 1:  # the tile's total is the grand total
        scan_tiles(1, SCAN_BLOCK, x, n, sums, sums[n:])
        return
    totals = DeviceArray(tiles, np.int64)
    scan_tiles(tiles, SCAN_BLOCK, x, n, sums, totals)
    starts = DeviceArray(tiles + 1, np.int64)
    scan_into(totals, starts)
    get_kernel("scan", "scan_add", np.int64)(grid_1d(n), BLOCK, sums, n, starts)
