"""Triangular level-3 BLAS: trsm, trsm_batched and trmm (kernels: cuda_src/triangular.cu; most FLOPs:
the GEMM kernels through gpublas.gemm / gemm_batched).

    gpublas.trsm(a, b, side="left", lower=True)          # b = inv(tril(a)) @ b, in place; returns b
    c = gpublas.trmm(a, b, side="right", alpha=2.0)       # c = 2 b @ triu(a), a new array
    gpublas.trsm_batched(a3, b3, lower=True)              # every (a3[i], b3[i]) pair, in place

Arguments as scipy.linalg.blas's ?trsm / ?trmm: side 'left' (op(a) @ x) or 'right' (x @ op(a)), lower
(default False: the upper triangle of a is read, the other never), trans (False/0/'N', True/1/'T',
2/'C': the conjugate transpose, 'T' for real types), unit_diagonal (ones assumed, the diagonal never
read), alpha (complex for complex types). Types S, D, C, Z.

Every case reduces to side 'left' with op(a) = a by views, never copies: side 'right' solves op(a)^T x^T =
b^T (b.T, a view), a transpose is a.T with the other triangle. Then it recurses on halves split at a
multiple of LEAF (a 2x2 block triangle: solve one half, one GEMM updates the other half's right-hand side,
solve the other), down to diagonal blocks of at most LEAF rows. trmm densifies those all at once (one
tri_fill over the stack of full blocks: zeros in the other triangle; one more for a short last block) and
multiplies them in one batched GEMM before the off-diagonal updates. trsm, as MAGMA's, first inverts every
diagonal block in one launch (trtri_blocks, a stack of n / LEAF inverses) and solves each block as a GEMM
with its inverse, out of place into a temporary x that receives the solution (b keeps the updated right-hand
sides) and is copied into b at the end (workspace: x, b's size, and the inverses, n LEAF elements a matrix,
at most a's size): every FLOP of the solve is GEMM's, in GEMMs as large as the halves, beside the
inversion's LEAF^3 / 6 multiply-adds per block whatever the number m of right-hand sides. So trsm keeps
trsm_leaf (substitution, one thread per right-hand side, in place) where that fixed cost does not pay: a
triangle of one block (n <= LEAF) or m < LEAF (trsv, getrs' few columns). Measured on the sim (n = 512,
float32, CPU time, substitution -> inversion): m = 8 0.49 -> 0.81 ms, m = 64 1.26 either way, m = 128 2.2 ->
1.9, m = 512 10.7 -> 5.8. The inverse-based solve is what MAGMA's and cuBLAS's trsm do; its backward error
is bounded through the inverses': each column of W_d = inv(A_dd) is a substitution, backward stable column
by column, so a block's x_d = W_d b_d has residual |b_d - A_dd x_d| <= 2 LEAF eps |A_dd| |W_d| |b_d| to
first order (Du Croz and Higham 1992), which the tests check on ill-conditioned triangles. BLAS semantics:
alpha == 0 writes zeros without reading a or b.

Complex types are an instantiation of the same code: the kernels use only `real`'s operators, the launchers
pass dtypes through. A conjugate transpose is the transpose's views read conjugated: every routine solves
with A = conj(view) when op is 'C' (on either side: x a^H = b is conj(a) x^T = b^T), so trsm_leaf,
trtri_blocks and tri_fill take a conj flag (the elements conjugated as loaded) and mm's GEMMs get trans 'C'
on the swapped view (conj(v) = op_C(v.T)). A conjugated copy of a would be as simple and cost O(n^2) beside
the O(n^2 m) solve, but a new n x n array per call (a whole stack's for trsm_batched) and a second pass over
a; the flag costs neither, and complex GEMM copies its operands' parts out anyway (gemm_complex), negating
the imaginary part for 'C' on the way. hemm is symm with tri_fill's mirror conjugated.
"""
import numpy as np

from ..runtime import source
from ..core.array import empty
from .blas2 import TYPES, gemv, ger, gerc
from .blas3 import gemm, gemm_batched
from ..core.checks import check_operands, swap_last
from ..runtime.launch import SIM_ELEMENTS_PER_THREAD, ceil_div, get_kernel, simulated
from ..core.layout import may_overlap_itself, may_share_memory

