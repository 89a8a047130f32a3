"""compute: GEMM, GEMV, elementwise (axpy, x + y) and reduction (sum, dot) throughput, each beside
NumPy on the host CPU in the same run and, on a GPU machine, beside cuBLAS through CuPy or PyTorch;
complex GEMM (cgemm, zgemm) and the complex level-3 routines and batched LU (compute_tri) too.

Every operation is checked against a float64 (complex128) NumPy reference first, then timed. GFLOP/s
count 2*M*N*K for GEMM (8*M*N*K for cgemm / zgemm), 2*M*N for GEMV, 2n for axpy and dot, n for add and
sum. A complex GEMM also times the real GEMM of its shape and precision (float32 for cgemm, float64 for
zgemm): 'x real' is its time over that one's, which the 4M bound keeps at 4 or below (3M: about 3).
GB/s count the bytes the operation must read plus the bytes it writes (GEMM: A, B read and C written
once; axpy: x, y read and y written; sum: x read). 'x NumPy' is NumPy's time over gpublas' (above 1: gpublas is faster);
'x cuBLAS' is the peer's time over gpublas' (1.0: as fast as cuBLAS).
"""
import math

import numpy as np

import gpublas

from . import compute_tri, peers
from .harness import Report, measure, measure_host, measure_pair, parse_shape, progress

DESCRIPTION = "GEMM / GEMV / elementwise / reduction throughput vs NumPy (and cuBLAS on a GPU)"
F32 = np.float32


def cases(ctx):
    """[(op, shape)] for this run: GEMM shapes as (M, N, K), GEMV (M, N), vectors (n,). --sizes sets the
    GEMM shapes, float32 and complex, and the square ones the level-3 routines' n."""
    if ctx.sizes:
        gemms = complex_gemms = [parse_shape(s) for s in ctx.sizes]
    else:
        square = ctx.pick(gpu=[256, 512, 1024, 2048, 4096], sim=[64, 128, 256], quick=[64, 128])
        deep = ctx.pick(gpu=[(256, 4096, 1024), (512, 1024, 4096), (8192, 1024, 1024), (128, 1024, 1024)],
                        sim=[(32, 256, 128), (128, 64, 256)], quick=[(32, 256, 64)])
        gemms = [(n, n, n) for n in square] + list(deep)
        square = ctx.pick(gpu=[256, 1024, 4096], sim=[128, 256], quick=[64])
        complex_gemms = [(n, n, n) for n in square] + ctx.pick(gpu=[(8192, 1024, 1024)], sim=[(32, 256, 128)],
                                                                quick=[])
    gemvs = ctx.pick(gpu=[(4096, 4096), (8192, 1024)], sim=[(256, 256), (512, 128)], quick=[(256, 256)])
    # the simulator's vector rows, quick or not: a small call, in cache, and from memory, in both precisions
    vectors = [2**10, 2**18, 2**22] if ctx.simulated else ctx.pick(gpu=[2**20, 2**24, 2**26], sim=None, quick=[2**18])
    out = [("gemm", s) for s in gemms] + [(p + "gemm", s) for p in "cz" for s in complex_gemms]
    out += [("gemv", s) for s in gemvs]
    for op in ("axpy", "add", "sum", "dot") + (F64_VECTOR_OPS if ctx.simulated else ()):
        out += [(op, (n,)) for n in vectors]
    # with --sizes, the triangular / symmetric rows run at each square size given (no batched LU)
    squares = [m for m, n, k in gemms if m == n == k] if ctx.sizes else None
    return out + compute_tri.cases(ctx, squares)


