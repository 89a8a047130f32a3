"""roofline: the compute suite's kernels placed on a roofline built from two measured peaks:

    bandwidth  B = the D2D copy rate at a large size (bytes read + written per second)
    compute    P = the best GEMM GFLOP/s measured in this run

A kernel of arithmetic intensity I (FLOPs per byte read + written) can reach at most min(P, I*B).
Kernels left of the ridge I = P/B are memory-bound, right of it compute-bound. The roof is what
gpublas itself reached, not the data sheet's, so '% of roof' says how far a kernel is from the best
this library does on this device.
"""
import numpy as np

import gpublas

from . import compute
from .harness import DeviceClock, Report, fmt_bytes, measure, parse_shape, progress

DESCRIPTION = "kernels on a roofline from the measured D2D bandwidth and GEMM peak"


def kernels(ctx):
    if ctx.sizes:
        gemms = [parse_shape(s) for s in ctx.sizes]
    else:
        gemms = [(n, n, n) for n in ctx.pick(gpu=[1024, 4096], sim=[128, 256], quick=[64, 128])]
        gemms += ctx.pick(gpu=[(256, 4096, 1024)], sim=[(32, 256, 128)], quick=[(32, 256, 64)])
    vec = ctx.pick(gpu=2**26, sim=2**20, quick=2**18)
    gemv = ctx.pick(gpu=(8192, 8192), sim=(512, 512), quick=(256, 256))
    return ([("gemm", s) for s in gemms] + [("gemv", gemv)]
            + [(op, (vec,)) for op in ("axpy", "add", "sum", "dot")])


def copy_bandwidth(report, ctx):
    """GB/s of a device-to-device copy (read + write counted) at the sweep's largest size."""
    n = ctx.pick(gpu=256 * 2**20, sim=16 * 2**20, quick=4 * 2**20)
    host = (np.arange(n // 4, dtype=np.uint32) * 2654435761).view(np.uint8)
    src, dst = gpublas.to_device(host), gpublas.empty(n, np.uint8)
    copy = lambda: src.backend.dtod(dst.ptr, src.ptr, n, None)  # noqa: E731
    copy()
    if not report.check_equal(f"D2D copy {fmt_bytes(n)}", dst.get(), host):
        return None
    t = measure(copy, ctx, DeviceClock())
    src.free()
    dst.free()
    return 2 * n / t.median_ms / 1e6


def run(ctx):
    report = Report("roofline", ctx)
    bw = copy_bandwidth(report, ctx)
    rows = [compute.measure_op(report, ctx, op, shape, host=False)
            for op, shape in progress(kernels(ctx), ctx, "roofline")]
    rows = [r for r in rows if r is not None]
    peak = max((r["gflops"] for r in rows if r["op"] == "gemm"), default=None)
    report.summary.update(peak_bandwidth_gbps=bw, peak_gflops=peak,
                          ridge_flops_per_byte=(peak / bw) if peak and bw else None)
    if not peak or not bw:
        report.note("no roofline: " + ("no GEMM measured (gpublas.gemm missing or failed)" if not peak
                                        else "the D2D bandwidth could not be measured"))
    for r in rows:
        r["bound"] = "-"
        if peak and bw:
            roof = min(peak, r["intensity"] * bw)
            r.update(roof_gflops=roof, pct_of_roof=100.0 * r["gflops"] / roof,
                     bound="memory" if r["intensity"] < peak / bw else "compute")
    report.columns = [("op", "op", "s"), ("shape", "shape", "s"), ("intensity", "FLOP/byte", ".3f"),
                      ("gflops", "GFLOP/s", ".2f"), ("gbps", "GB/s", ".2f"), ("roof_gflops", "roof GFLOP/s", ".2f"),
                      ("pct_of_roof", "% of roof", ".1f"), ("bound", "bound", "s")]
    if bw:
        report.note(f"peak bandwidth {bw:.2f} GB/s (D2D copy, read + write); "
                    + (f"peak compute {peak:.2f} GFLOP/s (best GEMM); ridge at {peak / bw:.3f} FLOP/byte"
                       if peak else "no GEMM peak"))
    report.note("intensity = FLOPs / bytes read + written (compulsory traffic, no cache reuse counted)")
    return report


def draw(plt, report):
    bw, peak = report.summary.get("peak_bandwidth_gbps"), report.summary.get("peak_gflops")
    rows = report.rows
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 5))
    xs = [r["intensity"] for r in rows]
    lo, hi = min(xs + [peak / bw if peak and bw else 1]) / 4, max(xs + [peak / bw if peak and bw else 1]) * 4
    if bw:
        x = np.logspace(np.log10(lo), np.log10(hi), 200)
        y = x * bw if not peak else np.minimum(x * bw, peak)
        ax.plot(x, y, "k-", lw=1.5, label=f"roof: {bw:.1f} GB/s" + (f", {peak:.1f} GFLOP/s" if peak else ""))
    markers = dict(gemm="o", gemv="s", axpy="^", add="v", sum="D", dot="P")
    for op in dict.fromkeys(r["op"] for r in rows):
        sel = [r for r in rows if r["op"] == op]
        ax.scatter([r["intensity"] for r in sel], [r["gflops"] for r in sel], marker=markers.get(op, "o"),
                   s=40, label=op, zorder=3)
        for r in sel:
            ax.annotate(r["shape"].replace(" (square)", ""), (r["intensity"], r["gflops"]), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte read + written)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
