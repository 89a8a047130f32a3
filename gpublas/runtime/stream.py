"""Streams and events. `with stream:` makes a stream current for launches and copies that name none.

A stream can be capturing a graph (gpublas.graph): `Stream.graph` is then the Graph its launches and
copies are recorded into, and `capturing()` the Graph this thread captures; what a graph cannot
hold (a synchronize here; read-backs and compiles in array.py, blas1.py, launch.py) calls
`refuse_in_capture`, which raises GraphError naming it.
"""
import threading
import warnings

from . import backends, device_checks
from .errors import GraphError
from .pinned import PageableMemoryWarning, is_pinned

class _Local(threading.local):
    """Per thread: `stack` the streams entered with `with`, `graph` the Graph captured. Every thread
    starts with both set (threading.local runs __init__ per thread), so reading them at every launch
    and allocation costs an attribute load, not getattr's AttributeError for a thread that never
    entered a stream."""

    def __init__(self):
        self.stack = []
        self.graph = None


_local = _Local()


def capturing():
    """The Graph this thread is capturing (inside `with gpublas.graph()`), or None."""
    return _local.graph


def refuse_in_capture(what, why="the host would wait for captured work, which does not run until a replay"):
    """Raises GraphError naming `what` (and why a graph cannot hold it) when this thread is capturing."""
    if _local.graph is not None:
        raise GraphError(f"{what} cannot be captured in a graph: {why}; do it before or after "
                         "`with gpublas.graph()`")


def current_stream():
    """The innermost stream entered with `with`, or None (the default stream)."""
    stack = _local.stack
    return stack[-1] if stack else None


class Stream:
    """An ordered queue of device work. On the sim backend work runs as it is issued."""

    graph = None  # the Graph recording this stream's work while a capture runs on it

    def __init__(self, _handle=None):
        self.backend = backends.current()
        self.handle = self.backend.stream_create() if _handle is None else _handle

    def synchronize(self):
        refuse_in_capture("Stream.synchronize()")
        self.backend.stream_synchronize(self.handle)
        device_checks.raise_pending()

    def __enter__(self):
        _local.stack.append(self)
        return self

    def __exit__(self, *exc):
        _local.stack.pop()

    def __repr__(self):
        return f"<gpublas.Stream on {self.backend.name}>"


class Event:
    """A marker in a stream; two recorded events give the device time between them."""

    def __init__(self):
        self.backend = backends.current()
        self.handle = self.backend.event_create()

    def record(self, stream=None):
        stream = stream if stream is not None else current_stream()
        self.backend.event_record(self.handle, stream.handle if stream is not None else None)
        return self

    def synchronize(self):
        refuse_in_capture("Event.synchronize()")
        self.backend.event_synchronize(self.handle)
        device_checks.raise_pending()

    def elapsed_ms(self, end):
        """Milliseconds from this event to `end` (both recorded; waits for `end`)."""
        refuse_in_capture("Event.elapsed_ms()")
        end.synchronize()
        return self.backend.event_elapsed_ms(self.handle, end.handle)


def synchronize():
    """Waits for all work on the device."""
    refuse_in_capture("gpublas.synchronize()")
    backends.current().synchronize()
    device_checks.raise_pending()


# -- the stream a copy of a DeviceArray goes on (array.py) ------------------------------------------
def stream_handle(stream, *arrays):
    """The backend handle of `stream` (default: the current one). A capturing stream's graph keeps
    `arrays` alive, as the copy about to be recorded uses their memory."""
    stream = stream if stream is not None else current_stream()
    if stream is None:
        return None
    if stream.graph is not None:
        for a in arrays:
            stream.graph.use(a._mem)
    return stream.handle


def copy_handle(host, stream, what, array):
    """The stream handle for an async copy, or None (blocking) with a warning for pageable memory.
    Inside a capture the copy is recorded on the capturing stream; pageable memory is refused."""
    if capturing() is not None:
        if not is_pinned(host):
            raise GraphError(f"a {what} copy of pageable host memory cannot be captured in a graph: a replay "
                             "copies at the same host address later, which only pinned memory "
                             "(gpublas.pinned_empty) keeps valid and unmoved; copy before or after the capture")
        stream = stream if stream is not None else current_stream()
        if stream is not None and stream.graph is not None:
            stream.graph.use_host(host)
            return stream_handle(stream, array)
    if stream is None:
        return None
    if not is_pinned(host):
        warnings.warn(f"{what} copy on a stream was handed pageable host memory, so it runs "
                      "synchronously; use gpublas.pinned_empty() for asynchronous copies",
                      PageableMemoryWarning, stacklevel=3)
        stream.synchronize()
        return None
    return stream.handle
