"""offload: when does sending an operation to the device pay off? For size n, the host does it with
NumPy; the device path copies the inputs in, computes, and copies the result out. Each part is timed
on its own with events (and the whole path end to end), so the table shows where the time goes.

Operations: GEMM of n x n by n x n, and an elementwise x + y on n x n elements (the same data as one
GEMM operand). Inputs come from ordinary pageable NumPy arrays, as a user's would; the device
buffers are allocated once, outside the timing. The crossover is the smallest n from which the
device path is faster for every larger n measured, or 'never' when it never pays off.
"""
import numpy as np

import gpublas

from .harness import Report, measure, measure_host, parse_size, progress

DESCRIPTION = "host vs copy-in + compute + copy-out on the device; crossover sizes"
F32 = np.float32


def sizes(ctx):
    if ctx.sizes:
        return [parse_size(s) for s in ctx.sizes]
    return ctx.pick(gpu=[32, 64, 128, 256, 512, 1024, 2048, 4096], sim=[16, 32, 64, 128, 256],
                    quick=[16, 32, 64, 128])


def _elementwise():
    """(name, device op, host op) for the elementwise case: x + y if the ops are there, else axpy."""
    if hasattr(gpublas.DeviceArray, "__add__"):
        return "x + y", (lambda x, y, out: x + y), (lambda x, y: x + y)
    if hasattr(gpublas, "axpy"):
        return "axpy (y += x)", (lambda x, y, out: gpublas.axpy(1.0, x, y)), (lambda x, y: x + y)
    return None


def one_size(report, ctx, op, n, rng):
    """Checks then times the host path and the three device parts for `op` at size n."""
    a, b = rng.uniform(-1, 1, (n, n)).astype(F32), rng.uniform(-1, 1, (n, n)).astype(F32)
    da, db, dc = gpublas.empty((n, n), F32), gpublas.empty((n, n), F32), gpublas.empty((n, n), F32)
    hc = np.empty((n, n), F32)
    if op == "gemm":
        host = lambda: np.matmul(a, b, out=hc)  # noqa: E731
        work = lambda: gpublas.gemm(da, db, dc)  # noqa: E731
        ref, tol = a.astype(np.float64) @ b, (1e-4, 1e-4 * np.sqrt(n))
        flops = 2.0 * n ** 3
    else:
        name, dev, host_op = _elementwise()
        host = lambda: host_op(a, b)  # noqa: E731
        ref, tol, flops = a.astype(np.float64) + b, (1e-6, 1e-7), float(n * n)
        holder = {}

        def work():
            holder["out"] = dev(da, db, dc)

    def copy_in():
        da.set(a)
        db.set(b)

    def copy_out():
        (holder["out"] if op != "gemm" else dc).get(out=hc)

    def offload():
        copy_in()
        work()
        copy_out()

    offload()
    if not report.check(f"{op} n={n}", hc, ref, rtol=tol[0], atol=tol[1]):
        return None
    parts = {k: measure(fn, ctx).median_ms for k, fn in
             (("in_ms", copy_in), ("compute_ms", work), ("out_ms", copy_out), ("offload_ms", offload))}
    th = measure_host(host, ctx)
    return report.add(op=op if op == "gemm" else _elementwise()[0], kind=op, n=n, flops=flops,
                      host_ms=th.median_ms, **parts, speedup=th.median_ms / parts["offload_ms"],
                      resident_speedup=th.median_ms / parts["compute_ms"])


def crossover(rows, key="offload_ms"):
    """The smallest n from which the device path beats the host for every larger n, else None."""
    rows = sorted(rows, key=lambda r: r["n"])
    best = None
    for r in reversed(rows):
        if r[key] < r["host_ms"]:
            best = r["n"]
        else:
            break
    return best


def run(ctx):
    report = Report("offload", ctx)
    rng = np.random.default_rng(0)
    kinds = []
    if hasattr(gpublas, "gemm"):
        kinds.append("gemm")
    else:
        report.skip("gemm", "gpublas.gemm not available yet")
    if _elementwise():
        kinds.append("elementwise")
    else:
        report.skip("elementwise", "neither DeviceArray.__add__ nor gpublas.axpy is available yet")
    for kind in kinds:
        for n in progress(sizes(ctx), ctx, f"offload {kind}"):
            one_size(report, ctx, kind, n, rng)
        rows = [r for r in report.rows if r["kind"] == kind]
        if not rows:
            continue
        largest = max(r["n"] for r in rows)
        for key, what in (("offload_ms", "crossover"), ("compute_ms", "crossover_resident")):
            n = crossover(rows, key)
            report.summary[f"{kind}_{what}"] = n if n is not None else "never"
        c = report.summary[f"{kind}_crossover"]
        report.note(f"{rows[0]['op']}: offloading pays off from n = {c}" if c != "never"
                    else f"{rows[0]['op']}: offloading never pays off (up to n = {largest})")
        r = report.summary[f"{kind}_crossover_resident"]
        report.note(f"{rows[0]['op']}, data already on the device: faster than the host from n = {r}"
                    if r != "never" else f"{rows[0]['op']}, data already on the device: never faster "
                                         f"(up to n = {largest})")
    report.columns = [("op", "op", "s"), ("n", "n", "d"), ("host_ms", "host ms", ".4f"),
                      ("in_ms", "copy in ms", ".4f"), ("compute_ms", "compute ms", ".4f"),
                      ("out_ms", "copy out ms", ".4f"), ("offload_ms", "device total ms", ".4f"),
                      ("speedup", "x host", ".2f")]
    report.note("GEMM is n x n x n; the elementwise op works on n x n elements; pageable host memory")
    return report


def draw(plt, report):
    kinds = list(dict.fromkeys(r["kind"] for r in report.rows))
    if not kinds:
        return None
    fig, axes = plt.subplots(1, len(kinds), figsize=(6 * len(kinds), 4.5), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        rows = sorted((r for r in report.rows if r["kind"] == kind), key=lambda r: r["n"])
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for key, label in (("in_ms", "copy in"), ("compute_ms", "compute"), ("out_ms", "copy out")):
            v = np.array([r[key] for r in rows])
            ax.bar(x, v, 0.6, bottom=bottom, label=label)
            bottom += v
        ax.plot(x, [r["host_ms"] for r in rows], "k-o", label="host (NumPy)")
        ax.set_xticks(x)
        ax.set_xticklabels([str(r["n"]) for r in rows])
        ax.set_yscale("log")
        ax.set_xlabel("n" + (" (n x n x n)" if kind == "gemm" else " (n x n elements)"))
        ax.set_ylabel("ms")
        c = report.summary.get(f"{kind}_crossover")
        ax.set_title(f"{rows[0]['op']}: crossover n = {c}", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    return fig
