"""The compute suite's rows for the triangular and symmetric level-3 routines and batched LU (issue 23):
trsm, trmm, symm, syrk, syr2k on n x n operands and getrf_batched on many small matrices, each beside
SciPy's BLAS/LAPACK on the host (scipy.linalg.blas ?trsm ..., scipy.linalg.lu_factor per matrix) and,
where the peer library has the routine, cuBLAS (trsm: solve_triangular; getrf: batched lu_factor).
Each runs in float32 (rows named by the routine: 'trsm') and in complex64 and complex128 (cuBLAS's
names: 'ctrsm', 'ztrsm'); symm, syrk and syr2k are symmetric in complex too (csymm: nothing conjugated),
and the Hermitian hemm, herk, her2k run in complex only ('chemm', 'zherk', ...).

GFLOP/s count the routine's own FLOPs (trsm, trmm, syrk, herk: n^3; symm, syr2k, hemm, her2k: 2 n^3;
getrf: 2/3 n^3 per matrix; four times as many in complex, a complex multiply-add being four real ones),
so 'x GEMM' (this rate over the GEMM's of the same n and dtype, gemm / cgemm / zgemm, when it ran) says
how near GEMM speed the routine runs: the blocked routines put all but the diagonal blocks into GEMM.
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
PREFIX = {"c": np.dtype(np.complex64), "z": np.dtype(np.complex128)}  # the complex rows: 'ctrsm', 'ztrsm', ...
HERMITIAN = ("hemm", "herk", "her2k")  # complex only
COMPLEX_OPS = tuple(p + op for p in PREFIX for op in OPS + HERMITIAN)
_BLAS = {np.dtype(np.float32): "s", np.dtype(np.float64): "d", **{d: p for p, d in PREFIX.items()}}


def routine(op):
    """(routine, dtype) of a row's op: 'trsm' is float32's, 'ztrsm' complex128's, 'cgemm' complex64's."""
    if op[0] in PREFIX and (op[1:] in OPS + HERMITIAN or op[1:] == "gemm"):
        return op[1:], PREFIX[op[0]]
    return op, np.dtype(F32)


def cases(ctx, squares=None):
    """[(op, shape)]: (n, n) for the level-3 routines, (batch, n) for getrf_batched; float32, then complex.
    `squares` (--sizes' square GEMMs) sets n for the level-3 routines and leaves batched LU out."""
    if squares is not None:
        return ([(op, (n, n)) for op in OPS[:-1] for n in squares]
                + [(p + op, (n, n)) for p in PREFIX for op in OPS[:-1] + HERMITIAN for n in squares])
    square = ctx.pick(gpu=[512, 1024, 2048, 4096], sim=[64, 128], quick=[64])
    out = [(op, (n, n)) for op in OPS[:-1] for n in square]
    lu = ctx.pick(gpu=[(10000, 8), (10000, 16), (10000, 32), (1000, 64)], sim=[(256, 8), (64, 32)],
                  quick=[(64, 16)])
    out += [("getrf_batched", s) for s in lu]
    square = ctx.pick(gpu=[1024, 4096], sim=[128], quick=[64])  # sizes compute's cgemm / zgemm rows have
    lu = ctx.pick(gpu=[(10000, 16), (1000, 64)], sim=[(64, 16)], quick=[(16, 8)])
    for p in PREFIX:
        out += [(p + op, (n, n)) for op in OPS[:-1] + HERMITIAN for n in square]
        out += [(p + "getrf_batched", s) for s in lu]
    return out


def uniform(rng, shape, dtype):
    """Entries uniform in [-1, 1) (both parts for a complex dtype)."""
    x = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, shape)
    return x.astype(dtype)


def wide(x):
    """x in float64 (complex128): the references' precision."""
    return x.astype(np.result_type(x.dtype, np.float64))


def _scale(dtype):
    """(FLOPs per real multiply-add's two, bytes per element): complex counts four real multiply-adds."""
    dtype = np.dtype(dtype)
    return (4.0 if dtype.kind == "c" else 1.0), float(dtype.itemsize)


def _tol(dtype, n):
    """(rtol, atol) for a product of inner size n."""
    eps = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10
    return eps, eps * math.sqrt(n)


def _triangle(rng, n, dtype):
    """A lower triangle with unit-sized diagonal entries: a well-conditioned solve at any n."""
    a = np.tril(uniform(rng, (n, n), dtype)) / math.sqrt(n)
    np.fill_diagonal(a, rng.uniform(1, 2, n))
    return a.astype(dtype)


def _trsm(shape, rng, dtype):
    n, m = shape
    a, b = _triangle(rng, n, dtype), uniform(rng, (n, m), dtype)
    da, db0, db = gpublas.to_device(a), gpublas.to_device(b), gpublas.empty((n, m), dtype)
    host_trsm, (f, item) = getattr(sblas, _BLAS[np.dtype(dtype)] + "trsm"), _scale(dtype)

    def gpu():
        db.copy_from(db0)
        return gpublas.trsm(da, db, lower=True)

    def peer(p):
        pa, pb = p.array(a), p.array(b)
        return lambda: p.trsm(pa, pb)

    rtol = 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9
    return dict(gpu=gpu, host=lambda: host_trsm(1.0, a, b, lower=1),
                ref=scipy.linalg.solve_triangular(wide(a), b, lower=True),
                tol=(rtol, rtol), flops=f * n * n * m, bytes=item * (n * n / 2 + 2 * n * m), peer=peer)


