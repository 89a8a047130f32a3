"""overlap: a chunked pipeline (copy in, compute, copy out) over 1, 2, 4 and 8 streams with pinned
host memory, against the sequential version (one copy in, one kernel, one copy out, default stream).

With several streams, chunk i's copy in can run while chunk i-1 computes and chunk i-2 copies out,
so the best case hides all but the longest of the three stages. The compute stage is a benchmark
kernel whose per-element work is calibrated so that it takes about as long as the copy in, which
is where overlap helps most. The timing events sit on the legacy default stream, which waits for
the (blocking) streams' work, so they bracket the whole pipeline.
"""
import numpy as np

import gpublas
from gpublas.runtime.launch import BLOCK, grid_1d

from .harness import DeviceClock, Report, fmt_bytes, measure, parse_size

DESCRIPTION = "chunked copy/compute/copy pipeline over 1-8 streams vs sequential"
STREAMS = (1, 2, 4, 8)
CHUNKS = 16

# overlap_work: grid-stride loop, one element per thread per step. `iters` rounds of
# v = 0.9 v + 0.1 x starting from v = x: one FMA per round (0.1 x is hoisted), and v stays x up to
# rounding, so the result checks against x itself while the cost grows with `iters`.
SOURCE = r"""
extern "C" __global__ void overlap_work(const float* __restrict__ x, float* __restrict__ y, int iters,
                                        long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float xi = x[i], v = xi;
        for (int k = 0; k < iters; ++k)
            v = 0.9f * v + 0.1f * xi;
        y[i] = v;
    }
}
"""


def _work_kernel():
    return gpublas.load_source(SOURCE, source_name="benchmarks/overlap.py").get("overlap_work")


def _launch(kernel, x, y, iters, stream=None):
    n = x.size
    kernel(grid_1d(n), BLOCK, x, y, iters, n, stream=stream)


def run(ctx):
    report = Report("overlap", ctx)
    n = parse_size(ctx.sizes[0]) if ctx.sizes else ctx.pick(gpu=64 * 2**20, sim=4 * 2**20, quick=2**20)
    n -= n % CHUNKS
    kernel = _work_kernel()
    h_in = gpublas.pinned_empty(n, np.float32)
    h_in[...] = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    h_out = gpublas.pinned_empty(n, np.float32)
    dx, dy = gpublas.empty(n, np.float32), gpublas.empty(n, np.float32)

    # calibrate: iters such that one kernel over all n takes about as long as copying n floats in
    # (rescaled a few times: the kernel is memory-bound at first, so its time is not linear in iters)
    t_copy = measure(lambda: dx.set(h_in), ctx).median_ms
    iters, cap = 16, (64 if ctx.simulated else 1 << 16)  # the simulator's kernels are slow: keep it short
    for _ in range(4):
        t_kernel = measure(lambda: _launch(kernel, dx, dy, iters), ctx).median_ms
        ratio = t_copy / max(t_kernel, 1e-6)
        new = int(np.clip(round(iters * ratio), 1, cap))
        if 0.75 < ratio < 1.33 or new == iters:
            break
        iters = new
    report.summary.update(elements=n, bytes_each_way=4 * n, chunks=CHUNKS, iters=iters)

    def sequential():
        dx.set(h_in)
        _launch(kernel, dx, dy, iters)
        dy.get(out=h_out)

    m = n // CHUNKS
    chunks = [(dx[i * m:(i + 1) * m], dy[i * m:(i + 1) * m], slice(i * m, (i + 1) * m)) for i in range(CHUNKS)]

    def pipelined(streams):
        for i, (cx, cy, sl) in enumerate(chunks):
            s = streams[i % len(streams)]
            cx.set(h_in[sl], stream=s)
            _launch(kernel, cx, cy, iters, stream=s)
            cy.get(stream=s, out=h_out[sl])

    variants = [("sequential", 0, sequential)]
    for k in STREAMS:
        streams = [gpublas.Stream() for _ in range(k)]
        variants.append((f"{k} stream{'s' if k > 1 else ''}", k, lambda streams=streams: pipelined(streams)))
    base = None
    for name, k, fn in variants:
        h_out.fill(np.nan)
        fn()
        gpublas.synchronize()
        if not report.check(f"overlap {name}", h_out, h_in, rtol=1e-5, atol=1e-6):
            continue
        t = measure(fn, ctx, DeviceClock())
        base = base if base is not None else t.median_ms
        report.add(variant=name, streams=k, chunks=CHUNKS if k else 1, speedup=base / t.median_ms,
                   gbps=8 * n / t.median_ms / 1e6, **t.as_row())
    parts = {"copy in": t_copy, "kernel": measure(lambda: _launch(kernel, dx, dy, iters), ctx).median_ms}
    report.summary["stage_ms"] = parts
    report.columns = [("variant", "variant", "s"), ("chunks", "chunks", "d"), ("ms", "ms", ".3f"),
                      ("spread_pct", "±%", ".1f"), ("gbps", "GB/s in+out", ".2f"), ("speedup", "x sequential", ".2f")]
    report.note(f"{fmt_bytes(4 * n)} each way in {CHUNKS} chunks, pinned host memory; kernel does {iters} "
                f"FMAs per element (copy in ~{t_copy:.3f} ms, kernel ~{parts['kernel']:.3f} ms)")
    if ctx.simulated:
        report.note("on the simulator streams run in order (every call finishes before it returns), so "
                    "nothing overlaps: any difference from 1 is the simulator's per-launch cost and host noise")
    return report


def draw(plt, report):
    rows = report.rows
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.bar([r["variant"] for r in rows], [r["speedup"] for r in rows],
           color=["gray"] + ["C0"] * (len(rows) - 1))
    ax.axhline(1.0, color="k", lw=0.8)
    for i, r in enumerate(rows):
        ax.annotate(f"{r['ms']:.2f} ms", (i, r["speedup"]), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("speedup over sequential")
    ax.grid(True, axis="y", alpha=0.3)
    return fig
