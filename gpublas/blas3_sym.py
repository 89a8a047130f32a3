"""Symmetric level-3 BLAS: symm, syrk and syr2k (kernels: cuda_src/triangular.cu for the triangles; the
FLOPs in the GEMM kernels through gpublas.gemm).

    c = gpublas.symm(a, b, lower=True)                 # a @ b with a symmetric, its lower triangle read
    gpublas.syrk(a, c, lower=True, beta=1.0)           # tril(c) += a @ a.T, in place
    c = gpublas.syr2k(a, b, trans=True)                # triu(c) = a.T @ b + b.T @ a, a new c

Arguments as scipy.linalg.blas's ?symm / ?syrk / ?syr2k: lower (default False: the upper triangle),
side 'left' / 'right' (symm), trans (syrk, syr2k: False for a @ a.T, True for a.T @ a), alpha, beta.
syrk and syr2k write only the lower or upper triangle of c; the other is never read or written (a new
c's other triangle is zeros). BLAS semantics: beta == 0 never reads c; alpha == 0 reads neither a nor b.
Complex64 and complex128 as cuBLAS's csymm / csyrk / csyr2k (Z too): symmetric, nothing conjugated; alpha
and beta may be complex; syrk and syr2k take trans 'N' or 'T' only ('C' is refused, as cuBLAS does).

symm densifies a (tri_fill mirrors the stored triangle, one pass over a^2 elements) and runs one GEMM:
the whole of symm's 2 m^2 n FLOPs is GEMM's. syrk and syr2k recurse on halves of c split at a multiple
of LEAF: the off-diagonal block of the triangle is one GEMM (two for syr2k), the diagonal blocks recurse
down to LEAF rows, whose products go through a small dense GEMM into a temporary that tri_update adds
into c's triangle. All but about LEAF / n of the FLOPs are GEMM's.
"""
from .array import empty
from .creation import zeros
from .blas1 import scale_output
from .blas2 import TYPES
from .blas3_tri import check_writable, mm, parse_side, parse_trans, split, tri_dense, tri_update
from .checks import check_operands


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


def symm(a, b, c=None, *, side="left", lower=False, alpha=1.0, beta=0.0, stream=None):
    """c = alpha a @ b + beta c (side 'left') or alpha b @ a + beta c ('right') with a symmetric, stored in
    its `lower` (else upper) triangle; returns c (new when not given)."""
    check_operands("symm", TYPES, a=a, b=b, **({} if c is None else dict(c=c)))
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"symm: a and b must be 2-D, got a {a.shape} and b {b.shape}")
    left = parse_side("symm", side)
    order = b.shape[0] if left else b.shape[1]
    if a.shape != (order, order):
        raise ValueError(f"symm: side {'left' if left else 'right'} needs a of shape ({order}, {order}) for "
                         f"b {b.shape}, got a {a.shape}")
    c = _output("symm", c, b.shape, beta, b.dtype, [("a", a), ("b", b)])
    if c.size == 0:
        return c
    if alpha == 0 or order == 0:
        return scale_output(c, beta, stream=stream)
    full = tri_dense(a, lower, mirror=True, stream=stream)
    return mm(full, b, c, alpha, beta, stream) if left else mm(b, full, c, alpha, beta, stream)


def _syr2k(a, b, c, alpha, beta, stream):
    """The lower triangle of the view c = alpha (a b^T + b a^T) + beta c (b None: alpha a a^T, syrk)."""
    n, k = c.shape[0], split(c.shape[0])
    if not k:
        if b is None:
            t = mm(a, a.T, empty((n, n), c.dtype), alpha, 0.0, stream)
        else:
            t = mm(a, b.T, empty((n, n), c.dtype), alpha, 0.0, stream)
            mm(b, a.T, t, alpha, 1.0, stream)
        return tri_update(t, beta, c, True, stream)
    b1, b2 = (a[:k], a[k:]) if b is None else (b[:k], b[k:])
    _syr2k(a[:k], None if b is None else b1, c[:k, :k], alpha, beta, stream)
    _syr2k(a[k:], None if b is None else b2, c[k:, k:], alpha, beta, stream)
    mm(a[k:], b1.T, c[k:, :k], alpha, beta, stream)
    if b is not None:
        mm(b2, a[:k].T, c[k:, :k], alpha, 1.0, stream)


def _rank_k(routine, a, b, c, trans, lower, alpha, beta, stream):
    operands = dict(a=a) if b is None else dict(a=a, b=b)
    dtype = check_operands(routine, TYPES, **operands, **({} if c is None else dict(c=c)))
    for name, x in operands.items():
        if x.ndim != 2:
            raise ValueError(f"{routine}: {name} must be 2-D, got shape {x.shape}")
    if b is not None and b.shape != a.shape:
        raise ValueError(f"{routine}: a {a.shape} and b {b.shape} must have the same shape")
    if dtype.kind == "c" and (str(trans).upper() == "C" or not isinstance(trans, (bool, str)) and trans == 2):
        raise ValueError(f"{routine}: trans {trans!r} (conjugate transpose) is not defined for a complex symmetric "
                         f"{routine}; pass 'N' or 'T' (cuBLAS refuses it too)")
    trans = parse_trans(routine, trans)
    opa, opb = (a.T, None if b is None else b.T) if trans else (a, b)   # op(a) is n x k
    n = opa.shape[0]
    c = _output(routine, c, (n, n), beta, a.dtype, list(operands.items()))
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
