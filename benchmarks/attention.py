"""attention: scaled dot-product attention, forward + backward, three ways over the sequence length T:

- fused: nn.ScaledDotProductAttention (nn/cuda/attention.cu, FlashAttention-2's algorithm: one forward
  kernel, a row-sum pre-pass and one backward kernel; O(T) memory);
- unfused: the same maths written with gpublas (batched GEMM, softmax, batched GEMM forward; three batched
  GEMMs, the dS elementwise step and two more GEMMs backward), the T x T scores and probabilities in memory
  (llm.c's path without cuDNN);
- torch: PyTorch's F.scaled_dot_product_attention where it is installed (its flash backend on a GPU; on
  the simulator PyTorch's CPU kernels, a different device: shown for scale, not compared).

Each row is checked against the unfused path first, then timed (events around forward + backward), with the
peak device memory the pass allocated (gpublas.memory_stats()['peak_bytes_in_use'] over the inputs) and
TFLOP/s counted as FlashAttention-2 counts them: 4 B H T^2 D forward and 2.5 times that backward, halved
when causal.
"""
import numpy as np

import gpublas
import nn

from .harness import DeviceClock, HostClock, Report, measure, progress

DESCRIPTION = "fused attention (fwd+bwd) vs unfused gpublas (GEMM, softmax, GEMM) and torch SDPA, over T"


def _unfused(q, k, v, dy, scale, mask):
    """(y, dq, dk, dv) through gpublas' batched GEMMs and softmax on (B H, T, D) arrays; mask: None or the
    (T, T) additive causal mask (0 / -inf)."""
    s = gpublas.gemm_batched(q, k, trans_b=True, alpha=scale)      # (BH, T, T) scores
    if mask is not None:
        s += mask
    p = gpublas.softmax(s)                                           # (BH, T, T) probabilities
    y = gpublas.gemm_batched(p, v)
    dv = gpublas.gemm_batched(p, dy, trans_a=True)                   # dV = P^T dY
    dp = gpublas.gemm_batched(dy, v, trans_b=True)                   # dP = dY V^T
    ds = p * (dp - (dy * y).sum(axis=-1, keepdims=True))             # dS = P (dP - rowsum(dY Y))
    dq = gpublas.gemm_batched(ds, k, alpha=scale)
    dk = gpublas.gemm_batched(ds, q, trans_a=True, alpha=scale)
    return y, dq, dk, dv


def _torch_peer():
    """(torch, device) or None."""
    try:
        import torch
    except ImportError:
        return None
    cuda = gpublas.backend() == "cuda" and torch.cuda.is_available()
    return torch, torch.device("cuda" if cuda else "cpu")


def _peak(fn):
    """Bytes the call allocated at its peak beyond what was in use before it."""
    gpublas.synchronize()
    base = gpublas.memory_stats()["bytes_in_use"]
    gpublas.reset_peak_memory_stats()
    out = fn()
    gpublas.synchronize()
    return gpublas.memory_stats()["peak_bytes_in_use"] - base, out


