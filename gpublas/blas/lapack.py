"""Batched LU: getrf_batched and getrs_batched, cuBLAS's getrfBatched / getrsBatched (kernels in
cuda_src/getrf.cu; the triangular solves are gpublas.trsm_batched).

    lu, piv = gpublas.getrf_batched(a3)        # a3 (batch, n, n): P a3[i] = L U, as scipy.linalg.lu_factor
    gpublas.getrs_batched(lu, piv, b3)         # b3[i] = inv(a3[i]) @ b3[i], in place

getrf_batched factors each matrix in one thread block, held in shared memory when n <= GETRF_SHARED
(32: the many-small-matrices case it is for), in global memory otherwise (one block per matrix: right
for a few dozen rows, not for one large matrix). piv holds 0-based pivot rows (int32), as
scipy.linalg.lu_factor's. A matrix with an exactly zero pivot is still factored (as LAPACK does) and
reported: a SingularMatrixWarning names it, or with info=True the per-matrix LAPACK info array
(0, or k + 1 for the first zero pivot U[k, k]) is returned on the device instead, without waiting.
A 2-D a is a batch of one and gives a 2-D lu and a 1-D piv. Types S, D, C, Z: complex matrices pivot on
the largest |re| + |im| of a column (LAPACK cgetrf's icamax), and getrs solves with a, a.T or a.conj().T.
"""
import warnings

import numpy as np

from ..runtime import source
from ..core.array import empty
from .blas2 import TYPES
from .blas3_tri import parse_op, strides, trsm_batched
from ..core.checks import check_operands
from ..runtime.errors import SingularMatrixWarning
from ..runtime.launch import ceil_div, get_kernel, simulated

_DEFINES = source.int_defines("getrf.cu")
GETRF_SHARED = _DEFINES["GETRF_SHARED"]
ROWS = _DEFINES["GETRF_ROWS"]   # getrf's blockDim.y (blockDim.x is a warp) on a GPU
SIM_ROWS = 1                    # ... on the simulator, where a thread costs more than an element
LASWP_THREADS = _DEFINES["LASWP_THREADS"]
MAX_GRID_Y = 65535


def getrf_batched(a, *, info=False, stream=None):
    """(lu, piv) of every square matrix of a (batch, n, n): unit lower L below the diagonal of lu, U on
    and above it, piv[i, k] the row swapped with row k; a is not modified. With info=True returns
    (lu, piv, info) and leaves reporting singular matrices to the caller."""
    check_operands("getrf_batched", TYPES, a=a)
    if a.ndim not in (2, 3) or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"getrf_batched: a must be a stack of square matrices (batch, n, n) or one (n, n), "
                         f"got shape {a.shape}")
    a3 = a if a.ndim == 3 else a.reshape((1,) + a.shape)
    batch, n = a3.shape[0], a3.shape[-1]
    lu = a3.copy(stream)
    piv, inf = empty((batch, n), np.int32), empty(batch, np.int32)
    if batch and n:
        name = "getrf_shared" if n <= GETRF_SHARED else "getrf_global"
        get_kernel("getrf", name, a.dtype)(batch, (32, SIM_ROWS if simulated() else ROWS), n, lu, piv, inf, stream=stream)
    elif batch:
        inf.fill(0, stream)
    if a.ndim == 2:
        lu, piv, inf = lu.reshape(a.shape), piv.reshape(n), inf
    if info:
        return lu, piv, inf
    _report(inf, stream)
    return lu, piv


def _report(info, stream):
    if info.size == 0:
        return
    if stream is not None:
        stream.synchronize()
    codes = info.get()
    bad = np.flatnonzero(codes)
    if bad.size:
        first = ", ".join(f"matrix {i}: U[{codes[i] - 1}, {codes[i] - 1}] = 0" for i in bad[:5])
        more = f" and {bad.size - 5} more" if bad.size > 5 else ""
        warnings.warn(f"getrf_batched: {bad.size} of {codes.size} matrices are singular ({first}{more}); "
                      "their factors are exact but U cannot be solved with", SingularMatrixWarning, stacklevel=3)


def _laswp(piv, b3, forward, stream):
    batch, n, nrhs = b3.shape
    sbr, sbc, zb = strides(b3)
    k = get_kernel("getrf", "laswp", b3.dtype)
    k((batch, min(ceil_div(nrhs, LASWP_THREADS), MAX_GRID_Y)), LASWP_THREADS, n, nrhs, piv, b3, sbr, sbc, zb,
      int(forward), stream=stream, views=True)


def getrs_batched(lu, piv, b, *, trans=False, stream=None):
    """Solves a[i] x = b[i] (trans False/'N'), a[i].T x = b[i] (True/'T') or a[i].conj().T x = b[i] ('C')
    for every matrix with (lu, piv) from getrf_batched; b is (batch, n, nrhs) or (batch, n) (one
    right-hand side each; for a 2-D lu, (n, nrhs) or (n,)), overwritten by x and returned."""
    check_operands("getrs_batched", TYPES, lu=lu, b=b)
    op = parse_op("getrs_batched", trans)
    if lu.ndim not in (2, 3) or lu.shape[-1] != lu.shape[-2]:
        raise ValueError(f"getrs_batched: lu must be (batch, n, n) or (n, n), got shape {lu.shape}")
    lu3 = lu if lu.ndim == 3 else lu.reshape((1,) + lu.shape)
    batch, n = lu3.shape[0], lu3.shape[-1]
    if not hasattr(piv, "dtype") or piv.dtype != np.int32 or piv.shape != lu.shape[:-1] or not piv.c_contiguous:
        raise ValueError(f"getrs_batched: piv must be the contiguous int32 pivots getrf_batched returned for lu "
                         f"{lu.shape}, shape {lu.shape[:-1]}; got {getattr(piv, 'dtype', type(piv).__name__)} "
                         f"{getattr(piv, 'shape', '')}")
    if b.ndim == lu.ndim - 1 and b.shape == lu.shape[:-1]:
        b3 = b[..., None]
    elif b.ndim == lu.ndim and b.shape[:-1] == lu.shape[:-1]:
        b3 = b
    else:
        raise ValueError(f"getrs_batched: b must be {lu.shape[:-1]} or {lu.shape[:-1] + ('nrhs',)} for lu "
                         f"{lu.shape}, got {b.shape}")
    b3 = b3 if b3.ndim == 3 else b3[None]
    if b3.size == 0 or batch == 0:
        return b
    if op == "N":   # a = P^T L U: x = inv(U) inv(L) P b
        _laswp(piv, b3, True, stream)
        trsm_batched(lu3, b3, lower=True, unit_diagonal=True, stream=stream)
        trsm_batched(lu3, b3, lower=False, stream=stream)
    else:           # op(a) = op(U) op(L) P (op a transpose, conjugated for 'C'): x = P^T inv(op(L)) inv(op(U)) b
        trsm_batched(lu3, b3, lower=False, trans=op, stream=stream)
        trsm_batched(lu3, b3, lower=True, trans=op, unit_diagonal=True, stream=stream)
        _laswp(piv, b3, False, stream)
    return b
