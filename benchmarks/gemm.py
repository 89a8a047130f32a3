"""gemm: the GEMM v2 kernels against cuBLAS, in % of cuBLAS, at 4096^3 and at shapes nn makes.

For each shape every variant is checked against a float64 NumPy reference, then timed with events:
gpublas' automatic choice, the FP32 v2 kernel the dispatcher picks (forced with kernel='v2'), split-K
where the shape is one for it, the old regblock kernel (v1), and the opt-in TF32 v2 kernels (mma.sync;
wgmma, on Hopper only); beside them
cuBLAS through CuPy or PyTorch in the same process, in FP32 (TF32 off) and in TF32. '% cuBLAS' compares
each variant with cuBLAS of its own precision: FP32 variants with cuBLAS SGEMM, TF32 with cuBLAS TF32.
The issue's goal on an H100: >= 90 % of cuBLAS SGEMM (FP32) and >= 70 % of cuBLAS TF32 at 4096^3.
On the simulator the sizes are small and there is no cuBLAS: the suite checks every variant and times it.
"""
import math

import numpy as np

import gpublas

from . import peers
from .harness import Report, measure, parse_shape, progress

DESCRIPTION = "GEMM v2 (FP32, TF32, split-K) vs cuBLAS: % of cuBLAS at 4096^3 and nn's shapes"
F32 = np.float32
# (label, kernel=, precision); 'splitk' only where the dispatcher would split
VARIANTS = [("auto", "auto", "fp32"), ("v2 FP32", "v2", "fp32"), ("v2 split-K", "splitk", "fp32"),
            ("v1 regblock", "regblock", "fp32"), ("v2 TF32", "tf32", "tf32"), ("v2 TF32 wgmma", "wgmma", "tf32")]
TOL = {"fp32": (1e-4, 1e-4), "tf32": (5e-3, 5e-3)}  # (rtol, atol per sqrt(K)); TF32 keeps 10 mantissa bits


def shapes(ctx):
    """(M, N, K) to run: 4096^3 first, then nn-like ones (a Dense layer's forward and weight gradient, an
    im2col convolution, a square 1024^3 that fills only half an H100 with 128x128 tiles)."""
    if ctx.sizes:
        return [parse_shape(s) for s in ctx.sizes]
    return ctx.pick(gpu=[(4096, 4096, 4096), (1024, 1024, 1024), (8192, 1024, 1024), (512, 1024, 8192),
                         (256, 512, 784), (128, 128, 65536), (6272, 64, 576)],
                    sim=[(128, 128, 128), (96, 80, 72), (32, 64, 1024)],
                    quick=[(64, 64, 64), (32, 64, 512)])


def _tf32_missing(kernel):
    """'' when the backend can run TF32 `kernel`, else why not ('wgmma': Hopper, 9.0, only)."""
    b = gpublas._current_backend()
    if b.name == "sim" or (b.cc == 90 if kernel == "wgmma" else b.cc >= 80):
        return ""
    return "wgmma needs compute capability 9.0" if kernel == "wgmma" else "TF32 needs compute capability 8.0 or newer"


def run(ctx):
    report = Report("gemm", ctx)
    peer = peers.detect()
    rng = np.random.default_rng(0)
    sms = 132 if ctx.simulated else gpublas.gemm_plan.multiprocessors()
    for m, n, k in progress(shapes(ctx), ctx, "gemm"):
        a, b = rng.uniform(-1, 1, (m, k)).astype(F32), rng.uniform(-1, 1, (k, n)).astype(F32)
        ref = a.astype(np.float64) @ b
        da, db, dc = gpublas.to_device(a), gpublas.to_device(b), gpublas.empty((m, n), F32)
        label = f"{m}x{n}x{k}"
        flops = 2.0 * m * n * k
        cublas = _peer_times(report, ctx, peer, a, b, ref, label, k) if peer is not None else {}
        for name, kernel, prec in VARIANTS:
            if kernel not in gpublas.blas3.KERNELS + ("auto",):
                report.skip(f"{name} {label}", f"kernel '{kernel}' not built yet")
                continue
            if kernel == "splitk" and gpublas.gemm_plan.choose_kernel(m, n, k, sms=sms) != "splitk":
                continue  # only where the dispatcher would split on this device (the sim: as on an H100)
            if prec == "tf32" and _tf32_missing(kernel):
                report.skip(f"{name} {label}", _tf32_missing(kernel))
                continue
            run_it = (lambda kern=kernel: gpublas.gemm(da, db, dc, kernel=kern))
            rtol, atol = TOL[prec]
            if not report.check(f"{name} {label}", run_it(), ref, rtol=rtol, atol=atol * math.sqrt(k)):
                continue
            t = measure(run_it, ctx)
            row = report.add(shape=label, variant=name, precision=prec, flops=flops,
                             tflops=flops / t.median_ms / 1e9, **t.as_row())
            if prec in cublas:
                row.update(cublas_ms=cublas[prec], pct_cublas=100.0 * cublas[prec] / t.median_ms)
    report.summary["pct_cublas"] = {f"{r['shape']} {r['variant']}": r["pct_cublas"] for r in report.rows
                                    if "pct_cublas" in r}
    report.columns = [("shape", "M x N x K", "s"), ("variant", "variant", "s"), ("ms", "ms", ".3f"),
                      ("spread_pct", "±%", ".1f"), ("tflops", "TFLOP/s", ".2f"), ("cublas_ms", "cuBLAS ms", ".3f"),
                      ("pct_cublas", "% cuBLAS", ".1f")]
    if peer is not None:
        report.note(f"cuBLAS through {peer.name}: FP32 variants against SGEMM (TF32 off), TF32 against TF32")
        report.note("goal on an H100 at 4096^3: v2 FP32 >= 90 % of cuBLAS SGEMM, v2 TF32 >= 70 % of cuBLAS TF32")
    elif ctx.simulated:
        report.note("simulator: small sizes, no cuBLAS; the figures are CPU figures")
    else:
        report.note("no CuPy or PyTorch imports: no cuBLAS comparison")
    return report


def _peer_times(report, ctx, peer, a, b, ref, label, k):
    """{'fp32': ms, 'tf32': ms} of cuBLAS through the peer, each checked first."""
    out = {}
    pa, pb = peer.array(a), peer.array(b)
    pc = peer.array(np.empty((a.shape[0], b.shape[1]), F32))
    for prec in ("fp32", "tf32"):
        if not peer.set_tf32(prec == "tf32"):
            report.skip(f"cuBLAS {prec} {label}", f"{peer.library} cannot switch TF32 here")
            continue
        try:
            fn = (lambda: peer.gemm(pa, pb, out=pc))
            res = fn()
            peer.synchronize()
            rtol, atol = TOL[prec]
            if report.check(f"cuBLAS {prec} {label} ({peer.library})", peer.get(res), ref, rtol=rtol,
                            atol=atol * math.sqrt(k)):
                out[prec] = measure(fn, ctx, peer.clock()).median_ms
        finally:
            peer.set_tf32(False)
    return out


def draw(plt, report):
    rows = [r for r in report.rows if "pct_cublas" in r] or report.rows
    key = "pct_cublas" if any("pct_cublas" in r for r in rows) else "tflops"
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    ax.barh([f"{r['shape']} {r['variant']}" for r in rows], [r.get(key) or 0 for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("% of cuBLAS (same precision)" if key == "pct_cublas" else "TFLOP/s")
    ax.grid(True, axis="x", alpha=0.3)
    return fig