_DEFINES = source.int_defines("triangular.cu", "T")
LEAF = _DEFINES["TRSM_LEAF"]              # rows of the diagonal blocks the recursion stops at
TRSM_THREADS = _DEFINES["TRSM_THREADS"]   # trsm_leaf: right-hand sides per block
TRSM_LEAF = _DEFINES["TRSM_LEAF"]         # trtri_blocks: threads per block, the most rows of a block
TRI_BLOCK = (_DEFINES["TRI_BLOCK_X"], _DEFINES["TRI_BLOCK_Y"])
MAX_GRID_Y = 65535


# -- arguments --------------------------------------------------------------------------------------
def parse_side(routine, side):
    s = str(side).lower()
    if s not in ("left", "right", "l", "r"):
        raise ValueError(f"{routine}: side must be 'left' or 'right', got {side!r}")
    return s[0] == "l"


def parse_op(routine, trans):
    """op(a) as 'N' (a), 'T' (a.T) or 'C' (a.conj().T) from False/True/0/1/2 (scipy's trans_a) or
    'N'/'T'/'C' in either case."""
    if isinstance(trans, str) and trans.upper() in ("N", "T", "C"):
        return trans.upper()
    if not isinstance(trans, str) and trans in (False, True, 0, 1, 2):
        return "NTC"[int(trans)]
    raise ValueError(f"{routine}: trans must be False, True, 'N', 'T' or 'C', got {trans!r}")


def parse_trans(routine, trans):
    """op(a) as False (a) or True (a.T or a.conj().T): whether op transposes."""
    return parse_op(routine, trans) != "N"


def op_flags(routine, trans, dtype):
    """(transposed, conjugated) of op(a) for a of `dtype`: 'C' conjugates complex types only."""
    op = parse_op(routine, trans)
    return op != "N", op == "C" and dtype.kind == "c"


def check_alpha(routine, alpha, dtype):
    """alpha as the kernels take it: complex for complex types; a real type's alpha must be real."""
    if dtype.kind == "c":
        return complex(alpha)
    if isinstance(alpha, (complex, np.complexfloating)):
        if alpha.imag:
            raise TypeError(f"{routine}: alpha = {alpha} is complex but the operands are {dtype}")
        alpha = alpha.real
    return float(alpha)


