"""gemm: the GEMM v2 kernels against cuBLAS, in % of cuBLAS, at 4096^3 and at shapes nn makes.

For each shape every variant is checked against a float64 NumPy reference, then timed with events:
gpublas' automatic choice, the FP32 v2 kernel the dispatcher picks (forced with kernel='v2'), split-K
where the shape is one for it, the old regblock kernel (v1), and the opt-in TF32 v2 kernels (mma.sync;
wgmma, on Hopper only); beside them
cuBLAS through CuPy or PyTorch in the same process, in FP32 (TF32 off) and in TF32. '% cuBLAS' compares
each variant with cuBLAS of its own precision: FP32 variants with cuBLAS SGEMM, TF32 with cuBLAS TF32.
The issue's goal on an H100: >= 90 % of cuBLAS SGEMM (FP32) and >= 70 % of cuBLAS TF32 at 4096^3.
BF16 and FP16 rows: the 16-bit tensor-core kernels (kernel='mma': mma.sync m16n8k16; 'wgmma' on Hopper)
and the dispatcher's choice ('auto': wgmma on sm_90a, else mma; gemm.cu's direct / naive on the simulator) with float
accumulation and a 16-bit C (K split into slices where the shape leaves SMs idle, 128x128x65536: gemm_plan's
half_splits), against cuBLAS GemmEx of the same types through the peer (PyTorch:
both; CuPy: FP16 only), goal >= 80 % of cuBLAS BF16 at 4096^3; on the simulator against NumPy's FP32
matmul of the same values on the host (numpy_ms).
On the simulator the sizes are small and there is no cuBLAS: the suite checks every variant and times it.
"""
import math

import numpy as np

import gpublas

from . import peers
from .harness import Report, measure, measure_host, parse_shape, progress

DESCRIPTION = "GEMM v2 (FP32, TF32, split-K) vs cuBLAS: % of cuBLAS at 4096^3 and nn's shapes"
F32 = np.float32
# (label, kernel=, precision); 'splitk' only where the dispatcher would split
VARIANTS = [("auto", "auto", "fp32"), ("v2 FP32", "v2", "fp32"), ("v2 split-K", "splitk", "fp32"),
            ("v1 regblock", "regblock", "fp32"), ("v2 TF32", "tf32", "tf32"), ("v2 TF32 wgmma", "wgmma", "tf32")]
# (label, kernel=) for each 16-bit precision; auto: the dispatcher's choice (the simulator: gemm.cu's direct / naive)
HALF_VARIANTS = [("auto", "auto"), ("mma", "mma"), ("wgmma", "wgmma")]
HALF = {"bf16": gpublas.bfloat16, "fp16": gpublas.float16}
# (rtol, atol per sqrt(K)); TF32 keeps 10 mantissa bits; 16-bit C: one rounding (2^-8 BF16, 2^-11 FP16)
TOL = {"fp32": (1e-4, 1e-4), "tf32": (5e-3, 5e-3), "bf16": (8e-3, 1e-3), "fp16": (1e-3, 1e-3)}


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
    sms = 132 if ctx.simulated else gpublas.blas.gemm_plan.multiprocessors()
    for m, n, k in progress(shapes(ctx), ctx, "gemm"):
        a, b = rng.uniform(-1, 1, (m, k)).astype(F32), rng.uniform(-1, 1, (k, n)).astype(F32)
        ref = a.astype(np.float64) @ b
        da, db, dc = gpublas.to_device(a), gpublas.to_device(b), gpublas.empty((m, n), F32)
        label = f"{m}x{n}x{k}"
        flops = 2.0 * m * n * k
        cublas = _peer_times(report, ctx, peer, a, b, ref, label, k) if peer is not None else {}
        for name, kernel, prec in VARIANTS:
            if kernel not in gpublas.blas.blas3.KERNELS + ("auto",):
                report.skip(f"{name} {label}", f"kernel '{kernel}' not built yet")
                continue
            if kernel == "splitk" and gpublas.blas.gemm_plan.choose_kernel(m, n, k, sms=sms) != "splitk":
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
        for prec in HALF:
            _half_rows(report, ctx, peer, a, b, prec, label, flops)
    report.summary["pct_cublas"] = {f"{r['shape']} {r['variant']}": r["pct_cublas"] for r in report.rows
                                    if "pct_cublas" in r}
    report.columns = [("shape", "M x N x K", "s"), ("variant", "variant", "s"), ("ms", "ms", ".3f"),
                      ("spread_pct", "±%", ".1f"), ("tflops", "TFLOP/s", ".2f"), ("cublas_ms", "cuBLAS ms", ".3f"),
                      ("pct_cublas", "% cuBLAS", ".1f"), ("numpy_ms", "NumPy FP32 ms", ".3f")]
    if peer is not None:
        report.note(f"cuBLAS through {peer.name}: FP32 variants against SGEMM (TF32 off), TF32 against TF32, "
                    "BF16/FP16 against GemmEx of the same types (FP32 accumulation)")
        report.note("goal on an H100 at 4096^3: v2 FP32 >= 90 % of cuBLAS SGEMM, v2 TF32 >= 70 % of cuBLAS TF32, "
                    "BF16 >= 80 % of cuBLAS BF16")
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


