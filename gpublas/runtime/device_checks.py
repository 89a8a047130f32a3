"""Device-side index checks: CUDA's device-side assert, made readable.

A kernel that reads through an index it was handed on the device (nn.Embedding's rows, a loss's labels)
cannot raise: it records an index it finds outside its range in a record of int64 slots [site,
position << 32 | value, limit] (common.cuh's report_bad_index: an atomicCAS on the site slot, so the
earliest launch's site holds it, and an atomicMin on the position, so the report is the same under
any thread order) and carries on (the row or the loss reads as NaN). The
host looks at the record at its next synchronization: DeviceArray.get(), gpublas.synchronize(),
Stream.synchronize() and Event.synchronize() call raise_pending() (a global read, unless a checked kernel
ran or a graph replayed since the last one), which raises IndexError naming the
site (the layer or op, registered by the launcher with site()) and the bad value, then clears the
record so the process can go on. Kernels captured in a graph write it at each replay; the replay's
next host synchronization reports it, as for eager launches.

The record lives where both sides see it without a copy: host memory on the simulator, mapped
(zero-copy) pinned memory on a GPU. Checking it costs one host memory read per synchronization,
nothing while no checked kernel has run. The record is per process and backend: a bad index found
by a kernel one thread launched is reported by whichever thread synchronizes next (CUDA's sticky
errors are per context, too).
"""
import warnings

from . import backends

_sites = {}      # template -> site id (1, 2, ...)
_templates = [None]
_records = {}    # backend -> (host int64 array of 4, device pointer)
_unchecked = set()  # backends whose mapped_alloc failed
_armed = False   # a checked kernel was launched, or a graph replayed, since the last check


def site(template):
    """The id a kernel writes for `template`, an error message with {value}, {position} and {limit}
    fields, e.g. "nn.Embedding(10, 4): index {value} at position {position} is outside [0, {limit})"."""
    k = _sites.get(template)
    if k is None:
        _templates.append(template)
        k = _sites[template] = len(_templates) - 1
    return k


def record():
    """The device pointer of this backend's record (allocated at the first call): a checked kernel's
    `long long* check` argument."""
    arm()
    backend = backends.current()
    if backend in _unchecked:
        return None
    rec = _records.get(backend)
    if rec is None:
        try:
            host, ptr = backend.mapped_alloc(4 * 8)
        except Exception as e:  # no memory both sides see: the kernels check nothing (NULL), as before
            warnings.warn(f"gpublas: device-side index checks are off ({type(e).__name__}: {e})", RuntimeWarning)
            _unchecked.add(backend)
            return None
        host = memoryview(host).cast("q")[:4]  # its slots as Python ints, without NumPy's scalars
        _clear(host)
        rec = _records[backend] = (host, ptr)
    return rec[1]


def arm():
    """The next synchronization looks at the record: a checked kernel was launched (record()), or a
    graph that may hold one was replayed (Graph.replay)."""
    global _armed
    _armed = True


def raise_pending():
    """Raises IndexError for the bad index a checked kernel recorded since the last check (and clears
    the record); nothing when none did. Called after each host synchronization."""
    global _armed
    if not _armed:  # the common case: one global read
        return
    _armed = False
    for host, _ in _records.values():
        if host[0]:
            k, key, limit = host[0], host[1] & (2**64 - 1), host[2]
            position, value = key >> 32, (key & 0xFFFFFFFF) - ((key & 0x80000000) << 1)  # the int32 back
            _clear(host)
            template = _templates[k] if 0 < k < len(_templates) else "an index {value} outside [0, {limit})"
            raise IndexError(template.format(value=value, position=position, limit=limit)
                             + " (found on the device by an earlier launch, reported at this host synchronization)")


def _clear(host):
    host[0], host[1], host[2], host[3] = 0, -1, 0, 0  # all ones: the smallest position's atomicMin starts from the top
