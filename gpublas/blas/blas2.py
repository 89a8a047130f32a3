"""Level-2 BLAS on row-major DeviceArrays (kernels in cuda_src/gemv.cu).

    y = gpublas.gemv(a, x)                          # a @ x, a new array
    gpublas.gemv(a, x, y, alpha=2, beta=1, trans=True)   # y = 2 a.T @ x + y, in place
    gpublas.ger(0.5, x, y, a)                       # a += 0.5 outer(x, y), in place

BLAS semantics: beta == 0 never reads y (NaN there does not leak); alpha == 0 reads neither a nor x.
Every check runs before any launch and raises ValueError naming the shapes. Views: a matrix whose
rows are evenly spaced with unit column stride (a[:, i:j], a[::2]) is passed with its leading
dimension, its transpose (a.T) with the transpose flag flipped, no copy; other layouts, and strided
vectors, go through contiguous temporaries (an output view is written back).
"""
from ..runtime import dtypes
from ..core.array import empty
from .blas1 import scale_output
from ..core.checks import FLOATS, blas_matrix, check_operands, contiguous, write_back
from .gemm_complex import trans_op
from ..runtime import source
from ..runtime.geometry import SIM_SPREAD, flat_geometry
from ..runtime.launch import ceil_div, get_kernel, simulated
from ..core.layout import may_share_memory

WARPS_PER_BLOCK = 8      # gemv_n_warp: one warp per row
ROWS_PER_CHUNK = 256     # gemv_t_partial: rows summed by one block before the partials are combined
MAX_GRID_Y = 65535
SIM_ROWS_RUN = 16        # the sim: a thread's run of rows (common.cuh's sim_thread_run rounds runs up to 16)
SIM_COL_BYTES = source.int_defines("gemv.cu", "GEMV_SIM_COL_")["GEMV_SIM_COL_BYTES"]  # gemv_t_partial's run
SIM_T_CHUNK = 1 << 18    # the sim: gemv_t_partial's elements a thread at most (then rows go in chunks)
TYPES = FLOATS + dtypes.COMPLEX  # S, D, C, Z


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
    """y = alpha * op(a) @ x + beta * y with op(a) = a, a.T or a.conj().T (trans False / 'N', True / 'T',
    'C'); returns y (new when not given)."""
    op = trans_op(trans, "gemv")
    trans, conjugate = op != "N", int(op == "C")
    if y is None:
        check_operands("gemv", TYPES, a=a, x=x)
        if beta != 0:
            raise ValueError(f"gemv: beta = {beta} needs an output y to scale; pass y or leave beta at 0")
    else:
        check_operands("gemv", TYPES, a=a, x=x, y=y)
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
    a, trans, lda = blas_matrix(a, trans, stream)
    x = contiguous(x, stream)
    yc = contiguous(y, stream) if beta != 0 else y if y.c_contiguous else empty(n_out, y.dtype)
    if trans:
        _launch_gemv_t(a, lda, x, yc, alpha, beta, conjugate, stream)
    else:
        _launch_gemv_n(a, lda, x, yc, alpha, beta, conjugate, stream)
    return write_back(y, yc, stream)


def _launch_gemv_n(a, lda, x, y, alpha, beta, conjugate, stream):
    m, n = a.shape
    k = get_kernel("gemv", "gemv_n_warp", a.dtype)
    grid = _sim_grid(ceil_div(m, SIM_ROWS_RUN), m * n) if simulated() else \
        (ceil_div(m, WARPS_PER_BLOCK), 32 * WARPS_PER_BLOCK)
    k(*grid, m, n, alpha, a, lda, x, beta, y, conjugate, stream=stream, views=True)


def _launch_gemv_t(a, lda, x, y, alpha, beta, conjugate, stream):
    m, n = a.shape
    sim = simulated()
    if sim:  # a thread per SIM_COL_BYTES of columns over a chunk of rows: up to SIM_T_CHUNK elements each
        cols = SIM_COL_BYTES // a.dtype.itemsize
        nchunks = min(ceil_div(m * min(n, cols), SIM_T_CHUNK), MAX_GRID_Y)
    else:
        nchunks = min(ceil_div(m, ROWS_PER_CHUNK), MAX_GRID_Y)
    rows_per_chunk = ceil_div(m, nchunks)
    partial = empty((nchunks, n), a.dtype)
    k = get_kernel("gemv", "gemv_t_partial", a.dtype)
    if sim:
        grid, block = _sim_grid(ceil_div(n, cols), m * n)
        grid, block = (grid, nchunks), (block, 1)
    else:
        grid, block = (ceil_div(n, 32), nchunks), (32, 8)
    k(grid, block, m, n, a, lda, x, rows_per_chunk, partial, conjugate, stream=stream, views=True)
    k = get_kernel("gemv", "gemv_t_finish", a.dtype)
    k(*flat_geometry(n), n, nchunks, partial, alpha, beta, y, stream=stream)


def _sim_grid(threads, elements):
    """(grid, block) on the sim for `threads` runs of about elements / threads each: one block, run by the calling
    thread, below SIM_SPREAD elements; else a block a run, spread over the cores (gemv.cu's `sim spread`)."""
    return (1, threads) if elements < SIM_SPREAD else (threads, 1)


def ger(alpha, x, y, a, stream=None):
    """a += alpha * outer(x, y), in place; returns a (complex: cuBLAS's geru). alpha == 0 reads nothing."""
    check_operands("ger", TYPES, x=x, y=y, a=a)
    if a.ndim != 2 or x.ndim != 1 or y.ndim != 1 or a.shape != (x.shape[0], y.shape[0]):
        raise ValueError(f"ger: a must have shape (len(x), len(y)); got a {a.shape}, x {x.shape}, y {y.shape}")
    m, n = a.shape
    if a.size == 0 or alpha == 0:
        return a
    x, y = contiguous(x, stream), contiguous(y, stream)
    target, transposed, lda = blas_matrix(a, stream=stream)
    if transposed:  # a.T += alpha y x^T is the same update on the matrix a is the transpose of
        x, y, (m, n) = y, x, (n, m)
    k = get_kernel("gemv", "ger_real", a.dtype)
    k((ceil_div(n, 32), min(ceil_div(m, 8), MAX_GRID_Y)), (32, 8), m, n, alpha, x, y, target, lda,
      stream=stream, views=True)
    if not may_share_memory(target, a):  # blas_matrix copied a: write the result back
        write_back(a, target, stream)
    return a


def gerc(alpha, x, y, a, stream=None):
    """a += alpha * outer(x, conj(y)), in place; returns a (cuBLAS's gerc; ger for real vectors): ger on y
    conjugated once (O(n))."""
    check_operands("gerc", TYPES, x=x, y=y, a=a)
    return ger(alpha, x, y.conj() if y.dtype.kind == "c" and alpha != 0 else y, a, stream)
