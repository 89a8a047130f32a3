"""The one harness every suite shares: check against NumPy, time with events, print, write, plot.

    ctx = Context(quick=True)
    rep = Report("compute", ctx)
    if rep.check("gemm 64", got, ref, rtol=1e-4, atol=1e-5):      # first mismatches are printed
        t = measure(lambda: gpublas.gemm(a, b, c), ctx)              # median of repeats after warm-up
        rep.add(op="gemm", ms=t.median_ms, spread_pct=t.spread_pct)

Timings are medians over `repeats` samples taken after `warmup` calls; a sample runs the call
`inner` times between two events (inner grows until a sample lasts `min_sample_ms`) and divides.
The spread is the interquartile range over the median, in percent. Device work is timed with
gpublas.Event (the host clock on the sim backend); host work with time.perf_counter.
"""
import datetime
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from importlib import metadata

import numpy as np

import gpublas

from .formatting import fmt, fmt_bytes, parse_shape, parse_size, table  # noqa: F401 (re-exported)

SIM_LABEL = "simulated CPU figures (sim backend: CUDA C run on the host CPU, not a GPU)"


# -- settings -------------------------------------------------------------------------------------
@dataclass
class Context:
    """What a run was asked for, and the timing settings that follow from it."""
    quick: bool = False
    sizes: tuple = ()          # raw --sizes strings; each suite parses them its own way
    repeats: int = 0           # 0: the default for quick/full
    progress: bool = True
    arch: str = "sm_90"        # the sass suite's target architecture
    graph: bool = False        # train: also time captured-and-replayed steps
    precision: str = "fp32"    # train: "bf16" / "fp16" also time steps under nn.autocast of that dtype

    def __post_init__(self):
        self.backend = gpublas.backend()
        self.simulated = self.backend == "sim"
        self.warmup = 1 if self.quick else 3
        self.repeats = self.repeats or (3 if self.quick else 10)
        # a sample shorter than this is repeated `inner` times between the events
        self.min_sample_ms = 0.5 if self.quick or self.simulated else 2.0
        self.max_inner = 50 if self.quick else 1000

    def pick(self, gpu, sim, quick):
        """The sweep for this run: `quick` with --quick, `sim` on the simulator, else `gpu`."""
        return quick if self.quick else (sim if self.simulated else gpu)


# -- clocks ---------------------------------------------------------------------------------------
class DeviceClock:
    """Two gpublas events around the work, on `stream` (None: the default stream)."""

    def __init__(self, stream=None):
        self.stream = stream
        self.begin, self.end = gpublas.Event(), gpublas.Event()

    def start(self):
        self.begin.record(self.stream)

    def stop(self):
        self.end.record(self.stream)
        self.end.synchronize()
        return self.begin.elapsed_ms(self.end)


class HostClock:
    """The host's perf_counter (or `read`, e.g. time.process_time: the process's CPU time, which a busy
    machine's other jobs do not inflate); `sync` (e.g. gpublas.synchronize) runs before it is read."""

    def __init__(self, sync=None, read=time.perf_counter):
        self.sync, self.read = sync, read

    def start(self):
        if self.sync:
            self.sync()
        self.t0 = self.read()

    def stop(self):
        if self.sync:
            self.sync()
        return (self.read() - self.t0) * 1e3


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    spread_pct: float   # interquartile range / median, in percent
    samples: int
    inner: int

    def as_row(self, prefix=""):
        return {f"{prefix}ms": self.median_ms, f"{prefix}min_ms": self.min_ms,
                f"{prefix}max_ms": self.max_ms, f"{prefix}spread_pct": self.spread_pct,
                f"{prefix}samples": self.samples, f"{prefix}inner": self.inner}


def measure(fn, ctx, clock=None, inner=None):
    """Times fn() (see the module docstring); `clock` defaults to a DeviceClock."""
    clock = clock or DeviceClock()
    for _ in range(ctx.warmup):
        fn()

    def sample(k):
        clock.start()
        for _ in range(k):
            fn()
        return clock.stop() / k

    if inner is None:
        first = sample(1)
        inner = max(1, min(ctx.max_inner, math.ceil(ctx.min_sample_ms / max(first, 1e-4))))
    return _timing(sorted(sample(inner) for _ in range(ctx.repeats)), inner)


