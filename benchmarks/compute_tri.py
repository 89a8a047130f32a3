"""The compute suite's rows for the triangular and symmetric level-3 routines and batched LU (issue 23):
trsm, trmm, symm, syrk, syr2k on n x n operands and getrf_batched on many small matrices, each beside
SciPy's BLAS/LAPACK on the host (scipy.linalg.blas ?trsm ..., scipy.linalg.lu_factor per matrix) and,
where the peer library has the routine, cuBLAS (trsm: solve_triangular; getrf: batched lu_factor).

GFLOP/s count the routine's own FLOPs (trsm, trmm, syrk: n^3; symm, syr2k: 2 n^3; getrf: 2/3 n^3 per
matrix), so 'x GEMM' (this rate over the compute suite's GEMM of the same n, when it ran) says how near
GEMM speed the routine runs: the blocked routines put all but the diagonal blocks into GEMM.
trsm overwrites b, so each timed call first restores b from a pristine copy (an n^2 copy beside n^3
FLOPs; the host side pays the same, SciPy copying b).
"""
import math

import numpy as np
import scipy.linalg
from scipy.linalg import blas as sblas

import gpublas

F32 = np.float32
OPS = ("trsm", "trmm", "symm", "syrk", "syr2k", "getrf_batched")


def cases(ctx):
    """[(op, shape)]: (n, n) for the level-3 routines, (batch, n) for getrf_batched."""
    square = ctx.pick(gpu=[512, 1024, 2048, 4096], sim=[64, 128], quick=[64])
    out = [(op, (n, n)) for op in OPS[:-1] for n in square]
    lu = ctx.pick(gpu=[(10000, 8), (10000, 16), (10000, 32), (1000, 64)], sim=[(256, 8), (64, 32)],
                  quick=[(64, 16)])
    return out + [("getrf_batched", s) for s in lu]


def _triangle(rng, n):
    """A lower triangle with unit-sized diagonal entries: a well-conditioned solve at any n."""
    a = np.tril(rng.uniform(-1, 1, (n, n))) / math.sqrt(n)
    np.fill_diagonal(a, rng.uniform(1, 2, n))
    return a.astype(F32)


def _trsm(shape, rng):
    n, m = shape
    a, b = _triangle(rng, n), rng.uniform(-1, 1, (n, m)).astype(F32)
    da, db0, db = gpublas.to_device(a), gpublas.to_device(b), gpublas.empty((n, m), F32)

    def gpu():
        db.copy_from(db0)
        return gpublas.trsm(da, db, lower=True)

    def peer(p):
        pa, pb = p.array(a), p.array(b)
        return lambda: p.trsm(pa, pb)

    return dict(gpu=gpu, host=lambda: sblas.strsm(1.0, a, b, lower=1),
                ref=scipy.linalg.solve_triangular(a.astype(np.float64), b, lower=True),
                tol=(1e-3, 1e-3), flops=1.0 * n * n * m, bytes=4.0 * (n * n / 2 + 2 * n * m), peer=peer)


def _trmm(shape, rng):
    n, m = shape
    a, b = _triangle(rng, n), rng.uniform(-1, 1, (n, m)).astype(F32)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    return dict(gpu=lambda: gpublas.trmm(da, db, lower=True), host=lambda: sblas.strmm(1.0, a, b, lower=1),
                ref=np.tril(a).astype(np.float64) @ b, tol=(1e-4, 1e-4 * math.sqrt(n)),
                flops=1.0 * n * n * m, bytes=4.0 * (n * n / 2 + 2 * n * m))


def _symm(shape, rng):
    n, m = shape
    a, b = rng.uniform(-1, 1, (n, n)).astype(F32), rng.uniform(-1, 1, (n, m)).astype(F32)
    da, db, dc = gpublas.to_device(a), gpublas.to_device(b), gpublas.empty((n, m), F32)
    full = np.triu(a) + np.triu(a, 1).T
    return dict(gpu=lambda: gpublas.symm(da, db, dc), host=lambda: sblas.ssymm(1.0, a, b),
                ref=full.astype(np.float64) @ b, tol=(1e-4, 1e-4 * math.sqrt(n)),
                flops=2.0 * n * n * m, bytes=4.0 * (n * n / 2 + 2 * n * m))


def _syrk(shape, rng, two=False):
    n, k = shape
    a, b = rng.uniform(-1, 1, (n, k)).astype(F32), rng.uniform(-1, 1, (n, k)).astype(F32)
    da, db, dc = gpublas.to_device(a), gpublas.to_device(b), gpublas.zeros((n, n), F32)
    a64 = a.astype(np.float64)
    if two:
        return dict(gpu=lambda: gpublas.syr2k(da, db, dc, lower=True), host=lambda: sblas.ssyr2k(1.0, a, b, lower=1),
                    ref=np.tril(a64 @ b.T + b @ a64.T), tol=(1e-4, 2e-4 * math.sqrt(k)),
                    flops=2.0 * n * n * k, bytes=4.0 * (2 * n * k + n * n / 2))
    return dict(gpu=lambda: gpublas.syrk(da, dc, lower=True), host=lambda: sblas.ssyrk(1.0, a, lower=1),
                ref=np.tril(a64 @ a64.T), tol=(1e-4, 1e-4 * math.sqrt(k)),
                flops=1.0 * n * n * k, bytes=4.0 * (n * k + n * n / 2))


def _getrf(shape, rng):
    batch, n = shape
    a = (rng.uniform(-1, 1, (batch, n, n)) + 2 * np.eye(n)).astype(F32)
    da = gpublas.to_device(a)

    def host():
        for m in a:
            scipy.linalg.lu_factor(m, check_finite=False)

    def peer(p):
        pa = p.array(a)
        return lambda: p.getrf_batched(pa)

    ref = np.stack([scipy.linalg.lu_factor(m.astype(np.float64))[0] for m in a])
    return dict(gpu=lambda: gpublas.getrf_batched(da)[0], host=host, ref=ref, tol=(1e-3, 1e-3),
                flops=2.0 / 3.0 * n ** 3 * batch, bytes=4.0 * 2 * n * n * batch, peer=peer)


BUILDERS = {"trsm": _trsm, "trmm": _trmm, "symm": _symm, "syrk": _syrk,
            "syr2k": lambda shape, rng: _syrk(shape, rng, two=True), "getrf_batched": _getrf}


def shape_label(op, shape):
    return f"{shape[0]} x {shape[1]}x{shape[1]}" if op == "getrf_batched" else "x".join(map(str, shape))


def relate_to_gemm(rows):
    """Adds 'vs_gemm' (rate / the GEMM rate of the same square n) to this module's rows."""
    gemm = {r["dims"][0]: r["rate"] for r in rows if r["op"] == "gemm" and len(set(r["dims"])) == 1}
    for r in rows:
        if r["op"] in OPS[:-1] and r["dims"][0] in gemm:
            r["vs_gemm"] = r["rate"] / gemm[r["dims"][0]]