def run(ctx):
    report = Report("attention", ctx)
    Ts = [int(s) for s in ctx.sizes] or ctx.pick(gpu=(128, 256, 512, 1024, 2048, 4096, 8192),
                                                 sim=(128, 256, 512, 1024), quick=(128, 256))
    Ds = ctx.pick(gpu=(64, 128), sim=(64, 128), quick=(64,))
    B, H = ctx.pick(gpu=(4, 16), sim=(1, 2), quick=(1, 2))
    dtype = np.float32
    peer = _torch_peer()
    rng = np.random.default_rng(0)
    configs = [(T, D, causal) for D in Ds for causal in (False, True) for T in Ts]
    for T, D, causal in progress(configs, ctx, "attention"):
        host = [rng.standard_normal((B, H, T, D)).astype(dtype) for _ in range(4)]
        q, k, v, dy = (gpublas.to_device(a) for a in host)
        flat = [a.reshape(B * H, T, D) for a in (q, k, v, dy)]
        scale = 1.0 / np.sqrt(D)
        flops = 3.5 * 4 * B * H * T * T * D * (0.5 if causal else 1.0)
        mask = gpublas.to_device(np.triu(np.full((T, T), -np.inf, dtype), 1)) if causal else None
        attn = nn.ScaledDotProductAttention(is_causal=causal)

        def fused():
            y = attn(q, k, v)
            return (y, *attn.backward(dy))

        def unfused():
            return _unfused(*flat, scale, mask)

        mem_u, ref = _peak(unfused)
        mem_f, got = _peak(fused)
        names = ("y", "dq", "dk", "dv")
        if not all(report.check(f"fused {n} T={T} D={D} causal={causal}", g.get().reshape(B * H, T, D), r.get(),
                                rtol=2e-3, atol=2e-4) for n, g, r in zip(names, got, ref)):
            continue
        base = None
        for path, fn, mem in (("unfused", unfused, mem_u), ("fused", fused, mem_f)):
            t = measure(fn, ctx, DeviceClock())
            base = base or t.median_ms
            report.add(T=T, D=D, causal=causal, path=path, tflops=flops / t.median_ms / 1e9, peak_mb=mem / 2**20,
                       x_unfused=base / t.median_ms, **t.as_row())
        if peer is not None:
            torch, dev = peer
            tq, tk, tv = (torch.tensor(a, device=dev, requires_grad=True) for a in host[:3])
            tdy = torch.tensor(host[3], device=dev)
            sync = torch.cuda.synchronize if dev.type == "cuda" else None

            def torch_step():
                for t_ in (tq, tk, tv):
                    t_.grad = None
                torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal).backward(tdy)

            t = measure(torch_step, ctx, HostClock(sync))
            peak = None
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
                base_b = torch.cuda.memory_allocated()
                torch_step()
                peak = (torch.cuda.max_memory_allocated() - base_b) / 2**20
            report.add(T=T, D=D, causal=causal, path=f"torch ({dev.type})", tflops=flops / t.median_ms / 1e9,
                       peak_mb=peak, x_unfused=base / t.median_ms, **t.as_row())
        del q, k, v, dy, flat, mask, ref, got
    _summarize(report, B, H, dtype)
    return report


def _summarize(report, B, H, dtype):
    fused = {(r["T"], r["D"], r["causal"]): r for r in report.rows if r["path"] == "fused"}
    unf = {(r["T"], r["D"], r["causal"]): r for r in report.rows if r["path"] == "unfused"}
    faster = sorted(key for key in fused if key in unf and fused[key]["ms"] < unf[key]["ms"])
    slower = sorted(key for key in fused if key in unf and fused[key]["ms"] >= unf[key]["ms"])
    report.summary.update(batch=B, heads=H, dtype=np.dtype(dtype).name,
                          fused_faster=[list(k) for k in faster], fused_slower=[list(k) for k in slower])
    report.columns = [("T", "T", "d"), ("D", "D", "d"), ("causal", "causal", ""), ("path", "path", "s"),
                      ("ms", "fwd+bwd ms", ".3f"), ("spread_pct", "±%", ".1f"), ("tflops", "TFLOP/s", ".4f"),
                      ("peak_mb", "peak MB", ".2f"), ("x_unfused", "x unfused", ".2f")]
    report.table_rows = [dict(r, peak_mb=r["peak_mb"] if r["peak_mb"] is not None else float("nan"))
                         for r in report.rows]
    report.note(f"B={B}, H={H}, {np.dtype(dtype).name}; peak MB: device memory the forward + backward allocated "
                "beyond its inputs (the unfused path holds the T x T scores and probabilities)")
    if report.ctx.simulated:
        report.note("sim: the torch row is PyTorch on the CPU (another device), timed on the host")


def draw(plt, report):
    rows = report.rows
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    keys = sorted({(r["path"], r["D"], r["causal"]) for r in rows}, key=str)
    for i, (path, D, causal) in enumerate(keys):
        sel = sorted((r for r in rows if (r["path"], r["D"], r["causal"]) == (path, D, causal)),
                     key=lambda r: r["T"])
        style = dict(marker="o", ls="-" if path == "fused" else ("--" if path == "unfused" else ":"),
                     color=f"C{i % 10}", label=f"{path} D={D}{' causal' if causal else ''}")
        axes[0].plot([r["T"] for r in sel], [r["tflops"] for r in sel], **style)
        mem = [(r["T"], r["peak_mb"]) for r in sel if r["peak_mb"] is not None]
        if mem:
            axes[1].plot(*zip(*mem), **style)
    axes[0].set_ylabel("TFLOP/s (forward + backward)")
    axes[1].set_ylabel("peak device memory, MB")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("T")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    return fig