# -- one operation, three ways ----------------------------------------------------------------------
# Each builder takes (shape, rng) and returns a dict:
#   gpu(): runs gpublas and returns its result; host(): the same with NumPy on the host;
#   ref: the float64 reference of gpu()'s first call; tol: (rtol, atol); flops; bytes;
#   peer(p): a callable running the same operation through peer p;
#   result(): where gpu()'s result lands when it works in place (axpy).
def _gemm(shape, rng, dtype=F32):
    m, n, k = shape
    a, b = compute_tri.uniform(rng, (m, k), dtype), compute_tri.uniform(rng, (k, n), dtype)
    da, db, dc = gpublas.to_device(a), gpublas.to_device(b), gpublas.empty((m, n), dtype)
    hc = np.empty((m, n), dtype)
    cplx, item = np.dtype(dtype).kind == "c", np.dtype(dtype).itemsize

    def peer(p):
        pa, pb, pc = p.array(a), p.array(b), p.array(hc)
        return lambda: p.gemm(pa, pb, out=pc)

    case = dict(gpu=lambda: gpublas.gemm(da, db, dc), host=lambda: np.matmul(a, b, out=hc),
                ref=compute_tri.wide(a) @ b, tol=compute_tri._tol(dtype, k),
                flops=(8.0 if cplx else 2.0) * m * n * k, bytes=item * (m * k + k * n + m * n), peer=peer)
    if cplx:  # the real GEMM of this shape and precision, for 'x real'
        real = gpublas.runtime.dtypes.real_of(dtype)
        ra, rb, rc = gpublas.to_device(a.real.copy()), gpublas.to_device(b.real.copy()), gpublas.empty((m, n), real)
        case["twin"] = lambda: gpublas.gemm(ra, rb, rc)
    return case


def _gemv(shape, rng):
    m, n = shape
    a, x = rng.uniform(-1, 1, (m, n)).astype(F32), rng.uniform(-1, 1, n).astype(F32)
    da, dx, dy = gpublas.to_device(a), gpublas.to_device(x), gpublas.empty(m, F32)
    hy = np.empty(m, F32)

    def peer(p):
        pa, px, py = p.array(a), p.array(x), p.array(hy)
        return lambda: p.gemv(pa, px, out=py)

    return dict(gpu=lambda: gpublas.gemv(da, dx, dy), host=lambda: np.matmul(a, x, out=hy),
                ref=a.astype(np.float64) @ x, tol=(1e-4, 1e-4 * math.sqrt(n)),
                flops=2.0 * m * n, bytes=4.0 * (m * n + n + m), peer=peer)


def _axpy(shape, rng, dtype=F32):
    (n,), alpha = shape, 0.5
    x, y = rng.uniform(-1, 1, n).astype(dtype), rng.uniform(-1, 1, n).astype(dtype)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)
    hy = y.copy()

    def host():  # NumPy's idiom; it makes a temporary for alpha * x
        hy.__iadd__(dtype(alpha) * x)

    def peer(p):
        px, py = p.array(x), p.array(y)
        return lambda: p.axpy(alpha, px, py)

    return dict(gpu=lambda: gpublas.axpy(alpha, dx, dy), host=host, result=lambda: dy,
                ref=alpha * x.astype(np.float64) + y, tol=(1e-6, 1e-6),
                flops=2.0 * n, bytes=np.dtype(dtype).itemsize * 3 * n, peer=peer)


def _add(shape, rng, dtype=F32):
    (n,) = shape
    x, y = rng.uniform(-1, 1, n).astype(dtype), rng.uniform(-1, 1, n).astype(dtype)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)

    def peer(p):
        px, py = p.array(x), p.array(y)
        return lambda: p.add(px, py)

    return dict(gpu=lambda: dx + dy, host=lambda: x + y, ref=x.astype(np.float64) + y, tol=(1e-6, 1e-7),
                flops=1.0 * n, bytes=np.dtype(dtype).itemsize * 3 * n, peer=peer)


def _sum(shape, rng, dtype=F32):
    (n,) = shape
    x = rng.uniform(-1, 1, n).astype(dtype)
    dx = gpublas.to_device(x)

    def peer(p):
        px = p.array(x)
        return lambda: p.sum(px)

    return dict(gpu=lambda: gpublas.sum(dx), host=lambda: x.sum(), ref=x.astype(np.float64).sum(),
                tol=(1e-5, 1e-7 * math.log2(n) * np.abs(x).sum()),
                flops=1.0 * n, bytes=np.dtype(dtype).itemsize * (n + 1), peer=peer)


