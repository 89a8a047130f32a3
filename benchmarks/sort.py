"""sort: gpublas.sort, argsort and topk against numpy.sort / argsort (the host) and, on a GPU machine,
CuPy's sort / argsort and torch.sort / torch.topk (whichever import), over n = 2^10 .. 2^24 keys of
float32 and int32 in one row, and a batch of rows.

Each result is checked first (sort against numpy.sort, argsort against a stable numpy.argsort, topk's
values against the sorted row's end), then timed: device work with gpublas events (the host clock on
the simulator), NumPy on the host clock. Columns: keys per second, and on a GPU the effective
bandwidth of one read and one write of the keys (the least a sort moves) as a fraction of the
device-to-device copy's.
"""
import numpy as np

import gpublas

from .harness import HostClock, Report, measure, parse_size

DESCRIPTION = "sort / argsort / topk keys per second against NumPy (and CuPy / torch.sort on a GPU)"
TOPK = 64  # topk's k


def peers():
    """[(library, {op: fn(array) or None}, to_device, sync)] for CuPy and PyTorch on a GPU machine."""
    if gpublas.backend() != "cuda":
        return []
    out = []
    try:
        import cupy as cp
        out.append(("cupy", {"sort": lambda a: cp.sort(a, axis=-1), "argsort": lambda a: cp.argsort(a, axis=-1),
                             "topk": None}, cp.asarray, cp.cuda.Device().synchronize))
    except Exception:  # not installed, or no usable device
        pass
    try:
        import torch
        if torch.cuda.is_available():
            out.append(("torch", {"sort": lambda a: torch.sort(a, stable=True)[0],
                                  "argsort": lambda a: torch.sort(a, stable=True)[1],
                                  "topk": lambda a: torch.topk(a, TOPK)},
                        lambda h: torch.from_numpy(h).cuda(), torch.cuda.synchronize))
    except Exception:
        pass
    return out


def cases(ctx):
    """[(shape, dtype)]: one row of each n, then batches of rows."""
    if ctx.sizes:
        ns = [parse_size(s) for s in ctx.sizes]
    else:
        ns = [2 ** p for p in ctx.pick(gpu=(10, 14, 18, 20, 22, 24), sim=(10, 14, 18, 20), quick=(10, 14))]
    batches = ctx.pick(gpu=[(1024, 1024), (64, 50257)], sim=[(256, 1024), (16, 50257)], quick=[(32, 1000)])
    return [((n,), d) for d in (np.float32, np.int32) for n in ns] + [(s, np.float32) for s in batches]


def host_keys(shape, dtype, rng):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-2**31, 2**31 - 1, shape, dtype=np.int64).astype(dtype)


def _check(report, name, op, got, x):
    if op == "sort":
        return report.check_equal(name, got, np.sort(x, axis=-1))
    if op == "argsort":
        return report.check_equal(name, got, np.argsort(x, axis=-1, kind="stable"))
    return report.check_equal(name, got[0], -np.sort(-x, axis=-1)[..., :TOPK])


def run(ctx):
    report = Report("sort", ctx)
    rng = np.random.default_rng(0)
    ours = {"sort": gpublas.sort, "argsort": lambda a: gpublas.argsort(a, kind="stable"),
            "topk": lambda a: gpublas.topk(a, TOPK)}
    theirs = {"sort": lambda a: np.sort(a, axis=-1), "argsort": lambda a: np.argsort(a, axis=-1, kind="stable")}
    others = peers()
    copy_gbs = None
    if not ctx.simulated:  # the device-to-device copy's bandwidth, read + write, for the fraction column
        big = gpublas.empty(1 << 26, np.float32)
        out = gpublas.empty(1 << 26, np.float32)
        copy_gbs = 2 * big.nbytes / measure(lambda: out.copy_from(big), ctx).median_ms / 1e6
    for shape, dtype in cases(ctx):
        x = host_keys(shape, dtype, rng)
        d = gpublas.to_device(x)
        for op in ("sort", "argsort", "topk"):
            name = f"{op} {np.dtype(dtype).name} {'x'.join(map(str, shape))}"
            if op == "topk" and shape[-1] <= TOPK:
                continue
            if not _check(report, name, op, _get(ours[op](d)), x):
                continue
            t = measure(lambda: ours[op](d), ctx)
            row = report.add(op=op, dtype=np.dtype(dtype).name, shape="x".join(map(str, shape)), ms=t.median_ms,
                             spread_pct=t.spread_pct, mkeys_s=x.size / t.median_ms / 1e3)
            if copy_gbs:
                row["bw_fraction"] = 2 * x.nbytes / t.median_ms / 1e6 / copy_gbs
            if op in theirs:
                nt = measure(lambda: theirs[op](x), ctx, HostClock())
                row.update(numpy_ms=nt.median_ms, numpy_over_gpublas=nt.median_ms / t.median_ms)
            for lib, fns, to_dev, sync in others:
                if fns.get(op) is None:
                    continue
                a = to_dev(x)
                pt = measure(lambda: fns[op](a), ctx, HostClock(sync))
                row[f"{lib}_ms"] = pt.median_ms
                row[f"{lib}_over_gpublas"] = pt.median_ms / t.median_ms
    report.columns = [("op", "op", "s"), ("dtype", "dtype", "s"), ("shape", "keys", "s"), ("ms", "ms", ".3f"),
                      ("spread_pct", "±%", ".1f"), ("mkeys_s", "Mkeys/s", ".1f"), ("numpy_ms", "NumPy ms", ".3f"),
                      ("numpy_over_gpublas", "NumPy / gpublas", ".2f")]
    if copy_gbs:
        report.columns.append(("bw_fraction", "of copy bw", ".2f"))
    for lib, *_ in others:
        report.columns += [(f"{lib}_ms", f"{lib} ms", ".3f"), (f"{lib}_over_gpublas", f"{lib} / gpublas", ".2f")]
    if not others:
        report.skip("CuPy / torch.sort", "needs a GPU machine with CuPy or PyTorch")
    report.note(f"topk: k = {TOPK}, largest first; NumPy / gpublas and <peer> / gpublas above 1 mean gpublas is "
                "faster; NumPy is timed on the host clock, single-threaded")
    return report


def _get(r):
    return tuple(v.get() for v in r) if isinstance(r, tuple) else r.get()


def draw(plt, report):
    fig, ax = plt.subplots(figsize=(7, 4))
    for op in ("sort", "argsort", "topk"):
        rows = [r for r in report.rows if r["op"] == op and r["dtype"] == "float32" and "x" not in r["shape"]]
        if rows:
            ax.plot([int(r["shape"]) for r in rows], [r["mkeys_s"] for r in rows], marker="o", label=f"gpublas {op}")
    rows = [r for r in report.rows if r["op"] == "sort" and r["dtype"] == "float32" and "x" not in r["shape"]
            and r.get("numpy_ms")]
    if rows:
        ax.plot([int(r["shape"]) for r in rows], [int(r["shape"]) / r["numpy_ms"] / 1e3 for r in rows],
                linestyle="--", label="numpy.sort")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("keys (float32, one row)")
    ax.set_ylabel("million keys per second")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig
