"""layernorm: nn.LayerNorm forward + backward (nn/cuda/layernorm.cu) over N rows of C features, float32 and
bfloat16, as a bandwidth-bound kernel pair is judged: its effective GB/s against the device-to-device copy's
measured in the same run (on a GPU; the goal for a lent GPU's run, docs/gpu.md: 80 % of it), against NumPy's LayerNorm (nn/reference/
gpt.py, the host, float32) and, on a GPU machine, torch's F.layer_norm forward + backward.

Bytes counted (the least a pass must move, as llm.c counts its kernels'): forward reads x and writes y,
backward reads x and dy and writes dx: 5 N C s bytes, s the element size; plus the FP32 per-row mean and rstd
(written, then read: 16 N) and the weight and bias (read twice, their gradients read and written: 8 C FP32
values). The copy's GB/s counts read + write, as the transfer suite's D2D row. Each row is checked first: y
and dx against the float64 reference of the same (rounded) inputs.
"""
import numpy as np

import gpublas

from .harness import HostClock, Report, measure, parse_size

try:
    import nn
    from nn.reference.gpt import layernorm as ref_forward
    from nn.reference.gpt import layernorm_backward as ref_backward
except ImportError as e:  # benchmarks installed without nn
    nn = None
    NN_MISSING = f"{type(e).__name__}: {e}"

DESCRIPTION = "LayerNorm forward + backward: GB/s against the D2D copy's (and NumPy, torch F.layer_norm)"
BF16 = np.dtype(gpublas.bfloat16)


def cases(ctx):
    """[(N, C)]: GPT-2 small's rows (B T = 16 x 1024, C = 768), a wider model's, and small ones on the simulator."""
    if ctx.sizes:
        return [tuple(parse_size(d) for d in s.split("x")) for s in ctx.sizes]
    return ctx.pick(gpu=[(16384, 768), (16384, 1024), (4096, 4096)], sim=[(512, 64), (2048, 768)], quick=[(64, 96)])


def _torch_peer():
    """torch on the GPU, or None."""
    if gpublas.backend() != "cuda":
        return None
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def _check(report, name, ln, xd, dyd, x, dy, w, b, dtype):
    """y and dx of one pass against the float64 reference of the same inputs (rounded to dtype)."""
    y, dx = ln(xd).astype(np.float32).get(), ln.backward(dyd).astype(np.float32).get()
    want_y, cache = ref_forward(x, w, b)
    want_dx = ref_backward(dy, w, cache)[0]
    tol = 2.0 ** -7 if dtype == BF16 else 1e-4  # bf16: one rounding of y and dx (8 bits)
    ok = report.check(f"{name}: y", y, want_y, rtol=tol, atol=tol * float(np.abs(want_y).max()))
    return ok & report.check(f"{name}: dx", dx, want_dx, rtol=tol, atol=tol * float(np.abs(want_dx).max()))


