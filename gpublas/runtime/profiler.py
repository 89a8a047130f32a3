"""A kernel profiler: launches per kernel name and launch shape, and transfers, with their times.

    with gpublas.profile() as p:
        train_one_epoch()
    print(p.table())                 # sorted by total time, like `nsys stats` or key_averages()
    rows = p.key_averages()          # [Entry]: kind, name, grid, block, count, total_ms, mean_ms, ...
    text = p.to_json()               # Profile.from_json(text) gives the same rows back

GPUBLAS_PROFILE=1 profiles the whole process and prints the table on stderr at exit;
GPUBLAS_PROFILE=FILE.json writes the JSON there instead. `python -m benchmarks profile -- CMD`
runs a command that way and prints where its time went.

Times: on cuda, a pair of events around each launch or copy on its stream (read back in batches,
so a profiled program synchronizes now and then); on sim, where every call completes before it
returns, the host clock around the call. Off, the cost is one list check per launch; transfers
and memsets are counted by wrapping the active backend's copy methods while a profile is open.
"""
import atexit
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field

from . import backends, config
from .stream import capturing

sessions = []  # the open profiles; launch.Kernel checks this list before every launch
TRANSFERS = {"htod": "[memcpy HtoD]", "dtoh": "[memcpy DtoH]", "dtod": "[memcpy DtoD]", "memset_d8": "[memset]"}
_TRANSFER_KINDS = ("htod", "dtoh", "dtod", "memset")  # rows of kind 'kernel', 'compile' or 'graph' are not
_PENDING_LIMIT = 512  # cuda: events read back once this many timed calls are waiting


@dataclass
class Entry:
    """One row: a kernel at one launch shape (kind 'kernel'), or one kind of transfer."""
    kind: str
    name: str
    grid: tuple = ()
    block: tuple = ()
    count: int = 0
    total_ms: float = 0.0
    min_ms: float = float("inf")
    max_ms: float = 0.0
    bytes: int = 0

    @property
    def mean_ms(self):
        return self.total_ms / self.count if self.count else 0.0

    def add(self, ms, nbytes=0):
        self.count += 1
        self.total_ms += ms
        self.min_ms = min(self.min_ms, ms)
        self.max_ms = max(self.max_ms, ms)
        self.bytes += nbytes

    def merge(self, other):
        self.count += other.count
        self.total_ms += other.total_ms
        self.min_ms = min(self.min_ms, other.min_ms)
        self.max_ms = max(self.max_ms, other.max_ms)
        self.bytes += other.bytes

    def shape(self):
        return f"{_dims(self.grid)} x {_dims(self.block)}" if self.kind == "kernel" and self.grid else ""


def _dims(d):
    while len(d) > 1 and d[-1] == 1:
        d = d[:-1]
    return "(" + ",".join(map(str, d)) + ")"


