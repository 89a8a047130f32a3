"""Symmetric and Hermitian level-3 BLAS: symm, syrk, syr2k; hemm, herk, her2k (kernels: cuda_src/triangular.cu
for the triangles; the FLOPs in the GEMM kernels through gpublas.gemm).

    c = gpublas.symm(a, b, lower=True)                 # a @ b with a symmetric, its lower triangle read
    gpublas.syrk(a, c, lower=True, beta=1.0)           # tril(c) += a @ a.T, in place
    c = gpublas.syr2k(a, b, trans=True)                # triu(c) = a.T @ b + b.T @ a, a new c
    gpublas.herk(z, c, trans="C", alpha=2.0)           # triu(c) = 2 z^H @ z, complex z, in place

Arguments as scipy.linalg.blas's ?symm / ?syrk / ?syr2k: lower (default False: the upper triangle),
side 'left' / 'right' (symm), trans (syrk, syr2k: False for a @ a.T, True for a.T @ a), alpha, beta.
syrk and syr2k write only the lower or upper triangle of c; the other is never read or written (a new
c's other triangle is zeros). BLAS semantics: beta == 0 never reads c; alpha == 0 reads neither a nor b.
Complex64 and complex128 as cuBLAS's csymm / csyrk / csyr2k (Z too): symmetric, nothing conjugated; alpha
and beta may be complex; syrk and syr2k take trans 'N' or 'T' only ('C' is refused, as cuBLAS does).

symm densifies a (tri_fill mirrors the stored triangle, one pass over a^2 elements) and runs one GEMM:
the whole of symm's 2 m^2 n FLOPs is GEMM's. syrk and syr2k recurse on halves of c split at a multiple
of LEAF: the off-diagonal block of the triangle is one GEMM (two for syr2k), down to diagonal blocks of
LEAF rows, whose dense products all go through one batched GEMM into a temporary stack that one
tri_update adds into c's triangle (one more of each for a short last block). All the FLOPs are GEMM's,
LEAF / n of them the diagonal blocks' other triangles. The products op(a)_i op(a)_j^T read op(a)_j
transposed where it is row-major (trans 'N'): every GEMM kernel takes that orientation, the simulator's
within 1.5x of the untransposed one (cuda_src/gemm.cu's direct_tile), so no transposed copy is made.

The Hermitian routines (complex only, as cuBLAS's chemm / cherk / cher2k and Z) are the same code: hemm
densifies a Hermitian (the mirrored triangle conjugated, the diagonal's imaginary parts taken as 0), herk and
her2k run the recursion with products a @ b^H (GEMM's trans 'C'), take trans 'N' or 'C' ('T' refused), a real
beta (and alpha for herk), and set the imaginary parts of c's diagonal to 0, as BLAS does.
"""
from ..core.array import empty
from ..core.creation import zeros
from .blas1 import scale_output
from .blas2 import TYPES
from .blas3 import gemm, gemm_batched
from .blas3_tri import (blocks, check_writable, leaf_blocks, mm, parse_op, parse_side, parse_trans, split, tri_dense,
                        tri_update)
from ..core.checks import check_operands, swap_last
from ..runtime.dtypes import COMPLEX


def _output(routine, c, shape, beta, dtype, inputs):
    if c is None:
        if beta != 0:
            raise ValueError(f"{routine}: beta = {beta} needs an output c to scale; pass c or leave beta at 0")
        return zeros(shape, dtype)
    if c.shape != shape:
        desc = ", ".join(f"{n} {x.shape}" for n, x in inputs)
        raise ValueError(f"{routine}: c has shape {c.shape}, expected {shape} for {desc}")
    check_writable(routine, "c", c, *inputs)
    return c


def _symm(routine, a, b, c, side, lower, alpha, beta, stream):
    check_operands(routine, COMPLEX if routine == "hemm" else TYPES, a=a, b=b, **({} if c is None else dict(c=c)))
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"{routine}: a and b must be 2-D, got a {a.shape} and b {b.shape}")
    left = parse_side(routine, side)
    order = b.shape[0] if left else b.shape[1]
    if a.shape != (order, order):
        raise ValueError(f"{routine}: side {'left' if left else 'right'} needs a of shape ({order}, {order}) for "
                         f"b {b.shape}, got a {a.shape}")
    c = _output(routine, c, b.shape, beta, b.dtype, [("a", a), ("b", b)])
    if c.size == 0:
        return c
    if alpha == 0 or order == 0:
        return scale_output(c, beta, stream=stream)
    full = hermitian_dense(a, lower, stream) if routine == "hemm" else tri_dense(a, lower, mirror=True, stream=stream)
    return mm(full, b, c, alpha, beta, stream) if left else mm(b, full, c, alpha, beta, stream)