def strides(x):
    """(row, column, batch) strides of a matrix or stack view, in elements (batch 0 for a matrix)."""
    s = [st // x.itemsize for st in x.strides]
    return (s[-2], s[-1], s[0] if x.ndim == 3 else 0)


def check_square(routine, a, order, what="a"):
    if a.shape[-2:] != (order, order):
        raise ValueError(f"{routine}: {what} must be {order} x {order} here, got {what} of shape {a.shape}")


def check_writable(routine, name, x, *inputs):
    """An output written in place: its elements at distinct addresses, sharing memory with no input."""
    if may_overlap_itself(x.shape, x.strides, x.itemsize):
        raise ValueError(f"{routine}: {name} {x.shape} (strides {x.strides}) has elements sharing an address; "
                         "it cannot be written in place")
    for other, y in inputs:
        if may_share_memory(x, y):
            raise ValueError(f"{routine}: {name} {x.shape} shares memory with {other} {y.shape}")


# -- GEMM on views ----------------------------------------------------------------------------------
def mm(a, b, c, alpha, beta, stream=None, conj=False):
    """c = alpha op(a) @ b + beta c on views, op(a) = a, or conj(a) with conj (trans 'C' on a's swapped
    view): gemm_batched for stacks, gemv when c has one column, ger (gerc) for a rank-one update of c,
    else gemm; returns c. An input sharing memory with c (column blocks of one matrix) goes through a copy
    first."""
    if may_share_memory(a, c):
        a = a.copy(stream)
    if may_share_memory(b, c):
        b = b.copy(stream)
    at, op = (swap_last(a), "C") if conj else (a, "N")   # op(at) = conj(a) or a
    if c.ndim == 3:
        gemm_batched(at, b, c, alpha=alpha, beta=beta, trans_a=op, stream=stream)
    elif c.shape[1] == 1:
        gemv(at, b[:, 0], c[:, 0], alpha=alpha, beta=beta, trans=op, stream=stream)
    elif a.shape[1] == 1 and beta == 1 and conj:   # c += alpha conj(a) b, as c.T += alpha b^T conj(a)^T
        gerc(alpha, b[0, :], a[:, 0], c.T, stream=stream)
    elif a.shape[1] == 1 and beta == 1:
        ger(alpha, a[:, 0], b[0, :], c, stream=stream)
    else:
        gemm(at, b, c, alpha=alpha, beta=beta, trans_a=op, stream=stream)
    return c


def split(n):
    """Where the recursion splits n rows: about half, at a multiple of LEAF (0 < k < n); 0 for a diagonal
    block, n <= LEAF, where it stops."""
    return ceil_div(n // 2, LEAF) * LEAF if n > LEAF else 0


def _tri_grid(n, batch):
    """tri_fill's and tri_update's grid for n x n matrices: blocks of TRI_BLOCK along the columns, grid-striding
    over the rows with one row a thread, SIM_ELEMENTS_PER_THREAD on the sim (where a thread is a call: 512 x 512
    took 1.75 ms of CPU at one row a thread)."""
    rows = TRI_BLOCK[1] * (SIM_ELEMENTS_PER_THREAD if simulated() else 1)
    return ceil_div(n, TRI_BLOCK[0]), min(ceil_div(n, rows), MAX_GRID_Y), batch


def tri_dense(a, lower, unit=False, mirror=False, stream=None, conj=False):
    """The dense n x n matrix (contiguous, new) of a triangle of the view a (or a stack of them: one launch):
    the other triangle zeros, or mirrored (mirror: a symmetric matrix stored in one triangle); unit puts ones
    on the diagonal; conj conjugates every element read."""
    n, batch = a.shape[-1], (a.shape[0] if a.ndim == 3 else 1)
    d = empty(a.shape, a.dtype)
    if n and batch:
        sar, sac, za = strides(a)
        k = get_kernel("triangular", "tri_fill", a.dtype)
        k(_tri_grid(n, batch), TRI_BLOCK, n, a, sar, sac, za, int(lower), int(mirror), int(unit), int(conj), d,
          stream=stream, views=True)
    return d


def blocks(x, start, count, rows, diagonal=False):
    """The stack of `count` blocks of `rows` rows of the matrix view x from row `start` on: (count, rows, x's
    columns), or with `diagonal` the rows x rows blocks on x's diagonal; a view."""
    sr, sc = x.strides
    step = rows * (sr + sc if diagonal else sr)
    return x._view((count, rows, rows if diagonal else x.shape[1]), (step, sr, sc), start * (sr + sc if diagonal else sr))


def leaf_blocks(n):
    """(start, count, rows) of the recursion's diagonal blocks of an n-row triangle as at most two uniform stacks:
    the full LEAF-row blocks, then a shorter last one."""
    full, rest = divmod(n, LEAF)
    return [(s, c, r) for s, c, r in ((0, full, LEAF), (full * LEAF, 1, rest)) if c and r]


def tri_update(t, beta, c, lower, stream=None):
    """c = t + beta c on the lower (else upper) triangle of the view c, a matrix or a stack of them (t: dense and
    contiguous, c's shape, or None for 0)."""
    n, batch = c.shape[-1], (c.shape[0] if c.ndim == 3 else 1)
    if n and batch:
        scr, scc, zc = strides(c)
        k = get_kernel("triangular", "tri_update", c.dtype)
        k(_tri_grid(n, batch), TRI_BLOCK, n, t, beta, c, scr, scc, zc, int(lower), stream=stream, views=True)


# -- trsm --------------------------------------------------------------------------------------------
def _trsm_leaf(a, b, lower, unit, alpha, conj, stream):
    n, nrhs = b.shape[-2:]
    batch = b.shape[0] if b.ndim == 3 else 1
    if n == 0 or nrhs == 0 or batch == 0:
        return
    sar, sac, za = strides(a)
    sbr, sbc, zb = strides(b)
    k = get_kernel("triangular", "trsm_leaf", b.dtype)
    k((batch, min(ceil_div(nrhs, TRSM_THREADS), MAX_GRID_Y)), TRSM_THREADS, n, nrhs, alpha, a, sar, sac, za, b, sbr, sbc, zb,
      int(lower), int(unit), int(conj), stream=stream, views=True)


def _trtri_blocks(a, lower, unit, conj, stream):
    """The inverses of the diagonal blocks of the triangle of a (a view, or a stack of them), in one launch:
    w (nb, LEAF, LEAF) or (batch, nb, LEAF, LEAF), block d's inverse in w[..., d, :r, :r] (r = its rows)."""
    n = a.shape[-1]
    batch, nb = (a.shape[0] if a.ndim == 3 else 1), ceil_div(n, LEAF)
    w = empty(a.shape[:-2] + (nb, LEAF, LEAF), a.dtype)
    if batch:
        sar, sac, za = strides(a)
        k = get_kernel("triangular", "trtri_blocks", a.dtype)
        k((batch, nb), TRSM_LEAF, n, LEAF, a, sar, sac, za, w, int(lower), int(unit), int(conj), stream=stream,
          views=True)
    return w


def _trsm(a, b, lower, unit, alpha, conj, stream, w=None, x=None):
    """b = alpha inv(A) b with A the lower (else upper) triangle of the view a (conjugated with conj),
    side left, in place; with w (_trtri_blocks of a) the solution goes to x instead, b left holding the
    updated right-hand sides."""
    k = split(a.shape[-1])
    if not k and w is None:
        return _trsm_leaf(a, b, lower, unit, alpha, conj, stream)
    if not k:   # x = w_0 alpha b: the diagonal solve as a GEMM with the inverted block
        n = a.shape[-1]
        return mm(w[..., 0, :n, :n], b, x, alpha, 0.0, stream)
    a11, a22, b1, b2 = a[..., :k, :k], a[..., k:, k:], b[..., :k, :], b[..., k:, :]
    w1, w2 = (None, None) if w is None else (w[..., :k // LEAF, :, :], w[..., k // LEAF:, :, :])
    x1, x2 = (b1, b2) if x is None else (x[..., :k, :], x[..., k:, :])
    if lower:   # x1 = inv(A11) alpha b1; x2 = inv(A22) (alpha b2 - A21 x1)
        _trsm(a11, b1, lower, unit, alpha, conj, stream, w1, x1)
        mm(a[..., k:, :k], x1, b2, -1.0, alpha, stream, conj)
        _trsm(a22, b2, lower, unit, 1.0, conj, stream, w2, x2)
    else:       # x2 = inv(A22) alpha b2; x1 = inv(A11) (alpha b1 - A12 x2)
        _trsm(a22, b2, lower, unit, alpha, conj, stream, w2, x2)
        mm(a[..., :k, k:], x2, b1, -1.0, alpha, stream, conj)
        _trsm(a11, b1, lower, unit, 1.0, conj, stream, w1, x1)


def _solve(a, b, left, lower, unit, alpha, conj, stream):
    """trsm on checked operands: a the view with op(a) (left) or op(a)^T (right) in its `lower` triangle.
    Diagonal blocks by inversion (GEMMs into a temporary x of b's layout, copied back) when the triangle
    has more than one block and at least LEAF right-hand sides, else by trsm_leaf (the module docstring)."""
    bl = b if left else swap_last(b)          # solve op(a) bl = alpha bl, side left
    if a.shape[-1] <= LEAF or bl.shape[-1] < LEAF:
        return _trsm(a, bl, lower, unit, alpha, conj, stream)
    x = empty(b.shape, b.dtype)
    _trsm(a, bl, lower, unit, alpha, conj, stream, _trtri_blocks(a, lower, unit, conj, stream),
          x if left else swap_last(x))
    b.copy_from(x, stream)


def _trsm_checked(routine, a, b, side, lower, trans, unit_diagonal, alpha, stream, ndim):
    dtype = check_operands(routine, TYPES, a=a, b=b)
    if a.ndim != ndim or b.ndim != ndim:
        raise ValueError(f"{routine}: a and b must be {ndim}-D, got a {a.shape} and b {b.shape}")
    if ndim == 3 and a.shape[0] != b.shape[0]:
        raise ValueError(f"{routine}: batch sizes differ: a {a.shape}, b {b.shape}")
    left, (trans, conj) = parse_side(routine, side), op_flags(routine, trans, dtype)
    alpha = check_alpha(routine, alpha, dtype)
    check_square(routine, a, b.shape[-2] if left else b.shape[-1])
    check_writable(routine, "b", b, ("a", a))
    if b.size == 0:
        return b
    if alpha == 0:
        return b.fill(0, stream)
    at = swap_last(a) if trans != (not left) else a   # left: op(a); right: op(a)^T, solving for b.T
    _solve(at, b, left, lower != (trans != (not left)), unit_diagonal, alpha, conj, stream)
    return b


def trsm(a, b, *, side="left", lower=False, trans=False, unit_diagonal=False, alpha=1.0, stream=None):
    """Solves op(a) x = alpha b (side 'left') or x op(a) = alpha b ('right') for x with a triangular
    (the `lower`, else upper, triangle of a read); x overwrites b, which is returned. A zero on the
    diagonal gives inf/NaN as in BLAS (no check: getrf_batched reports singular matrices)."""
    return _trsm_checked("trsm", a, b, side, lower, trans, unit_diagonal, alpha, stream, 2)


def trsm_batched(a, b, *, side="left", lower=False, trans=False, unit_diagonal=False, alpha=1.0, stream=None):
    """trsm on stacks: a (batch, k, k), b (batch, m, n), each b[i] overwritten by its solution; one launch
    per diagonal block and per GEMM for the whole batch. Returns b."""
    return _trsm_checked("trsm_batched", a, b, side, lower, trans, unit_diagonal, alpha, stream, 3)


# -- trmm --------------------------------------------------------------------------------------------
def _trmm(a, b, c, lower, unit, alpha, conj, stream):
    """c = alpha A b with A the lower (else upper) triangle of the view a (conjugated with conj), side
    left; c a separate output. The diagonal blocks first, all at once (tri_fill and a batched GEMM per
    uniform stack), then the off-diagonal updates."""
    for start, count, rows in leaf_blocks(a.shape[-1]):
        dense = tri_dense(blocks(a, start, count, rows, diagonal=True), lower, unit, stream=stream, conj=conj)
        mm(dense, blocks(b, start, count, rows), blocks(c, start, count, rows), alpha, 0.0, stream)
    _trmm_off_diagonal(a, b, c, lower, alpha, conj, stream)


def _trmm_off_diagonal(a, b, c, lower, alpha, conj, stream):
    k = split(a.shape[-1])
    if not k:
        return
    _trmm_off_diagonal(a[:k, :k], b[:k], c[:k], lower, alpha, conj, stream)
    _trmm_off_diagonal(a[k:, k:], b[k:], c[k:], lower, alpha, conj, stream)
    if lower:   # c2 += alpha A21 b1
        mm(a[k:, :k], b[:k], c[k:], alpha, 1.0, stream, conj)
    else:       # c1 += alpha A12 b2
        mm(a[:k, k:], b[k:], c[:k], alpha, 1.0, stream, conj)


def trmm(a, b, *, side="left", lower=False, trans=False, unit_diagonal=False, alpha=1.0, stream=None):
    """c = alpha op(a) @ b (side 'left') or alpha b @ op(a) ('right') with a triangular (the `lower`,
    else upper, triangle of a read); returns c, a new array (cuBLAS's out-of-place trmm)."""
    dtype = check_operands("trmm", TYPES, a=a, b=b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"trmm: a and b must be 2-D, got a {a.shape} and b {b.shape}")
    left, (trans, conj) = parse_side("trmm", side), op_flags("trmm", trans, dtype)
    alpha = check_alpha("trmm", alpha, dtype)
    check_square("trmm", a, b.shape[0] if left else b.shape[1])
    c = empty(b.shape, b.dtype)
    if c.size == 0:
        return c
    if alpha == 0:
        return c.fill(0, stream)
    flip = trans != (not left)
    _trmm(a.T if flip else a, b if left else b.T, c if left else c.T, lower != flip, unit_diagonal, alpha, conj, stream)
    return c