@dataclass
class Profile:
    """What one `with gpublas.profile()` saw. `entries` maps (kind, name, grid, block) to an Entry."""
    backend: str = ""
    wall_s: float = 0.0
    entries: dict = field(default_factory=dict)

    def __post_init__(self):
        self._t0 = None

    def _entry(self, kind, name, grid=(), block=()):
        key = (kind, name, grid, block)
        e = self.entries.get(key)
        if e is None:
            e = self.entries[key] = Entry(kind, name, grid, block)
        return e

    # -- results ------------------------------------------------------------------------------------
    def key_averages(self, group_by_shape=True):
        """[Entry] sorted by total time, largest first; group_by_shape=False merges a kernel's shapes."""
        _resolve()
        if group_by_shape:
            rows = [Entry(**asdict(e)) for e in self.entries.values() if e.count]
        else:
            merged = {}
            for e in filter(lambda e: e.count, self.entries.values()):  # a launch that raised has none
                m = merged.get((e.kind, e.name))
                if m is None:
                    merged[(e.kind, e.name)] = Entry(**{**asdict(e), "grid": (), "block": ()})
                else:
                    m.merge(e)
            rows = list(merged.values())
        return sorted(rows, key=lambda e: (-e.total_ms, e.name))

    def totals(self):
        """{'kernel_ms', 'transfer_ms', 'compile_ms', 'launches', 'transfers', 'transfer_bytes', 'wall_s'}."""
        rows = self.key_averages()
        k = [e for e in rows if e.kind == "kernel"]
        t = [e for e in rows if e.kind in _TRANSFER_KINDS]
        return {"kernel_ms": sum(e.total_ms for e in k), "transfer_ms": sum(e.total_ms for e in t),
                "compile_ms": sum(e.total_ms for e in rows if e.kind == "compile"),
                "launches": sum(e.count for e in k), "transfers": sum(e.count for e in t),
                "transfer_bytes": sum(e.bytes for e in t),
                "wall_s": self.wall_s + (time.perf_counter() - self._t0 if self in sessions else 0.0)}

    def table(self, top=None, group_by_shape=True):
        """The rows as a text table sorted by total time, with each row's share of the profiled time."""
        return format_table(self.key_averages(group_by_shape), self.totals(), self.backend, top)

    def to_json(self):
        rows = [{**asdict(e), "mean_ms": e.mean_ms} for e in self.key_averages()]
        totals = self.totals()
        return json.dumps({"backend": self.backend, "wall_s": totals["wall_s"], "totals": totals, "rows": rows},
                          indent=1)

    @classmethod
    def from_json(cls, text):
        doc = json.loads(text)
        p = cls(doc["backend"], doc["wall_s"])
        for r in doc["rows"]:
            r.pop("mean_ms", None)
            e = Entry(**{**r, "grid": tuple(r["grid"]), "block": tuple(r["block"])})
            p.entries[(e.kind, e.name, e.grid, e.block)] = e
        return p

    # -- opening and closing ------------------------------------------------------------------------
    def __enter__(self):
        self._t0 = time.perf_counter()
        sessions.append(self)
        if backends._active is not None:  # else the backend is tracked when it is chosen
            track(backends._active)
        return self

    def __exit__(self, *exc):
        if backends._active is not None:
            self.backend = self.backend or backends._active.name
            backends._active.synchronize()
        self.wall_s += time.perf_counter() - self._t0
        sessions.remove(self)
        if not sessions:
            _untrack_all()
        _resolve()


def profile():
    """A Profile to use as a context manager: `with gpublas.profile() as p: ...; print(p.table())`."""
    return Profile()


def _duration(ms):
    return f"{ms / 1e3:.2f} s" if ms >= 1e3 else f"{ms:.2f} ms"


def format_table(rows, totals, backend="", top=None):
    profiled = totals["kernel_ms"] + totals["transfer_ms"] + totals.get("compile_ms", 0.0)
    share = lambda ms: f"{ms / 10 / totals['wall_s'] if totals['wall_s'] else 0:.0f} %"  # noqa: E731
    lines = [f"gpublas profile ({backend}), {totals['wall_s']:.2f} s wall: {totals['launches']} launches "
             f"{_duration(totals['kernel_ms'])} ({share(totals['kernel_ms'])}), {totals['transfers']} transfers of "
             f"{totals['transfer_bytes'] / 1e6:.2f} MB {_duration(totals['transfer_ms'])} "
             f"({share(totals['transfer_ms'])}), compiling {_duration(totals.get('compile_ms', 0.0))} "
             f"({share(totals.get('compile_ms', 0.0))})"]
    header = ("time %", "total ms", "count", "mean us", "min us", "max us", "MB", "name", "grid x block")
    body = []
    shown = rows if top is None else rows[:top]
    for e in shown:
        body.append((f"{100 * e.total_ms / profiled:.1f}" if profiled else "-", f"{e.total_ms:.3f}", str(e.count),
                     f"{e.mean_ms * 1e3:.1f}", f"{e.min_ms * 1e3:.1f}", f"{e.max_ms * 1e3:.1f}",
                     f"{e.bytes / 1e6:.3f}" if e.kind in _TRANSFER_KINDS else "", e.name, e.shape()))
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i >= 7 else c.rjust(w)  # noqa: E731
                              for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    lines += [fmt(header), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in body]
    if top is not None and len(rows) > top:
        rest = rows[top:]
        lines.append(f"... {len(rest)} more rows, {sum(e.total_ms for e in rest):.3f} ms")
    return "\n".join(lines)


# -- transfers: each backend's copy methods, wrapped while a profile is open -------------------------
_wrapped = []  # backends whose copy methods are shadowed by counting ones


def track(backend):
    """Counts `backend`'s copies while profiles are open (registered with backends.on_chosen below,
    so a backend chosen inside a profile is counted too)."""
    if sessions and all(b is not backend for b in _wrapped):
        for method, name in TRANSFERS.items():  # instance attributes shadow the class's methods
            setattr(backend, method, _counting(backend, getattr(backend, method), name))
        backend.compile = _compile_timed(backend.compile)
        _wrapped.append(backend)


