"""cuBLAS's elementwise matrix extensions: geam and dgmm (kernels in cuda_src/geam.cu).

    c = gpublas.geam(a, b, alpha=1.0, beta=-1.0, trans_b=True)   # a - b.T, a new array
    c = gpublas.dgmm(a, x, side="left")                           # diag(x) @ a, a new array

Operands are any 2-D views (a transpose is the view's strides swapped, never a copy); the result is a
new contiguous array. BLAS semantics: alpha == 0 never reads a, beta == 0 never reads b.
float32, float64, complex64 and complex128 (cuBLAS's S, D, C, Z); for complex operands geam's trans 'C' is the
conjugate transpose (CUBLAS_OP_C: the transposed view, read conjugated), alpha and beta may be complex, and
dgmm's x scales as it is (no conjugate, as cuBLAS's cdgmm).
"""
from ..runtime import source
from ..core.array import empty
from .blas2 import TYPES
from .blas3_tri import parse_op, parse_side, strides
from ..core.checks import check_operands, vector
from ..runtime.launch import ceil_div, get_kernel

_DEFINES = source.int_defines("geam.cu", "GEAM_")
BLOCK = (_DEFINES["GEAM_BLOCK_X"], _DEFINES["GEAM_BLOCK_Y"])
MAX_GRID_Y = 65535
_OP = {"N": "", "T": ".T", "C": ".conj().T"}   # op(x) as it reads in an error message


def _grid(m, n):
    return (ceil_div(n, BLOCK[0]), min(ceil_div(m, BLOCK[1]), MAX_GRID_Y))


def geam(a, b, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, stream=None):
    """c = alpha op(a) + beta op(b) with op(x) = x ('N', False), x.T ('T', True) or x.conj().T ('C'; x.T for
    real types); returns c, a new array."""
    dtype = check_operands("geam", TYPES, a=a, b=b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"geam: a and b must be 2-D, got a {a.shape} and b {b.shape}")
    ta, tb = parse_op("geam", trans_a), parse_op("geam", trans_b)
    opa, opb = (a if ta == "N" else a.T), (b if tb == "N" else b.T)
    if opa.shape != opb.shape:
        raise ValueError(f"geam: op(a) = a{_OP[ta]} is {opa.shape} but op(b) = b{_OP[tb]} is {opb.shape}; "
                         "they must match")
    m, n = opa.shape
    c = empty((m, n), a.dtype)
    if c.size:
        sar, sac, _ = strides(opa)
        sbr, sbc, _ = strides(opb)
        k = get_kernel("geam", "geam", a.dtype)
        cj = dtype.kind == "c"
        k(_grid(m, n), BLOCK, m, n, alpha, opa if alpha != 0 else None, sar, sac, int(cj and ta == "C"), beta,
          opb if beta != 0 else None, sbr, sbc, int(cj and tb == "C"), c, n, stream=stream, views=True)
    return c


def dgmm(a, x, *, side="left", stream=None):
    """c = diag(x) @ a (side 'left', len(x) = rows of a) or a @ diag(x) ('right', len(x) = columns);
    returns c, a new array."""
    check_operands("dgmm", TYPES, a=a, x=x)
    left = parse_side("dgmm", side)
    if a.ndim != 2 or x.ndim != 1 or x.shape[0] != a.shape[0 if left else 1]:
        raise ValueError(f"dgmm: side {'left' if left else 'right'} needs a 2-D a and x of length "
                         f"a.shape[{0 if left else 1}]; got a {a.shape} and x {x.shape}")
    m, n = a.shape
    c = empty((m, n), a.dtype)
    if c.size:
        xv, incx = vector(x, stream)
        sar, sac, _ = strides(a)
        k = get_kernel("geam", "dgmm", a.dtype)
        k(_grid(m, n), BLOCK, m, n, a, sar, sac, xv, incx, int(left), c, n, stream=stream, views=True)
    return c
