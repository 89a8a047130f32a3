"""Level-2 BLAS on row-major DeviceArrays (kernels in cuda_src/gemv.cu).

    y = gpublas.gemv(a, x)                          # a @ x, a new array
    gpublas.gemv(a, x, y, alpha=2, beta=1, trans=True)   # y = 2 a.T @ x + y, in place
    gpublas.ger(0.5, x, y, a)                       # a += 0.5 outer(x, y), in place

BLAS semantics: beta == 0 never reads y (NaN there does not leak); alpha == 0 reads neither a nor x.
Every check runs before any launch and raises ValueError naming the shapes.
"""
from .array import empty
from .blas1 import scale_output
from .checks import check_operands
from .launch import ceil_div, get_kernel

WARPS_PER_BLOCK = 8      # gemv_n_warp: one warp per row
ROWS_PER_CHUNK = 256     # gemv_t_partial: rows summed by one block before the partials are combined
MAX_GRID_Y = 65535


def _gemv_shapes(a, x, trans):
    if a.ndim != 2:
        raise ValueError(f"gemv: a must be 2-D, got shape {a.shape}")
    if x.ndim != 1:
        raise ValueError(f"gemv: x must be 1-D, got shape {x.shape}")
    m, n = a.shape
    n_in, n_out = (m, n) if trans else (n, m)
    if x.shape[0] != n_in:
        op = f"a.T (a {a.shape})" if trans else f"a {a.shape}"
        raise ValueError(f"gemv: {op} needs x of shape ({n_in},), got x of shape {x.shape}")
    return n_in, n_out


def gemv(a, x, y=None, *, alpha=1.0, beta=0.0, trans=False, stream=None):
    """y = alpha * op(a) @ x + beta * y with op(a) = a or a.T (trans); returns y (new when not given)."""
    if y is None:
        check_operands("gemv", a=a, x=x)
        if beta != 0:
            raise ValueError(f"gemv: beta = {beta} needs an output y to scale; pass y or leave beta at 0")
    else:
        check_operands("gemv", a=a, x=x, y=y)
    n_in, n_out = _gemv_shapes(a, x, trans)
    if y is None:
        y = empty(n_out, a.dtype)
    elif y.shape != (n_out,):
        raise ValueError(f"gemv: y has shape {y.shape}, expected ({n_out},) for a of shape {a.shape}"
                         f"{' transposed' if trans else ''} and x of shape {x.shape}")
    if n_out == 0:
        return y
    if alpha == 0 or n_in == 0:
        return scale_output(y, beta, stream=stream)
    if trans:
        _launch_gemv_t(a, x, y, alpha, beta, stream)
    else:
        _launch_gemv_n(a, x, y, alpha, beta, stream)
    return y


def _launch_gemv_n(a, x, y, alpha, beta, stream):
    m, n = a.shape
    k = get_kernel("gemv", "gemv_n_warp", a.dtype)
    k(ceil_div(m, WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK, m, n, alpha, a, n, x, beta, y, stream=stream)


def _launch_gemv_t(a, x, y, alpha, beta, stream):
    m, n = a.shape
    nchunks = min(ceil_div(m, ROWS_PER_CHUNK), MAX_GRID_Y)
    rows_per_chunk = ceil_div(m, nchunks)
    partial = empty((nchunks, n), a.dtype)
    k = get_kernel("gemv", "gemv_t_partial", a.dtype)
    k((ceil_div(n, 32), nchunks), (32, 8), m, n, a, n, x, rows_per_chunk, partial, stream=stream)
    k = get_kernel("gemv", "gemv_t_finish", a.dtype)
    k(min(ceil_div(n, 256), 4096), 256, n, nchunks, partial, alpha, beta, y, stream=stream)


def ger(alpha, x, y, a, stream=None):
    """a += alpha * outer(x, y), in place; returns a. alpha == 0 reads nothing."""
    check_operands("ger", x=x, y=y, a=a)
    if a.ndim != 2 or x.ndim != 1 or y.ndim != 1 or a.shape != (x.shape[0], y.shape[0]):
        raise ValueError(f"ger: a must have shape (len(x), len(y)); got a {a.shape}, x {x.shape}, y {y.shape}")
    m, n = a.shape
    if a.size == 0 or alpha == 0:
        return a
    k = get_kernel("gemv", "ger_real", a.dtype)
    k((ceil_div(n, 32), min(ceil_div(m, 8), MAX_GRID_Y)), (32, 8), m, n, alpha, x, y, a, n, stream=stream)
    return a
