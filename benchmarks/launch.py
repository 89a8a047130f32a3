"""launch: the Python-side cost of one small kernel launch, in microseconds.

A sample issues the launch many times back to back and synchronizes once at the end, timed on the
host clock: for kernels this small the figure is the cost of getting from Python to the driver
(argument packing, the launch call), which is what bounds a Python program made of many small ops.
Variants go from the bare prepared kernel call up to the public API, each eager and replayed: the
same launch captured GRAPH_LAUNCHES times into a gpublas.graph, the sample replaying that graph
(per launch: the replay's time over its launches). On a GPU machine the same launch through CuPy or
PyTorch stands beside it.
"""
import time

import numpy as np

import gpublas

from . import peers
from .harness import HostClock, Report, measure, parse_size

DESCRIPTION = "Python-side cost of one small kernel launch (µs), eager and replayed in a graph"
GRAPH_LAUNCHES = 100  # launches captured into the graph a replayed row replays


def variants():
    """[(name, setup() -> (launch(), check(count) -> (got, expected)))] for what exists."""
    out = []

    def raw():
        a = gpublas.zeros(1, np.float32)
        k = gpublas.get_kernel("memory", "fill_real", np.float32)
        return (lambda: k(1, 32, a, 3.0, 1)), (lambda count: (a.get(), np.full(1, 3.0)))

    def fill():
        a = gpublas.zeros(1, np.float32)
        return (lambda: a.fill(2.0)), (lambda count: (a.get(), np.full(1, 2.0)))

    out += [("prepared kernel call (fill_real)", raw), ("DeviceArray.fill, 1 element", fill)]
    if hasattr(gpublas, "axpy"):
        def axpy():
            x, y = gpublas.full(1, 1.0, np.float32), gpublas.zeros(1, np.float32)
            return (lambda: gpublas.axpy(1.0, x, y)), (lambda count: (y.get(), np.full(1, float(count))))
        out.append(("gpublas.axpy, 1 element", axpy))
    def iadd():
        x, y = gpublas.full(1, 1.0, np.float32), gpublas.zeros(1, np.float32)

        def go():
            y.__iadd__(x)
        return go, (lambda count: (y.get(), np.full(1, float(count))))
    out.append(("y += x, 1 element (in place)", iadd))
    if hasattr(gpublas.DeviceArray, "__add__"):
        def add():
            x, y = gpublas.full(1, 1.0, np.float32), gpublas.full(1, 2.0, np.float32)
            holder = {}

            def go():
                holder["z"] = x + y
            return go, (lambda count: (holder["z"].get(), np.full(1, 3.0)))
        out.append(("x + y, 1 element (allocates z)", add))
    return out


def peer_variants(peer):
    def fill():
        a = peer.array(np.zeros(1, np.float32))
        return (lambda: peer.fill(a, 2.0)), (lambda count: (peer.get(a), np.full(1, 2.0)))

    def add():
        x, y = peer.array(np.ones(1, np.float32)), peer.array(np.full(1, 2.0, np.float32))
        holder = {}

        def go():
            holder["z"] = peer.add(x, y)
        return go, (lambda count: (peer.get(holder["z"]), np.full(1, 3.0)))

    return [(f"{peer.library}: fill, 1 element", fill), (f"{peer.library}: x + y, 1 element", add)]


def replayed(setup):
    """setup() for the same launch captured GRAPH_LAUNCHES times into a graph: one call replays them."""
    def make():
        launch, check = setup()
        launch()  # compiled before the capture (a graph cannot compile)
        with gpublas.graph() as g:
            for _ in range(GRAPH_LAUNCHES):
                launch()
        return g.replay, (lambda count: check(count + 1))
    return make


def run(ctx):
    report = Report("launch", ctx)
    count = parse_size(ctx.sizes[0]) if ctx.sizes else ctx.pick(gpu=10000, sim=2000, quick=500)
    count = max(GRAPH_LAUNCHES, count // GRAPH_LAUNCHES * GRAPH_LAUNCHES)
    peer = peers.detect()
    todo = [(n, s, gpublas.synchronize, 1) for n, s in variants()]
    todo += [(f"{n}: replayed", replayed(s), gpublas.synchronize, GRAPH_LAUNCHES) for n, s in variants()]
    if peer is not None:
        todo += [(n, s, peer.synchronize, 1) for n, s in peer_variants(peer)]
    eager = {}
    for name, setup, sync, per_call in todo:
        launch, check = setup()

        def many():
            for _ in range(count // per_call):
                launch()

        many()  # one batch to check: `count` launches, each with its effect
        sync()
        got, expected = check(count)
        if not report.check(name, got, expected, rtol=0, atol=0):
            continue
        t = measure(many, ctx, HostClock(sync), inner=1)
        cpu = measure(many, ctx, HostClock(sync, time.process_time), inner=1)
        us = t.median_ms * 1e3 / count
        eager.setdefault(name, us)
        base = eager.get(name.removesuffix(": replayed"))
        report.add(variant=name, launches=count, us_per_launch=us, launches_per_s=count / (t.median_ms * 1e-3),
                   cpu_us_per_launch=cpu.median_ms * 1e3 / count,
                   eager_over_this=base / us if per_call > 1 and base else None, **t.as_row())
    base = report.rows[0]["us_per_launch"] if report.rows else None
    for r in report.rows:
        r["vs_raw"] = r["us_per_launch"] / base
    report.columns = [("variant", "variant", "s"), ("launches", "launches", "d"),
                      ("us_per_launch", "µs/launch", ".2f"), ("spread_pct", "±%", ".1f"),
                      ("cpu_us_per_launch", "CPU µs/launch", ".2f"),
                      ("launches_per_s", "launches/s", ".0f"), ("vs_raw", "x prepared call", ".2f"),
                      ("eager_over_this", "eager / replayed", ".1f")]
    report.note("host clock around `launches` back-to-back launches, one synchronize at the end; CPU µs: the "
                "process's CPU time around the same (what a busy machine's other jobs do not inflate)")
    report.note(f"replayed: the launch captured {GRAPH_LAUNCHES} times into one gpublas.graph, replayed "
                f"launches / {GRAPH_LAUNCHES} times")
    if ctx.simulated:
        report.note("on the simulator a launch also runs the kernel on the host, so this is launch + run")
    if not gpublas.backend() == "cuda" or peer is None:
        report.skip("CuPy/PyTorch launch", "needs a GPU machine with CuPy or PyTorch")
    return report


def draw(plt, report):
    rows = report.rows
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(rows) + 1.5))
    ax.barh([r["variant"] for r in rows], [r["us_per_launch"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("µs per launch (host side, Python)")
    ax.grid(True, axis="x", alpha=0.3)
    return fig