def symm(a, b, c=None, *, side="left", lower=False, alpha=1.0, beta=0.0, stream=None):
    """c = alpha a @ b + beta c (side 'left') or alpha b @ a + beta c ('right') with a symmetric, stored in
    its `lower` (else upper) triangle; returns c (new when not given)."""
    return _symm("symm", a, b, c, side, lower, alpha, beta, stream)


def _product(a, b, c, alpha, beta, herm, stream):
    """c = alpha a @ b^T + beta c on views (matrices or stacks), or with herm alpha a @ b^H (complex GEMM, trans_b
    'C')."""
    if herm:
        return (gemm_batched if c.ndim == 3 else gemm)(a, b, c, alpha=alpha, beta=beta, trans_b="C", stream=stream)
    return mm(a, swap_last(b), c, alpha, beta, stream)


def _syr2k(a, b, c, alpha, beta, stream, herm=False):
    """The lower triangle of the view c = alpha (a b^T + b a^T) + beta c (b None: alpha a a^T, syrk); with herm
    alpha a b^H + conj(alpha) b a^H + beta c (b None: alpha a a^H, herk). The diagonal blocks (those of the
    recursion's leaves: LEAF rows, the last one shorter) all at once: one batched product into a temporary stack
    and one tri_update for the full blocks, one more of each for a short last block; then the recursion's
    off-diagonal products."""
    n = c.shape[0]
    alpha2 = complex(alpha).conjugate() if herm else alpha   # the second product's scalar
    for start, count, rows in leaf_blocks(n):
        ab = blocks(a, start, count, rows)
        bb = ab if b is None else blocks(b, start, count, rows)
        t = _product(ab, bb, empty((count, rows, rows), c.dtype), alpha, 0.0, herm, stream)
        if b is not None:
            _product(bb, ab, t, alpha2, 1.0, herm, stream)
        tri_update(t, beta, blocks(c, start, count, rows, diagonal=True), True, stream)
    _off_diagonal(a, b, c, alpha, alpha2, beta, stream, herm)


def _off_diagonal(a, b, c, alpha, alpha2, beta, stream, herm):
    """_syr2k's products off the diagonal blocks: the recursion on halves split at multiples of LEAF."""
    k = split(c.shape[0])
    if not k:
        return
    b1, b2 = (a[:k], a[k:]) if b is None else (b[:k], b[k:])
    _off_diagonal(a[:k], None if b is None else b1, c[:k, :k], alpha, alpha2, beta, stream, herm)
    _off_diagonal(a[k:], None if b is None else b2, c[k:, k:], alpha, alpha2, beta, stream, herm)
    _product(a[k:], b1, c[k:, :k], alpha, beta, herm, stream)
    if b is not None:
        _product(b2, a[:k], c[k:, :k], alpha2, 1.0, herm, stream)


def _operands(routine, a, b, c, types):
    operands = dict(a=a) if b is None else dict(a=a, b=b)
    dtype = check_operands(routine, types, **operands, **({} if c is None else dict(c=c)))
    for name, x in operands.items():
        if x.ndim != 2:
            raise ValueError(f"{routine}: {name} must be 2-D, got shape {x.shape}")
    if b is not None and b.shape != a.shape:
        raise ValueError(f"{routine}: a {a.shape} and b {b.shape} must have the same shape")
    return dtype, list(operands.items())


def _rank_k(routine, a, b, c, trans, lower, alpha, beta, stream):
    dtype, inputs = _operands(routine, a, b, c, TYPES)
    if dtype.kind == "c" and parse_op(routine, trans) == "C":
        raise ValueError(f"{routine}: trans {trans!r} (conjugate transpose) is not defined for a complex symmetric "
                         f"{routine}; pass 'N' or 'T' (cuBLAS refuses it too; her{routine[3:]} is the Hermitian one)")
    trans = parse_trans(routine, trans)
    opa, opb = (a.T, None if b is None else b.T) if trans else (a, b)   # op(a) is n x k
    n = opa.shape[0]
    c = _output(routine, c, (n, n), beta, a.dtype, inputs)
    if n == 0:
        return c
    ct = c if lower else c.T   # the upper triangle of c is the lower triangle of c.T
    if alpha == 0 or opa.shape[1] == 0:
        tri_update(None, beta, ct, True, stream)
    else:
        _syr2k(opa, opb, ct, alpha, beta, stream)
    return c


def syrk(a, c=None, *, trans=False, lower=False, alpha=1.0, beta=0.0, stream=None):
    """c = alpha op(a) @ op(a).T + beta c on the `lower` (else upper) triangle of c, with op(a) = a
    (n x k) or a.T (trans, a k x n); returns c (new when not given; its other triangle zeros)."""
    return _rank_k("syrk", a, None, c, trans, lower, alpha, beta, stream)


