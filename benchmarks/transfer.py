"""transfer: host-to-device, device-to-host and device-to-device bandwidth over a sweep of sizes,
from pageable (np.empty) and pinned (gpublas.pinned_empty) host memory, in the spirit of NVIDIA's
bandwidthTest.

Pageable copies are blocking copies on the default stream; pinned copies are asynchronous copies on
a gpublas.Stream, timed with events on that stream. GB/s are 1e9 bytes per second. D2D counts the
bytes read plus the bytes written (2 x size), as bandwidthTest does, so that it is comparable with
the device's memory bandwidth; H2D and D2H count the size once. The 16-bit rows: a pinned H2D of
a bfloat16 array (DeviceArray.set of a typed array: the same bytes), and astype between float32 and
bfloat16 on the device (memory.cu's cast kernel, rounding to nearest even), counting the bytes read
plus written (3 x the bfloat16 size).
"""
import numpy as np

import gpublas

from .harness import DeviceClock, Report, fmt_bytes, measure, parse_size, progress

DESCRIPTION = "H2D / D2H / D2D bandwidth, pageable vs pinned host memory"
MODES = (("H2D", "pageable"), ("H2D", "pinned"), ("D2H", "pageable"), ("D2H", "pinned"), ("D2D", "device"),
         ("H2D", "pinned bf16"), ("CAST", "f32->bf16"), ("CAST", "bf16->f32"))


def sizes(ctx):
    if ctx.sizes:
        return [parse_size(s) for s in ctx.sizes]
    top = ctx.pick(gpu=2**30, sim=16 * 2**20, quick=16 * 2**20)
    step = 16 if ctx.quick else 4
    out, n = [], 4096
    while n <= top:
        out.append(n)
        n *= step
    return out


def _pattern(n):
    """n bytes that no copy of the wrong region or a zero page would reproduce: a hash of the index
    over a prime period (cheap to make even for 1 GiB)."""
    period = np.arange(min(n, 1000003), dtype=np.uint32) * np.uint32(2654435761) >> np.uint32(24)
    return np.resize(period.astype(np.uint8), n)


def measure_size(report, ctx, n, stream):
    """The five copies of n bytes: checked once, then timed. Returns {mode: GB/s}."""
    host = _pattern(n)
    pinned = gpublas.pinned_empty(n, np.uint8)
    pinned[...] = host
    pinned_out = gpublas.pinned_empty(n, np.uint8)
    page_out = np.empty(n, np.uint8)
    src, dst = gpublas.empty(n, np.uint8), gpublas.empty(n, np.uint8)
    backend = src.backend

    def h2d_pageable():
        src.set(host)

    def h2d_pinned():
        src.set(pinned, stream=stream)

    def d2h_pageable():
        src.get(out=page_out)

    def d2h_pinned():
        src.get(stream=stream, out=pinned_out)

    def d2d():
        backend.dtod(dst.ptr, src.ptr, n, None)

    calls = {("H2D", "pageable"): (h2d_pageable, None), ("H2D", "pinned"): (h2d_pinned, stream),
             ("D2H", "pageable"): (d2h_pageable, None), ("D2H", "pinned"): (d2h_pinned, stream),
             ("D2D", "device"): (d2d, None)}
    rates = {}
    for mode in MODES[:5]:
        fn, s = calls[mode]
        src.set(host)  # every check starts from the known pattern on the device
        fn()
        if s is not None:
            s.synchronize()
        got = {"H2D": lambda: src.get(), "D2H": lambda: page_out if mode[1] == "pageable" else pinned_out,
               "D2D": lambda: dst.get()}[mode[0]]()
        if not report.check_equal(f"{mode[0]} {mode[1]} {fmt_bytes(n)}", got, host):
            continue
        t = measure(fn, ctx, DeviceClock(s))
        moved = 2 * n if mode[0] == "D2D" else n
        gbps = moved / (t.median_ms * 1e-3) / 1e9
        rates[mode] = gbps
        report.add(direction=mode[0], memory=mode[1], size_bytes=n, bytes_counted=moved,
                   gbps=gbps, **t.as_row())
    for a in (src, dst):
        a.free()
    rates.update(measure_16bit(report, ctx, n, stream))
    return rates


def measure_16bit(report, ctx, n, stream):
    """The 16-bit rows for n bytes of bfloat16: a pinned typed H2D and the two device casts."""
    host16 = _pattern(n - n % 2).view(gpublas.bfloat16)
    host16 = np.where(np.isnan(host16.astype(np.float32)), 0, host16).astype(gpublas.bfloat16)  # no NaN payloads
    pinned16 = gpublas.pinned_empty(host16.shape, gpublas.bfloat16)
    pinned16[...] = host16
    wide = host16.astype(np.float32)
    a16, a32 = gpublas.to_device(host16), gpublas.to_device(wide)
    cases = {("H2D", "pinned bf16"): (lambda: a16.set(pinned16, stream=stream), stream, a16, host16, n),
             ("CAST", "f32->bf16"): (lambda: a32.astype(gpublas.bfloat16), None, None, host16, 3 * n),
             ("CAST", "bf16->f32"): (lambda: a16.astype(np.float32), None, None, wide, 3 * n)}
    rates = {}
    for mode, (fn, s, target, want, moved) in cases.items():
        out = fn()
        if s is not None:
            s.synchronize()
        got = (target if out is None else out).get()
        if not report.check_equal(f"{mode[0]} {mode[1]} {fmt_bytes(n)}", got.view(np.uint8), want.view(np.uint8)):
            continue
        t = measure(fn, ctx, DeviceClock(s))
        rates[mode] = moved / (t.median_ms * 1e-3) / 1e9
        report.add(direction=mode[0], memory=mode[1], size_bytes=n, bytes_counted=moved, gbps=rates[mode],
                   **t.as_row())
    return rates


def run(ctx):
    report = Report("transfer", ctx)
    stream = gpublas.Stream()
    pivot = []
    for n in progress(sizes(ctx), ctx, "transfer"):
        rates = measure_size(report, ctx, n, stream)
        pivot.append({"size": fmt_bytes(n), **{f"{d} {m}": rates.get((d, m)) for d, m in MODES}})
    report.table_rows = pivot
    report.columns = [("size", "size", "s")] + [(f"{d} {m}", f"{d} {m} GB/s", ".2f") for d, m in MODES]
    report.summary["peak_gbps"] = {f"{d} {m}": max((r["gbps"] for r in report.rows
                                                     if (r["direction"], r["memory"]) == (d, m)), default=None)
                                   for d, m in MODES}
    report.note("GB/s = 1e9 bytes/s; D2D counts bytes read + written (2 x size), as bandwidthTest does; CAST "
                "(astype on the device) counts read + written (3 x the bfloat16 size)")
    report.note("pageable: blocking copies from np.empty memory; pinned: async copies on a stream "
                "from gpublas.pinned_empty memory")
    if ctx.simulated:
        report.note("on the simulator every copy is a host memmove, so pageable and pinned are alike")
    return report


def draw(plt, report):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for d, m in MODES:
        pts = sorted((r["size_bytes"], r["gbps"]) for r in report.rows if (r["direction"], r["memory"]) == (d, m))
        if pts:
            x, y = zip(*pts)
            ax.plot(x, y, marker="o", ls="--" if m == "pageable" else "-", label=f"{d} {m}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("bandwidth (GB/s; D2D counts read + write)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
