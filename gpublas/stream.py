"""Streams and events. `with stream:` makes a stream current for launches and copies that name none."""
import threading

from . import backends

_local = threading.local()


def current_stream():
    """The innermost stream entered with `with`, or None (the default stream)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


class Stream:
    """An ordered queue of device work. On the sim backend work runs as it is issued."""

    def __init__(self):
        self.backend = backends.current()
        self.handle = self.backend.stream_create()

    def synchronize(self):
        self.backend.stream_synchronize(self.handle)

    def __enter__(self):
        _local.stack = getattr(_local, "stack", [])
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
        self.backend.event_synchronize(self.handle)

    def elapsed_ms(self, end):
        """Milliseconds from this event to `end` (both recorded; waits for `end`)."""
        end.synchronize()
        return self.backend.event_elapsed_ms(self.handle, end.handle)


def synchronize():
    """Waits for all work on the device."""
    backends.current().synchronize()
