"""Launchers for the transformer layers' own kernels (nn/cuda/layernorm.cu), one function per kernel that
checks its arguments, computes the grid and launches, as nn/kernels/ does for the other layers."""
import gpublas
from gpublas.runtime import launch
from gpublas.runtime.launch import ceil_div

from .activation import bias_grad_sum
from .common import _storage, get_kernel

LN_BLOCK = 256          # threads per block of layernorm.cu (8 warps: 8 rows at a time on a GPU)
LN_GROUPS_GPU = 1024    # layernorm_backward's row units G on a GPU (partial gradient rows to sum)
LN_GROUPS_SIM = 16      # and on the simulator: a thread each, rows g, g + 16, ...


def _lanes():
    """layernorm.cu's LN_LANES: a warp per row on a GPU, one thread on the simulator."""
    return 1 if launch.simulated() else 32


def _geometry(units):
    threads = units * _lanes()
    block = min(LN_BLOCK, ceil_div(threads, 32) * 32)
    return ceil_div(threads, block), block


def _rows(x, C):
    if x.size % C or not x.c_contiguous:
        raise ValueError(f"layernorm: x {x.shape} must be contiguous with a last axis of {C} elements")
    return x.size // C


def layernorm_forward(x, w, b, y, mean, rstd, eps):
    """y = (x - mean) rstd w + b over rows of C = w's (or mean's row) size; writes mean, rstd (rows,) in the
    compute dtype (float32 for 16-bit x). w, b may be None."""
    rows = mean.size
    C = x.size // max(rows, 1) if rows else 0
    if rows == 0 or x.size == 0:
        return y
    if _rows(x, C) != rows or y.shape != x.shape or rstd.size != rows or any(
            p is not None and p.size != C for p in (w, b)):
        raise ValueError(f"layernorm_forward: x {x.shape}, y {y.shape}, mean {mean.shape}, rstd {rstd.shape}, "
                         f"weight {None if w is None else w.shape}, bias {None if b is None else b.shape}")
    dtype = _storage("layernorm_forward", [x, y], [w, b, mean, rstd])
    get_kernel("layernorm", "layernorm_forward", dtype)(*_geometry(rows), x, w, b, y, mean, rstd, rows, C, eps)
    return y


def layernorm_backward(x, dy, w, mean, rstd, dx, dw, db):
    """dx (writes) and dw, db (adds; None: not wanted) of layer normalization: one kernel gives dx and G
    partial rows of dw and db (a unit's rows each), gpublas' reduce.cu sums them in a fixed order."""
    rows = mean.size
    if rows == 0 or x.size == 0:
        return dx
    C = x.size // rows
    _rows(x, C)
    if dy.shape != x.shape or dx.shape != x.shape or rstd.size != rows or (w is not None and w.size != C):
        raise ValueError(f"layernorm_backward: x {x.shape}, dy {dy.shape}, dx {dx.shape}, rows {rows}")
    dtype = _storage("layernorm_backward", [x, dy, dx], [w, mean, rstd, dw, db])
    G = min(rows, LN_GROUPS_SIM if launch.simulated() else LN_GROUPS_GPU)
    acc = mean.dtype
    dw_part = None if dw is None else gpublas.empty((G, C), acc)
    db_part = None if db is None else gpublas.empty((G, C), acc)
    get_kernel("layernorm", "layernorm_backward", dtype)(*_geometry(G), x, dy, w, mean, rstd, dx, dw_part, db_part,
                                                         rows, C, G)
    for part, grad in ((dw_part, dw), (db_part, db)):
        if part is not None:
            bias_grad_sum(part, grad.reshape(C), C, 1)   # grad += the sum of the G rows
    return dx