def _dot(shape, rng, dtype=F32):
    (n,) = shape
    x, y = rng.uniform(-1, 1, n).astype(dtype), rng.uniform(-1, 1, n).astype(dtype)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)

    def peer(p):
        px, py = p.array(x), p.array(y)
        return lambda: p.dot(px, py)

    return dict(gpu=lambda: gpublas.dot(dx, dy), host=lambda: np.dot(x, y),
                ref=x.astype(np.float64) @ y, tol=(1e-5, 1e-7 * math.log2(n) * np.abs(x * y).sum()),
                flops=2.0 * n, bytes=np.dtype(dtype).itemsize * (2 * n + 1), peer=peer)


BUILDERS = {"gemm": _gemm, "cgemm": lambda shape, rng: _gemm(shape, rng, np.complex64),
            "zgemm": lambda shape, rng: _gemm(shape, rng, np.complex128), "gemv": _gemv, "axpy": _axpy, "add": _add,
            "sum": _sum, "dot": _dot, **compute_tri.BUILDERS,
            **{"d" + op: (lambda f: lambda shape, rng: f(shape, rng, np.float64))(f)
               for op, f in (("axpy", _axpy), ("add", _add), ("sum", _sum), ("dot", _dot))}}
F64_VECTOR_OPS = ("daxpy", "dadd", "dsum", "ddot")  # the vector ops' float64 rows (BLAS's d prefix)
# the ops whose headline figure is GFLOP/s; the others' is GB/s
COMPUTE_BOUND = {"gemm", "cgemm", "zgemm", *compute_tri.OPS, *compute_tri.COMPLEX_OPS}


def missing(op):
    """The gpublas pieces `op` needs that are not there yet (another issue lands them)."""
    op = op[1:] if op in F64_VECTOR_OPS else compute_tri.routine(op)[0]  # 'ztrsm' needs gpublas.trsm
    needs = {"gemm": ("gemm",), "gemv": ("gemv",), "axpy": ("axpy",), "add": (), "sum": ("sum",),
             "dot": ("dot",)}.get(op, (op,))
    out = [f"gpublas.{n}" for n in needs if not hasattr(gpublas, n)]
    if op == "add" and not hasattr(gpublas.DeviceArray, "__add__"):
        out.append("DeviceArray.__add__")
    return out


def shape_label(op, shape):
    if op in compute_tri.BUILDERS:
        return compute_tri.shape_label(op, shape)
    if op.endswith("gemm"):
        return "x".join(map(str, shape)) + ("" if len(set(shape)) > 1 else " (square)")
    return "x".join(map(str, shape))


def measure_op(report, ctx, op, shape, peer=None, rng=None, host=True):
    """Checks op at shape against NumPy, then times gpublas (and NumPy, and the peer). Adds and
    returns the row, or None when the op is missing or its check failed."""
    label = f"{op} {shape_label(op, shape)}"
    gone = missing(op)
    if gone:
        report.skip(label, f"{', '.join(gone)} not available yet")
        return None
    rng = rng or np.random.default_rng(0)
    case = BUILDERS[op](shape, rng)
    out = case["gpu"]()
    got = case["result"]() if "result" in case else out
    rtol, atol = case["tol"]
    if not report.check(label, got, case["ref"], rtol=rtol, atol=atol):
        return None
    th = None
    if host and ctx.simulated:  # gpublas and NumPy share the CPU: their samples alternate (measure_pair)
        t, th = measure_pair(case["gpu"], case["host"], ctx)
    else:
        t = measure(case["gpu"], ctx)
    row = report.add(op=op, shape=shape_label(op, shape), dims=list(shape), flops=case["flops"],
                     bytes=case["bytes"], gflops=case["flops"] / t.median_ms / 1e6,
                     gbps=case["bytes"] / t.median_ms / 1e6, **t.as_row())
    row["intensity"] = case["flops"] / case["bytes"]
    row["metric"] = "GFLOP/s" if op in COMPUTE_BOUND else "GB/s"
    row["rate"] = row["gflops"] if op in COMPUTE_BOUND else row["gbps"]
    if "twin" in case:  # a complex GEMM's real twin, timed right after it
        tt = measure(case["twin"], ctx)
        row.update(real_ms=tt.median_ms, vs_real=t.median_ms / tt.median_ms)
    if host:
        th = th or measure_host(case["host"], ctx)
        # on the sim the ratio of the two minimums (the least disturbed samples of one CPU), else of the medians
        ratio = th.min_ms / t.min_ms if ctx.simulated else th.median_ms / t.median_ms
        row.update(numpy_ms=th.median_ms, numpy_spread_pct=th.spread_pct, vs_numpy=ratio)
        row["numpy_rate"] = row["rate"] / row["vs_numpy"]
    if peer is not None and "peer" in case:
        try:
            fn = case["peer"](peer)
            res = fn()
        except NotImplementedError as e:  # the peer library lacks this routine
            report.skip(f"{label} ({peer.library})", str(e))
            return row
        peer.synchronize()
        # the peer's copies start from the same inputs, so one call matches the same reference
        if report.check(f"{label} ({peer.library})", peer.get(res), case["ref"], rtol=rtol, atol=atol):
            tp = measure(fn, ctx, peer.clock())
            row.update(peer=peer.name, peer_ms=tp.median_ms, peer_spread_pct=tp.spread_pct,
                       vs_peer=tp.median_ms / t.median_ms)
            row["peer_rate"] = row["rate"] / row["vs_peer"]
    return row