def run(ctx):
    report = Report("layernorm", ctx)
    if nn is None:
        report.skip("layernorm", f"nn not available ({NN_MISSING})")
        return report
    rng = np.random.default_rng(0)
    torch = _torch_peer()
    copy_gbs = None
    if not ctx.simulated:  # the device-to-device copy's bandwidth, read + write, for the fraction column
        src, dst = gpublas.empty(1 << 26, np.float32), gpublas.empty(1 << 26, np.float32)
        copy_gbs = 2 * src.nbytes / measure(lambda: dst.copy_from(src), ctx).median_ms / 1e6
    for N, C in cases(ctx):
        for dtype in (np.dtype(np.float32), BF16):
            name = f"LayerNorm {dtype.name} ({N}, {C})"
            # inputs and weights rounded to dtype first, so that the reference sees what the kernels see
            x, dy = (rng.standard_normal((N, C)).astype(dtype).astype(np.float64) for _ in range(2))
            w, b = 1 + 0.1 * rng.standard_normal(C), 0.1 * rng.standard_normal(C)
            ln = nn.LayerNorm(C)
            ln.load_state_dict({"weight": w.astype(np.float32), "bias": b.astype(np.float32)})
            w, b = w.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
            xd, dyd = gpublas.to_device(x.astype(dtype)), gpublas.to_device(dy.astype(dtype))
            if not _check(report, name, ln, xd, dyd, x, dy, w, b, dtype):
                continue
            t = measure(lambda: ln.backward(ln(xd)), ctx)  # forward + backward (dy = y: the same bytes)
            moved = 5 * N * C * dtype.itemsize + 16 * N + 8 * C * 4
            row = report.add(dtype=dtype.name, rows=N, C=C, ms=t.median_ms, spread_pct=t.spread_pct,
                             gbps=moved / t.median_ms / 1e6)
            if copy_gbs:
                row["of_copy"] = row["gbps"] / copy_gbs
            if dtype == np.float32:
                hx, hdy = x.astype(np.float32), dy.astype(np.float32)
                h = measure(lambda: ref_backward(hdy, w, ref_forward(hx, w, b)[1]), ctx, HostClock())
                row.update(numpy_ms=h.median_ms, numpy_over_gpublas=h.median_ms / t.median_ms)
            if torch is not None:
                row.update(_torch_row(ctx, torch, x, dy, w, b, dtype, t.median_ms))
    report.columns = [("dtype", "dtype", "s"), ("rows", "rows", "d"), ("C", "C", "d"), ("ms", "fwd+bwd ms", ".4f"),
                      ("spread_pct", "±%", ".1f"), ("gbps", "GB/s", ".1f"), ("of_copy", "of copy bw", ".2f"),
                      ("numpy_over_gpublas", "NumPy / gpublas", ".2f"), ("torch_ms", "torch ms", ".4f"),
                      ("torch_over_gpublas", "torch / gpublas", ".2f")]
    if copy_gbs:
        report.note(f"device-to-device copy in this run: {copy_gbs:.0f} GB/s (read + write)")
    if torch is None:
        report.skip("torch F.layer_norm", "needs a GPU machine with PyTorch")
    report.note("a pass = forward + backward (backward's dy = the forward's y); NumPy: nn/reference/gpt.py's "
                "LayerNorm on the host, float32, single-threaded; x / gpublas above 1 means gpublas is faster")
    return report


def _torch_row(ctx, torch, x, dy, w, b, dtype, ms):
    """torch.nn.functional.layer_norm forward + backward on the GPU, the same inputs and dtype."""
    tdt = torch.bfloat16 if dtype == BF16 else torch.float32
    tx = torch.tensor(x, dtype=tdt, device="cuda", requires_grad=True)
    tdy = torch.tensor(dy, dtype=tdt, device="cuda")
    tw = torch.tensor(w, dtype=tdt, device="cuda", requires_grad=True)
    tb = torch.tensor(b, dtype=tdt, device="cuda", requires_grad=True)

    def step():
        torch.nn.functional.layer_norm(tx, (x.shape[1],), tw, tb).backward(tdy)
    pt = measure(step, ctx, HostClock(torch.cuda.synchronize))
    return {"torch_ms": pt.median_ms, "torch_over_gpublas": pt.median_ms / ms}


def draw(plt, report):
    rows = report.rows
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = [f"{r['dtype']} ({r['rows']}, {r['C']})" for r in rows]
    ax.barh(names, [r["gbps"] for r in rows], label="gpublas fwd + bwd")
    if any(r.get("of_copy") for r in rows):
        copy = rows[0]["gbps"] / rows[0]["of_copy"]
        ax.axvline(copy, color="k", linestyle="--", label=f"D2D copy {copy:.0f} GB/s")
        ax.axvline(0.8 * copy, color="gray", linestyle=":", label="80 % of copy")
    ax.set_xlabel("effective GB/s")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