backends.on_chosen(track)


def _untrack_all():
    for backend in _wrapped:
        for method in (*TRANSFERS, "compile"):
            backend.__dict__.pop(method, None)
    _wrapped.clear()


def _counting(backend, copy, name):
    kind = name.strip("[]").split()[-1].lower()  # htod, dtoh, dtod, memset

    def counted(dst, src, nbytes, stream=None):
        if not sessions or capturing() is not None:  # a profile closed on another backend's copy path, or
            return copy(dst, src, nbytes, stream)    # a copy recorded into a graph (counted when replayed)
        _timed(backend, stream, [s._entry(kind, name) for s in sessions], nbytes,
               lambda: copy(dst, src, nbytes, stream))
    return counted


def _compile_timed(compile):
    """Compiles (or loads from the disk cache) on the host clock: kind 'compile', one row per source."""
    def timed(text, defines, source_name, **unit):
        t = time.perf_counter()
        try:
            return compile(text, defines, source_name, **unit)
        finally:
            ms = (time.perf_counter() - t) * 1e3
            for s in sessions:
                s._entry("compile", f"[compile {os.path.basename(source_name)}]").add(ms)
    return timed


def launch(kernel, grid, block, shared, stream, values):
    """Runs one prepared launch, timed in every open profile (called by launch.Kernel)."""
    _timed(backends.current(), stream, [s._entry("kernel", kernel.name, grid, block) for s in sessions], 0,
           lambda: kernel._launch(grid, block, shared, stream, values))


def replay(backend, name, recorded, stream):
    """Runs one graph replay (gpublas.Graph.replay) timed as one row of kind 'graph' (its time is
    not added to the kernel and transfer totals); where the backend times each op (sim), its
    kernels and copies get their rows too, as if launched one by one."""
    entries = [s._entry("graph", name) for s in sessions]
    if backend.name != "sim":
        _timed(backend, stream, entries, 0, lambda: backend.graph_launch(recorded, stream))
        return
    t = time.perf_counter()
    ops = backend.graph_launch(recorded, stream, timed=True)
    ms = (time.perf_counter() - t) * 1e3
    for e in entries:
        e.add(ms)
    for kind, op_name, grid, block, nbytes, op_ms in ops:
        for s in sessions:
            s._entry(kind, op_name, grid, block).add(op_ms, nbytes)


# -- timing: the host clock on sim, events read back in batches on cuda -----------------------------
_pending = []  # (backend, entries, nbytes, start event, end event) not read back yet
_pool = {}     # backend -> event pairs free for reuse


def _timed(backend, stream, entries, nbytes, call):
    if backend.name == "sim":  # synchronous: the host clock around the call is its time
        t = time.perf_counter()
        call()
        ms = (time.perf_counter() - t) * 1e3
        for e in entries:
            e.add(ms, nbytes)
        return
    free = _pool.setdefault(backend, [])
    start, end = free.pop() if free else (backend.event_create(), backend.event_create())
    backend.event_record(start, stream)
    call()
    backend.event_record(end, stream)
    _pending.append((backend, entries, nbytes, start, end))
    if len(_pending) >= _PENDING_LIMIT:
        _resolve()


def _resolve():
    """Reads back the events of the timed calls still waiting (cuda)."""
    for backend, entries, nbytes, start, end in _pending:
        backend.event_synchronize(end)
        ms = backend.event_elapsed_ms(start, end)
        for e in entries:
            e.add(ms, nbytes)
        _pool[backend].append((start, end))
    _pending.clear()


def _from_environment():
    """GPUBLAS_PROFILE=1: profile the process, print the table on stderr at exit; =FILE.json: write JSON."""
    target = os.environ.get("GPUBLAS_PROFILE", "").strip()
    if target in ("", "0"):
        return
    if target.lower() not in ("1", "true", "yes", "stderr"):
        config.writable_file("GPUBLAS_PROFILE")  # a JSON file: its folder must exist now, not at exit
    p = Profile().__enter__()

    def report():
        if p in sessions:
            p.__exit__(None, None, None)
        if target.lower() in ("1", "true", "yes", "stderr"):
            print(p.table(top=40), file=sys.stderr)
        else:
            with open(target, "w") as f:
                f.write(p.to_json())
    atexit.register(report)