COLUMNS = [("op", "op", "s"), ("shape", "shape", "s"), ("ms", "ms", ".4f"), ("spread_pct", "±%", ".1f"),
           ("rate", "gpublas", ".2f"), ("metric", "unit", "s"), ("numpy_rate", "NumPy", ".2f"),
           ("vs_numpy", "x NumPy", ".2f"), ("peer_rate", "cuBLAS", ".2f"), ("vs_peer", "x cuBLAS", ".2f"),
           ("vs_gemm", "x GEMM", ".2f"), ("vs_real", "x real", ".2f")]


def run(ctx):
    report = Report("compute", ctx)
    peer = peers.detect()
    rng = np.random.default_rng(0)
    for op, shape in progress(cases(ctx), ctx, "compute"):
        measure_op(report, ctx, op, shape, peer, rng)
    compute_tri.relate_to_gemm(report.rows)
    report.columns = COLUMNS
    report.note("trsm, trmm, syrk, herk: n^3 FLOPs, symm, syr2k, hemm, her2k: 2 n^3, getrf: 2/3 n^3 per matrix "
                "(complex: 4x); 'x GEMM': the rate over the GEMM's of the same n and dtype (benchmarks/compute_tri.py)")
    report.note("cgemm / zgemm: 8 MNK FLOPs; 'x real': the time over the real GEMM's of the same shape and "
                "precision, measured right after (the 4M bound: 4 at most)")
    report.note("GFLOP/s for GEMM; GB/s (bytes read + written, 1e9/s) for GEMV, axpy, add, sum, dot")
    report.note("NumPy runs on the host CPU in the same process; 'x NumPy' > 1 means gpublas is faster")
    if peer is not None:
        report.note(f"cuBLAS figures through {peer.name}, TF32 off; 'x cuBLAS' = cuBLAS time / gpublas time")
    elif not ctx.simulated:
        report.note("no CuPy or PyTorch imports: no cuBLAS comparison")
    return report


def draw(plt, report):
    rows = report.rows
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, compute in zip(axes, (True, False)):
        sel = [r for r in rows if (r["op"] in COMPUTE_BOUND) == compute]
        if not sel:
            ax.set_visible(False)
            continue
        x = np.arange(len(sel))
        series = [("gpublas", "rate")] + [("NumPy (host)", "numpy_rate")]
        if any("peer_rate" in r for r in sel):
            series.append(("cuBLAS", "peer_rate"))
        w = 0.8 / len(series)
        for i, (name, key) in enumerate(series):
            ax.bar(x + i * w, [r.get(key) or 0 for r in sel], w, label=name)
        ax.set_xticks(x + w * (len(series) - 1) / 2)
        ax.set_xticklabels([f"{r['op']}\n{r['shape'].replace(' (square)', '')}" for r in sel], fontsize=7)
        ax.set_ylabel("GFLOP/s" if compute else "GB/s (read + write)")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    return fig
