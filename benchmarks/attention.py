"""attention: scaled dot-product attention, forward + backward, three ways over the sequence length T:

- fused: nn.ScaledDotProductAttention (nn/cuda/attention.cu, FlashAttention-2's algorithm: one forward
  kernel, a row-sum pre-pass and one backward kernel; O(T) memory);
- unfused: the same maths written with gpublas (batched GEMM, softmax, batched GEMM forward; three batched
  GEMMs, the dS elementwise step and two more GEMMs backward), the T x T scores and probabilities in memory
  (llm.c's path without cuDNN);
- torch: PyTorch's F.scaled_dot_product_attention where it is installed (its flash backend on a GPU; on
  the simulator PyTorch's CPU kernels, a different device: shown for scale, not compared).

BF16 rows (fused on the tensor cores, nn/cuda/attention_half.cu, against torch's SDPA in bfloat16) come after the
float32 ones; their inputs are rounded to bfloat16 and their check is against the float32 fused path on the same
rounded inputs (itself checked against the unfused path in the float32 rows), within 2^-5 of the reference's largest magnitude (the kernels round P, dS and the outputs to
bfloat16 once each: tests/test_nn_attention_half.py states the bounds). The simulator runs them at T = 128 only
(its tensor cores are a warp-collective emulation, ~100x slower than its float32 path).

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
    peer = _torch_peer()
    rng = np.random.default_rng(0)
    configs = [(np.dtype(np.float32), T, D, causal) for D in Ds for causal in (False, True) for T in Ts]
    configs += [(np.dtype(gpublas.bfloat16), T, D, causal) for D in Ds for causal in (False, True) for T in Ts
                if not ctx.simulated or T <= 128]
    for dtype, T, D, causal in progress(configs, ctx, "attention"):
        half = dtype != np.float32
        host = [rng.standard_normal((B, H, T, D)).astype(dtype).astype(np.float32) for _ in range(4)]
        q32, k32, v32, dy32 = (gpublas.to_device(a) for a in host)
        q, k, v, dy = (a.astype(dtype) for a in (q32, k32, v32, dy32)) if half else (q32, k32, v32, dy32)
        flat = [a.reshape(B * H, T, D) for a in (q32, k32, v32, dy32)]
        scale = 1.0 / np.sqrt(D)
        flops = 3.5 * 4 * B * H * T * T * D * (0.5 if causal else 1.0)
        mask = gpublas.to_device(np.triu(np.full((T, T), -np.inf, np.float32), 1)) if causal else None
        attn = nn.ScaledDotProductAttention(is_causal=causal)

        def fused(q=q, k=k, v=v, dy=dy):
            y = attn(q, k, v)
            return (y, *attn.backward(dy))

        def unfused():
            return _unfused(*flat, scale, mask)

        # BF16's reference: the float32 fused path (checked against the unfused one in the float32 rows)
        mem_u, ref = (None, fused(*flat)) if half else _peak(unfused)
        mem_f, got = _peak(fused)
        names = ("y", "dq", "dk", "dv")
        checks = [(g.get().astype(np.float32).reshape(B * H, T, D), r.get().reshape(B * H, T, D))
                  for g, r in zip(got, ref)]
        if not all(report.check(f"fused {dtype.name} {n} T={T} D={D} causal={causal}", g, r,
                                rtol=0.0 if half else 2e-3, atol=2**-5 * np.abs(r).max() if half else 2e-4)
                   for n, (g, r) in zip(names, checks)):
            continue
        base = None  # the float32 unfused path's time; BF16 rows have no unfused row of their own
        row = dict(T=T, D=D, causal=causal, dtype=dtype.name)
        paths = [("unfused", unfused, mem_u)] * (not half) + [("fused", fused, mem_f)]
        for path, fn, mem in paths:
            t = measure(fn, ctx, DeviceClock())
            base = base or t.median_ms
            report.add(**row, path=path, tflops=flops / t.median_ms / 1e9, peak_mb=mem / 2**20,
                       x_unfused=base / t.median_ms if not half else float("nan"), **t.as_row())
        if peer is not None:
            torch, dev = peer
            tdt = torch.bfloat16 if half else torch.float32
            tq, tk, tv = (torch.tensor(a, device=dev).to(tdt).requires_grad_() for a in host[:3])
            tdy = torch.tensor(host[3], device=dev).to(tdt)
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
            report.add(**row, path=f"torch ({dev.type})", tflops=flops / t.median_ms / 1e9, peak_mb=peak,
                       x_unfused=base / t.median_ms if not half else float("nan"), **t.as_row())
        del q, k, v, dy, q32, k32, v32, dy32, flat, mask, ref, got
    _summarize(report, B, H)
    return report


def _summarize(report, B, H):
    def by(path, dtype):
        return {(r["T"], r["D"], r["causal"]): r for r in report.rows if r["path"].startswith(path)
                and r["dtype"] == dtype}
    fused, unf = by("fused", "float32"), by("unfused", "float32")
    faster = sorted(key for key in fused if key in unf and fused[key]["ms"] < unf[key]["ms"])
    slower = sorted(key for key in fused if key in unf and fused[key]["ms"] >= unf[key]["ms"])
    bf16, torch_bf16 = by("fused", "bfloat16"), by("torch", "bfloat16")
    report.summary.update(batch=B, heads=H, fused_faster=[list(k) for k in faster],
                          fused_slower=[list(k) for k in slower],  # float32
                          bf16_x_torch={f"T={k[0]} D={k[1]} causal={k[2]}":
                                        round(torch_bf16[k]["ms"] / bf16[k]["ms"], 3)
                                        for k in sorted(bf16) if k in torch_bf16})
    report.columns = [("T", "T", "d"), ("D", "D", "d"), ("causal", "causal", ""), ("dtype", "dtype", "s"),
                      ("path", "path", "s"),
                      ("ms", "fwd+bwd ms", ".3f"), ("spread_pct", "±%", ".1f"), ("tflops", "TFLOP/s", ".4f"),
                      ("peak_mb", "peak MB", ".2f"), ("x_unfused", "x unfused", ".2f")]
    report.table_rows = [dict(r, peak_mb=r["peak_mb"] if r["peak_mb"] is not None else float("nan"))
                         for r in report.rows]
    report.note(f"B={B}, H={H}; peak MB: device memory the forward + backward allocated beyond its inputs (the "
                "unfused path, float32, holds the T x T scores and probabilities); x unfused: against the float32 "
                "unfused row; bf16_x_torch in the JSON: torch's bfloat16 ms / ours (>= 1: ours faster)")
    if report.ctx.simulated:
        report.note("sim: the torch row is PyTorch on the CPU (another device), timed on the host; bfloat16 runs "
                    "on the simulator's warp-collective tensor-core emulation (T = 128 only)")


def draw(plt, report):
    rows = report.rows
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    keys = sorted({(r["path"], r["dtype"], r["D"], r["causal"]) for r in rows}, key=str)
    for i, (path, dtype, D, causal) in enumerate(keys):
        sel = sorted((r for r in rows if (r["path"], r["dtype"], r["D"], r["causal"]) == (path, dtype, D, causal)),
                     key=lambda r: r["T"])
        style = dict(marker="o", ls="-" if path == "fused" else ("--" if path == "unfused" else ":"),
                     color=f"C{i % 10}", label=f"{path} {dtype} D={D}{' causal' if causal else ''}")
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
