"""Symmetric, Hermitian and triangular level-2 BLAS: symv, syr, hemv, her, trmv, trsv, as the level-3 routines
with one column (gpublas.blas.blas3_tri, blas3_sym), whose GEMM calls become gemv (and ger) for one column.

    y = gpublas.symv(a, x, lower=True)              # a @ x with a symmetric, its lower triangle read
    gpublas.syr(x, a, alpha=0.5)                   # triu(a) += 0.5 outer(x, x), in place
    gpublas.trmv(a, x, trans=True)                 # x = triu(a).T @ x, in place
    gpublas.trsv(a, x, lower=True)                 # x = inv(tril(a)) @ x, in place

Arguments as scipy.linalg.blas's ?symv / ?syr / ?trmv / ?trsv: lower (default False: the upper
triangle of a), trans (False/'N', True/'T', 'C': conjugate transpose), unit_diagonal (scipy's diag=1),
alpha and beta. x may be any 1-D view (a strided one is the column x[:, None] of the level-3 routines).
BLAS semantics: beta == 0 never reads y; alpha == 0 reads neither a nor x. Every routine also takes
complex64 / complex128: symv and syr are cuBLAS's csymv / csyr (Z too: symmetric, nothing conjugated;
alpha and beta may be complex), trmv and trsv ctrmv / ctrsv (trans 'C' the conjugate transpose); hemv and
her are the Hermitian forms of symv and syr (complex only: chemv / cher, Z too; her's alpha real, the
imaginary parts of a's diagonal taken as 0 by hemv and set to 0 by her).
"""
from .blas2 import TYPES
from .blas3_sym import hemm, herk, symm, syrk
from .blas3_tri import trmm, trsm
from ..core.checks import check_operands
from ..runtime.dtypes import COMPLEX


def _vector(routine, a, x, types=TYPES):
    check_operands(routine, types, a=a, x=x)
    if a.ndim != 2 or x.ndim != 1 or a.shape != (x.shape[0], x.shape[0]):
        raise ValueError(f"{routine}: a must be n x n and x of length n; got a {a.shape} and x {x.shape}")


def symv(a, x, y=None, *, alpha=1.0, beta=0.0, lower=False, stream=None):
    """y = alpha a @ x + beta y with a symmetric, stored in its `lower` (else upper) triangle; returns y
    (new when not given)."""
    _vector("symv", a, x)
    if y is not None and y.shape != x.shape:
        raise ValueError(f"symv: y has shape {y.shape}, expected {x.shape} for a {a.shape}")
    c = symm(a, x[:, None], None if y is None else y[:, None], lower=lower, alpha=alpha, beta=beta, stream=stream)
    return c[:, 0] if y is None else y


def syr(x, a, *, alpha=1.0, lower=False, stream=None):
    """a += alpha outer(x, x) on the `lower` (else upper) triangle of a, in place (the other triangle is
    not touched); returns a."""
    _vector("syr", a, x)
    syrk(x[:, None], a, lower=lower, alpha=alpha, beta=1.0, stream=stream)
    return a


def hemv(a, x, y=None, *, alpha=1.0, beta=0.0, lower=False, stream=None):
    """y = alpha a @ x + beta y with a Hermitian, stored in its `lower` (else upper) triangle (its diagonal's
    imaginary parts taken as 0); complex only; returns y (new when not given)."""
    _vector("hemv", a, x, COMPLEX)
    if y is not None and y.shape != x.shape:
        raise ValueError(f"hemv: y has shape {y.shape}, expected {x.shape} for a {a.shape}")
    c = hemm(a, x[:, None], None if y is None else y[:, None], lower=lower, alpha=alpha, beta=beta, stream=stream)
    return c[:, 0] if y is None else y


def her(x, a, *, alpha=1.0, lower=False, stream=None):
    """a += alpha outer(x, conj(x)) on the `lower` (else upper) triangle of a, in place, alpha real, the
    imaginary parts of a's diagonal set to 0 (the other triangle is not touched); complex only; returns a."""
    _vector("her", a, x, COMPLEX)
    herk(x[:, None], a, lower=lower, alpha=alpha, beta=1.0, stream=stream)
    return a


def trmv(a, x, *, lower=False, trans=False, unit_diagonal=False, stream=None):
    """x = op(a) @ x with a triangular (its `lower`, else upper, triangle read), in place; returns x."""
    _vector("trmv", a, x)
    c = trmm(a, x[:, None], lower=lower, trans=trans, unit_diagonal=unit_diagonal, stream=stream)
    if x.size:
        x.copy_from(c[:, 0], stream)
    return x


def trsv(a, x, *, lower=False, trans=False, unit_diagonal=False, stream=None):
    """Solves op(a) z = x with a triangular (its `lower`, else upper, triangle read); z overwrites x,
    which is returned."""
    _vector("trsv", a, x)
    trsm(a, x[:, None], lower=lower, trans=trans, unit_diagonal=unit_diagonal, stream=stream)
    return x