def _trmm(shape, rng, dtype):
    n, m = shape
    a, b = _triangle(rng, n, dtype), uniform(rng, (n, m), dtype)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    host_trmm, (f, item) = getattr(sblas, _BLAS[np.dtype(dtype)] + "trmm"), _scale(dtype)
    return dict(gpu=lambda: gpublas.trmm(da, db, lower=True), host=lambda: host_trmm(1.0, a, b, lower=1),
                ref=np.tril(wide(a)) @ b, tol=_tol(dtype, n), flops=f * n * n * m,
                bytes=item * (n * n / 2 + 2 * n * m))


def _symm(shape, rng, dtype, herm=False):
    n, m = shape
    a, b = uniform(rng, (n, n), dtype), uniform(rng, (n, m), dtype)
    da, db, dc = gpublas.to_device(a), gpublas.to_device(b), gpublas.empty((n, m), dtype)
    if herm:  # the upper triangle, the diagonal's imaginary parts taken as 0
        full, name, gpu = np.triu(a, 1) + np.triu(a, 1).conj().T + np.diag(a.diagonal().real), "hemm", gpublas.hemm
    else:  # symmetric, not Hermitian, in complex too
        full, name, gpu = np.triu(a) + np.triu(a, 1).T, "symm", gpublas.symm
    host_symm, (f, item) = getattr(sblas, _BLAS[np.dtype(dtype)] + name), _scale(dtype)
    return dict(gpu=lambda: gpu(da, db, dc), host=lambda: host_symm(1.0, a, b),
                ref=wide(full) @ b, tol=_tol(dtype, n), flops=2 * f * n * n * m,
                bytes=item * (n * n / 2 + 2 * n * m))


def _syrk(shape, rng, dtype, two=False, herm=False):
    """syrk / syr2k (herm: herk / her2k, op(x)^H for op(x)^T)."""
    n, k = shape
    a, b = uniform(rng, (n, k), dtype), uniform(rng, (n, k), dtype)
    da, db, dc = gpublas.to_device(a), gpublas.to_device(b), gpublas.zeros((n, n), dtype)
    a64, prefix, (f, item) = wide(a), _BLAS[np.dtype(dtype)], _scale(dtype)
    rtol, atol = _tol(dtype, k)
    t = (lambda x: x.conj().T) if herm else (lambda x: x.T)
    if two:
        name = "her2k" if herm else "syr2k"
        host, gpu = getattr(sblas, prefix + name), getattr(gpublas, name)
        return dict(gpu=lambda: gpu(da, db, dc, lower=True), host=lambda: host(1.0, a, b, lower=1),
                    ref=np.tril(a64 @ t(b) + b @ t(a64)), tol=(rtol, 2 * atol),
                    flops=2 * f * n * n * k, bytes=item * (2 * n * k + n * n / 2))
    name = "herk" if herm else "syrk"
    host, gpu = getattr(sblas, prefix + name), getattr(gpublas, name)
    return dict(gpu=lambda: gpu(da, dc, lower=True), host=lambda: host(1.0, a, lower=1),
                ref=np.tril(a64 @ t(a64)), tol=(rtol, atol), flops=f * n * n * k, bytes=item * (n * k + n * n / 2))


def _getrf(shape, rng, dtype):
    batch, n = shape
    a = (uniform(rng, (batch, n, n), dtype) + 2 * np.eye(n)).astype(dtype)
    da, (f, item) = gpublas.to_device(a), _scale(dtype)

    def host():
        for m in a:
            scipy.linalg.lu_factor(m, check_finite=False)

    def peer(p):
        pa = p.array(a)
        return lambda: p.getrf_batched(pa)

    ref = np.stack([scipy.linalg.lu_factor(wide(m))[0] for m in a])
    tol = 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9
    return dict(gpu=lambda: gpublas.getrf_batched(da)[0], host=host, ref=ref, tol=(tol, tol),
                flops=f * 2.0 / 3.0 * n ** 3 * batch, bytes=item * 2 * n * n * batch, peer=peer)


_BUILDERS = {"trsm": _trsm, "trmm": _trmm, "symm": _symm, "syrk": _syrk,
             "syr2k": lambda shape, rng, dtype: _syrk(shape, rng, dtype, two=True), "getrf_batched": _getrf,
             "hemm": lambda shape, rng, dtype: _symm(shape, rng, dtype, herm=True),
             "herk": lambda shape, rng, dtype: _syrk(shape, rng, dtype, herm=True),
             "her2k": lambda shape, rng, dtype: _syrk(shape, rng, dtype, two=True, herm=True)}


def _builder(op):
    name, dtype = routine(op)
    return lambda shape, rng: _BUILDERS[name](shape, rng, dtype)


BUILDERS = {op: _builder(op) for op in OPS + COMPLEX_OPS}


def shape_label(op, shape):
    return f"{shape[0]} x {shape[1]}x{shape[1]}" if op.endswith("getrf_batched") else "x".join(map(str, shape))


def relate_to_gemm(rows):
    """Adds 'vs_gemm' (rate / the rate of the GEMM of the same square n and dtype: gemm, cgemm, zgemm) to
    this module's level-3 rows."""
    gemm = {(r["op"], r["dims"][0]): r["rate"] for r in rows
            if routine(r["op"])[0] == "gemm" and len(set(r["dims"])) == 1}
    for r in rows:
        name, dtype = routine(r["op"])
        key = (("gemm" if dtype == F32 else r["op"][0] + "gemm"), r["dims"][0])
        if name in OPS[:-1] + HERMITIAN and key in gemm:
            r["vs_gemm"] = r["rate"] / gemm[key]
