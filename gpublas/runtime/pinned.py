"""Page-locked (pinned) host arrays: the only host memory an asynchronous copy can overlap with.

pinned_empty() returns an ordinary ndarray whose memory the backend page-locked; is_pinned() tells
such memory (or any view into it) from pageable memory.
"""
import bisect
import weakref

import numpy as np

from . import backends

_ranges = []  # sorted (start, end) of live pinned buffers


class PageableMemoryWarning(UserWarning):
    """An asynchronous copy was handed pageable host memory, so it ran synchronously."""


def pinned_empty(shape, dtype=np.float32):
    """An uninitialized page-locked host array."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = backends.current().pinned_alloc(nbytes)  # uint8 ndarray owning the page-locked memory
    entry = (raw.ctypes.data, raw.ctypes.data + raw.nbytes)
    bisect.insort(_ranges, entry)
    weakref.finalize(raw, _ranges.remove, entry)
    return raw[:nbytes].view(dtype).reshape(shape)


def pinned_like(a):
    out = pinned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def is_pinned(a):
    """True when ndarray `a` lies inside page-locked memory from pinned_empty()."""
    if not isinstance(a, np.ndarray) or a.size == 0:
        return False
    start = a.ctypes.data
    i = bisect.bisect_right(_ranges, (start, float("inf"))) - 1
    return i >= 0 and _ranges[i][0] <= start and start + a.nbytes <= _ranges[i][1]