def _timing(samples, inner):
    """Timing of sorted samples (ms each, `inner` calls a sample)."""
    med = statistics.median(samples)
    q1, q3 = (np.percentile(samples, [25, 75]) if len(samples) > 1 else (med, med))
    return Timing(med, samples[0], samples[-1], 100.0 * (q3 - q1) / med if med > 0 else 0.0,
                  len(samples), inner)


def measure_host(fn, ctx, inner=None):
    return measure(fn, ctx, HostClock(), inner)


def measure_pair(fn, host_fn, ctx, rounds=None):
    """(Timing of fn, Timing of host_fn) from samples taken in turn, fn then host_fn, `rounds` times (at least
    9): on the simulator both run on the same CPU, so a slow moment of the machine falls on both rather than
    on whichever was timed then (the `compute` suite's ratios swung 2-5x run to run timed one after the other)."""
    clocks = DeviceClock(), HostClock()
    for f in (fn, host_fn):
        for _ in range(ctx.warmup):
            f()

    def sample(f, clock, k):
        clock.start()
        for _ in range(k):
            f()
        return clock.stop() / k

    inner = [max(1, min(ctx.max_inner, math.ceil(ctx.min_sample_ms / max(sample(f, c, 1), 1e-4))))
             for f, c in zip((fn, host_fn), clocks)]
    samples = ([], [])
    for _ in range(max(9, rounds or ctx.repeats)):
        for s, f, c, k in zip(samples, (fn, host_fn), clocks, inner):
            s.append(sample(f, c, k))
    return tuple(_timing(sorted(s), k) for s, k in zip(samples, inner))


# -- results --------------------------------------------------------------------------------------
class Report:
    """One suite's run: result rows, correctness checks, notes, and suite-specific summary values."""

    def __init__(self, suite, ctx):
        self.suite, self.ctx = suite, ctx
        self.rows, self.notes, self.checks, self.skipped = [], [], [], []
        self.summary = {}
        self.columns = None   # [(key, header, format)] for the printed table
        self.table_rows = None  # rows to print when they differ from `rows` (e.g. a pivot)

    def add(self, **row):
        self.rows.append(row)
        return row

    def note(self, text):
        self.notes.append(text)

    def skip(self, what, reason):
        """Records that `what` was not run and why (a missing piece, not a failure)."""
        self.skipped.append({"what": what, "reason": reason})
        print(f"  skipped {what}: {reason}")

    def check(self, name, got, ref, rtol=1e-5, atol=1e-6, show=5):
        """Compares `got` with the NumPy reference `ref`: |got - ref| <= atol + rtol*|ref|
        elementwise. Prints the first `show` mismatches and records the outcome."""
        got = np.asarray(got.get() if hasattr(got, "get") and not isinstance(got, np.ndarray) else got)
        ref = np.asarray(ref)
        ok = got.shape == ref.shape or got.size == ref.size
        bad = np.zeros(0, bool)
        if ok:  # compared in float64, or complex128 when either side is complex
            wide = np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(ref) else np.float64
            g = got.reshape(ref.shape).astype(wide)
            r = ref.astype(wide)
            bad = ~(np.abs(g - r) <= atol + rtol * np.abs(r))
            ok = not bad.any()
        self.checks.append({"name": name, "passed": bool(ok)})
        if not ok:
            if got.shape != ref.shape and got.size != ref.size:
                print(f"  CHECK FAILED {name}: shape {got.shape}, reference {ref.shape}")
            else:
                idx = np.argwhere(bad)[:show]
                print(f"  CHECK FAILED {name}: {int(bad.sum())} of {bad.size} elements off "
                      f"(atol {atol:g}, rtol {rtol:g}); first:")
                for i in idx:
                    i = tuple(int(v) for v in i)
                    print(f"    at {i}: got {g[i]!r}, expected {r[i]!r}")
        return ok

    def check_equal(self, name, got, ref, show=5):
        """Exact comparison (for copies), without converting large arrays to float64."""
        ok = got.shape == ref.shape and np.array_equal(got, ref)
        self.checks.append({"name": name, "passed": bool(ok)})
        if not ok:
            if got.shape != ref.shape:
                print(f"  CHECK FAILED {name}: shape {got.shape}, reference {ref.shape}")
            else:
                bad = np.flatnonzero(got.ravel() != ref.ravel())
                print(f"  CHECK FAILED {name}: {bad.size} of {ref.size} elements differ; first:")
                for i in bad[:show]:
                    print(f"    at {int(i)}: got {got.ravel()[i]!r}, expected {ref.ravel()[i]!r}")
        return ok

    @property
    def checks_passed(self):
        return all(c["passed"] for c in self.checks)

    def to_json(self):
        ctx = self.ctx
        return {
            "suite": self.suite,
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "backend": ctx.backend,
            "device": device_info(),
            "simulated": ctx.simulated,
            "label": SIM_LABEL if ctx.simulated else "measured on a GPU",
            "versions": versions(),
            "settings": {"quick": ctx.quick, "sizes": list(ctx.sizes), "warmup": ctx.warmup,
                         "repeats": ctx.repeats, "min_sample_ms": ctx.min_sample_ms},
            "host_load_average": _load(),
            "checks_passed": self.checks_passed,
            "checks": self.checks,
            "skipped": self.skipped,
            "notes": self.notes,
            "summary": self.summary,
            "results": self.rows,
        }