def syr2k(a, b, c=None, *, trans=False, lower=False, alpha=1.0, beta=0.0, stream=None):
    """c = alpha (op(a) @ op(b).T + op(b) @ op(a).T) + beta c on the `lower` (else upper) triangle of c;
    returns c (new when not given; its other triangle zeros)."""
    return _rank_k("syr2k", a, b, c, trans, lower, alpha, beta, stream)


# -- Hermitian: hemm, herk, her2k ----------------------------------------------------------------------
def _real(routine, name, x):
    if complex(x).imag != 0:
        raise ValueError(f"{routine}: {name} = {x} must be real (cuBLAS's {routine} takes a real {name})")
    return complex(x).real


def _diagonal_imag(c):
    """The imaginary parts of the diagonal of the n x n complex view c, as a (strided) view."""
    im = c.imag
    return im._view((c.shape[0],), (im.strides[0] + im.strides[1],))


def hermitian_dense(a, lower, stream=None):
    """The dense Hermitian matrix (contiguous, new) stored in the `lower` (else upper) triangle of the complex view
    a, the imaginary parts of its diagonal taken as 0 (BLAS's rule): tri_fill's mirror, then the mirrored
    triangle's imaginary parts negated (tri_update with beta -1 on the .imag view) and the diagonal's zeroed."""
    d = tri_dense(a, lower, mirror=True, stream=stream)
    if d.size:
        tri_update(None, -1.0, d.imag, not lower, stream)
        _diagonal_imag(d).fill(0, stream)
    return d


def hemm(a, b, c=None, *, side="left", lower=False, alpha=1.0, beta=0.0, stream=None):
    """c = alpha a @ b + beta c (side 'left') or alpha b @ a + beta c ('right') with a Hermitian, stored in its
    `lower` (else upper) triangle, its diagonal's imaginary parts taken as 0; complex64 / complex128 only
    (cuBLAS's chemm / zhemm); returns c (new when not given)."""
    return _symm("hemm", a, b, c, side, lower, alpha, beta, stream)


def _her_rank_k(routine, a, b, c, trans, lower, alpha, beta, stream):
    dtype, inputs = _operands(routine, a, b, c, COMPLEX)
    if str(trans).upper() == "T" or type(trans) is int and trans == 1:
        raise ValueError(f"{routine}: trans {trans!r} (transpose) is not defined for the Hermitian {routine}; pass "
                         f"'N' or 'C' (cuBLAS refuses it too; syr{routine[3:]} is the symmetric one)")
    conj_t = parse_trans(routine, trans)               # op(a) = a^H (n x k) for 'C' / True / 2
    beta = _real(routine, "beta", beta)
    if b is None:
        alpha = _real(routine, "alpha", alpha)
    n = a.shape[1] if conj_t else a.shape[0]
    c = _output(routine, c, (n, n), beta, dtype, inputs)
    if n == 0:
        return c
    # the triangle computed is the lower one of ct: c, or c.T = conj(c) for the upper triangle, whose products are
    # the conjugates: op(a) op(b)^H becomes conj(op(a)) conj(op(b))^H with alpha conjugated. conj(a^H) = a.T is a
    # view; conj(a) (trans 'N', upper) is a new array
    ct = c if lower else c.T
    if alpha == 0 or a.shape[0 if conj_t else 1] == 0:
        if beta == 1:
            return c   # BLAS's quick return: c untouched, the imaginary parts of its diagonal too
        tri_update(None, beta, ct, True, stream)
    else:
        if lower:
            op = (lambda x: x.conj().T) if conj_t else (lambda x: x)
        else:
            op, alpha = ((lambda x: x.T) if conj_t else (lambda x: x.conj())), complex(alpha).conjugate()
        _syr2k(op(a), None if b is None else op(b), ct, alpha, beta, stream, herm=True)
    _diagonal_imag(c).fill(0, stream)
    return c


def herk(a, c=None, *, trans=False, lower=False, alpha=1.0, beta=0.0, stream=None):
    """c = alpha op(a) @ op(a)^H + beta c on the `lower` (else upper) triangle of c, with op(a) = a (n x k) or
    a^H (trans 'C' or True, a k x n), alpha and beta real, the imaginary parts of c's diagonal set to 0;
    complex64 / complex128 only (cuBLAS's cherk / zherk); returns c (new when not given; its other triangle
    zeros)."""
    return _her_rank_k("herk", a, None, c, trans, lower, alpha, beta, stream)


def her2k(a, b, c=None, *, trans=False, lower=False, alpha=1.0, beta=0.0, stream=None):
    """c = alpha op(a) @ op(b)^H + conj(alpha) op(b) @ op(a)^H + beta c on the `lower` (else upper) triangle of
    c, beta real, the imaginary parts of c's diagonal set to 0 (cuBLAS's cher2k / zher2k); returns c (new when
    not given; its other triangle zeros)."""
    return _her_rank_k("her2k", a, b, c, trans, lower, alpha, beta, stream)
