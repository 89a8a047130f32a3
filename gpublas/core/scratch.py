"""Per host thread: the device memory a reduction's partials and result use when it returns a host number,
and the host buffers that number is read back into.

    s = scratch()                 # None on a stream other than the default one, or while capturing
    k.launch(..., s.partials(0))  # device addresses: scalar slots and partial arrays
    value = s.read(s.slot(0), dtype)

A BLAS-1 reduction that returns a Python number (gpublas.dot, nrm2, iamax ...) allocated its result and partials
and read the result into a new ndarray at every call: four pool round trips and an ndarray for 2^10 elements
whose work takes 0.1 us. The default stream runs its work in order and the read-back waits for it, so when a
call returns its scratch is free for the next call of the same thread; other threads have their own. Work on
another stream (it may still run when the next call starts) and graph captures (a replay would reuse the
memory later) allocate as before.
"""
import threading

import numpy as np

from . import array
from ..runtime import backends, device_checks
from ..runtime.stream import _local

SLOT = 64  # bytes per scalar slot (a complex128 fits; 64-byte aligned from the block's start)
SLOTS = 4
PARTIALS = 1024  # elements of up to 16 bytes in each of the two partial arrays (blas1.MAX_PARTIALS)


class Scratch:
    """One thread's scratch on one backend: SLOTS scalar slots, then two arrays of PARTIALS partials."""

    def __init__(self, backend):
        self.backend = backend
        self._mem = array.empty(SLOTS * SLOT + 2 * PARTIALS * 16, np.uint8)  # kept: the block stays this thread's
        self.base = self._mem.ptr
        self._host = {}  # dtype -> (a one-element ndarray, its address)

    def slot(self, k):
        """The device address of scalar slot k (0 <= k < SLOTS)."""
        return self.base + k * SLOT

    def partials(self, k):
        """The device address of partial array k (0 or 1): room for PARTIALS elements; array 0 runs on into
        array 1 (2 * PARTIALS elements of 16 bytes in a row: nrm2's three sums per block)."""
        return self.base + SLOTS * SLOT + k * PARTIALS * 16

    def read(self, address, dtype):
        """The `dtype` value at device `address` as a NumPy scalar, once the default stream's work is done (a
        blocking copy into this thread's host buffer for dtype, as DeviceArray.get reads)."""
        host = self._host.get(dtype)
        if host is None:
            buffer = np.empty(1, dtype)
            host = self._host[dtype] = (buffer, buffer.ctypes.data)
        self.backend.dtoh(host[1], address, dtype.itemsize, None)
        device_checks.raise_pending()  # a bad index a checked kernel found, as after every host synchronization
        return host[0][0]


class _PerThread(threading.local):
    def __init__(self):
        self.by_backend = {}  # backend -> its Scratch, made at this thread's first call


_threads = _PerThread()


def scratch():
    """This thread's Scratch on the active backend when work runs on the default stream outside a capture,
    else None (the caller allocates its own memory)."""
    if _local.stack or _local.graph is not None:
        return None
    backend = backends.current()
    s = _threads.by_backend.get(backend)
    if s is None:
        s = _threads.by_backend[backend] = Scratch(backend)
    return s