# -- what ran where -------------------------------------------------------------------------------
def device_info():
    info = dict(gpublas.device_info())
    return {k: (int(v) if isinstance(v, np.integer) else v) for k, v in info.items()}


def _version(dist):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _load():
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def versions():
    v = {"gpublas": gpublas.__version__, "python": platform.python_version(), "numpy": np.__version__,
         "platform": platform.platform()}
    for dist in ("pycuda", "matplotlib", "cupy-cuda12x", "cupy-cuda11x", "cupy", "torch"):
        found = _version(dist)
        if found:
            v[dist] = found
    if gpublas.backend() == "sim":
        from gpublas.runtime.backends.sim_build import host_compiler
        v["host_compiler"] = host_compiler()[1]
    else:
        try:
            import pycuda.driver as drv
            d = drv.get_driver_version()  # 12040 means CUDA 12.4
            v["cuda_driver"] = f"{d // 1000}.{d % 1000 // 10}"
        except Exception as e:  # versions are information; a missing one is not an error
            v["cuda_driver"] = f"unknown ({type(e).__name__})"
        try:
            from gpublas.runtime.backends.cuda import nvcc
            v["nvcc"] = nvcc()[1]
        except Exception as e:
            v["nvcc"] = f"unknown ({type(e).__name__})"
    return v


def device_slug():
    """A short file-name-safe device name: 'nvidia-h100-80gb-hbm3', 'sim-amd-epyc'."""
    info = gpublas.device_info()
    name = info["name"]
    if info.get("backend") == "sim":
        name = "sim " + name.split(" on ", 1)[-1]
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "device"


def today():
    return datetime.date.today().strftime("%Y%m%d")


def banner(ctx):
    info = gpublas.device_info()
    lines = [f"gpublas {gpublas.__version__} benchmarks",
             f"backend: {gpublas.backend()}",
             f"device:  {info['name']} (compute capability {info['compute_capability']}, "
             f"{info['multiprocessors']} {'cores' if ctx.simulated else 'SMs'}, "
             f"{info['total_memory'] / 2**30:.1f} GiB)"]
    if ctx.simulated:
        lines.append(f"NOTE: {SIM_LABEL}; they say nothing about GPU speed.")
    if ctx.quick:
        lines.append("quick mode: small sweeps and few repeats")
    load = _load()
    if ctx.simulated and load and load[0] > 0.5 * (os.cpu_count() or 1):
        lines.append(f"WARNING: the host is busy (load average {load[0]:.2f} on {os.cpu_count()} cores); "
                     "simulated timings will be noisy")
    return "\n".join(lines)


def write_json(doc, path):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=_json_default)
        f.write("\n")


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "__dataclass_fields__"):
        return asdict(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


# -- progress and plotting ------------------------------------------------------------------------
def progress(items, ctx, desc):
    """tqdm over `items` on a terminal (stderr), a plain iterator elsewhere."""
    items = list(items)
    if not ctx.progress or not sys.stderr.isatty():
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=desc, leave=False)


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (with a message) when it does not import."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot skipped: matplotlib does not import ({e}); install it with pip install 'gpublas[bench]'")
        return None
    return plt


def save_plot(report, draw, path):
    """Calls draw(plt, report) -> figure, labels it, saves it to `path`. Returns the path or None."""
    plt = pyplot()
    if plt is None:
        return None
    fig = draw(plt, report)
    if fig is None:
        print("plot skipped: nothing measured to plot")
        return None
    info = gpublas.device_info()
    title = f"gpublas {report.suite} - {info['name']}"
    if report.ctx.simulated:
        title += "\n" + SIM_LABEL
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot written to {path}")
    return str(path)