def _half_rows(report, ctx, peer, a, b, prec, label, flops):
    """The 16-bit kernels on a, b rounded to `prec`, checked against float64 NumPy of the rounded values, timed,
    beside cuBLAS of the same types (a GPU) or NumPy's FP32 matmul of them (the simulator's host)."""
    dtype = HALF[prec]
    ha, hb = a.astype(dtype), b.astype(dtype)
    ref = ha.astype(np.float64) @ hb.astype(np.float64)
    da, db = gpublas.to_device(ha), gpublas.to_device(hb)
    dc = gpublas.empty(ref.shape, dtype)
    k = a.shape[1]
    rtol, atol = TOL[prec]
    base = {}
    if peer is not None:
        try:
            pa, pb = peer.array(ha), peer.array(hb)
            fn = (lambda: peer.gemm(pa, pb))
            if report.check(f"cuBLAS {prec} {label} ({peer.library})", peer.get(fn()), ref, rtol=rtol,
                            atol=atol * math.sqrt(k)):
                base["cublas_ms"] = measure(fn, ctx, peer.clock()).median_ms
        except (TypeError, ValueError, RuntimeError) as e:  # e.g. CuPy has no bfloat16
            report.skip(f"cuBLAS {prec} {label}", f"{peer.library}: {type(e).__name__}: {e}")
    elif ctx.simulated:
        fa, fb = ha.astype(np.float32), hb.astype(np.float32)
        base["numpy_ms"] = measure_host(lambda: fa @ fb, ctx).median_ms
    for name, kernel in HALF_VARIANTS:
        if kernel == "wgmma" and _tf32_missing("wgmma"):
            report.skip(f"{name} {prec} {label}", _tf32_missing("wgmma"))
            continue
        run_it = (lambda kern=kernel: gpublas.gemm(da, db, dc, kernel=kern))
        if not report.check(f"{name} {prec} {label}", run_it().get().astype(np.float64), ref, rtol=rtol,
                            atol=atol * math.sqrt(k)):
            continue
        t = measure(run_it, ctx)
        row = report.add(shape=label, variant=f"{name} {prec.upper()}", precision=prec, flops=flops,
                         tflops=flops / t.median_ms / 1e9, **t.as_row(), **base)
        if "cublas_ms" in base:
            row.update(pct_cublas=100.0 * base["cublas_ms"] / t.median_ms)


def draw(plt, report):
    rows = [r for r in report.rows if "pct_cublas" in r] or report.rows
    key = "pct_cublas" if any("pct_cublas" in r for r in rows) else "tflops"
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    ax.barh([f"{r['shape']} {r['variant']}" for r in rows], [r.get(key) or 0 for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("% of cuBLAS (same precision)" if key == "pct_cublas" else "TFLOP/s")
    ax.grid(True, axis="x", alpha=0.3)
    return fig
