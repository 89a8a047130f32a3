"""Complex GEMM (cuBLAS's cgemm / zgemm and their batched forms) composed of real GEMMs on the
parts, so complex runs the real kernels the planner picks (gemm_plan), never a kernel of its own:

    op(a) @ op(b) = (Ar Br - Ai Bi) + i (Ar Bi + Ai Br)          4M: four real GEMMs of the same size
                  = (T1 - T2) + i ((Ar + Ai)(Br + Bi) - T1 - T2)   3M: three, T1 = Ar Br, T2 = Ai Bi

op is 'N', 'T' or 'C' (False / True mean 'N' / 'T'); 'C' conjugates through the sign of the imaginary
part, which is copied out negated. The parts are copied out of the interleaved arrays once (O(mk + kn)),
a real alpha goes into the real GEMMs, and P + iQ is written into c's .real / .imag views when
beta == 0 (c is never read) or added as alpha (P + iQ) + beta c otherwise (O(mn)). 3M trades a fourth
GEMM for two additions and a slightly larger error bound (the sum Ar + Ai cancels); it runs from
THREE_M_MIN up, where the GEMMs dominate. alpha == 0 or K == 0 reads neither a nor b.
"""
import numpy as np

from . import dtypes
from .array import DeviceArray, empty
from .checks import check_operands
from .layout import may_share_memory

THREE_M_MIN = 512  # min(m, n, k) from which 3M runs (tests lower it)
_OPS = {False: "N", True: "T", "N": "N", "T": "T", "C": "C", "n": "N", "t": "T", "c": "C"}


def trans_op(trans, routine):
    """'N', 'T' or 'C' for a trans argument (False, True, 'N', 'T', 'C'), or ValueError."""
    try:
        return _OPS[trans]
    except (KeyError, TypeError):
        raise ValueError(f"{routine}: trans must be False, True, 'N', 'T' or 'C', got {trans!r}") from None


def is_complex(*arrays):
    return any(isinstance(x, DeviceArray) and x.dtype.kind == "c" for x in arrays)


def _parts(x, conj):
    """Contiguous real and imaginary parts of x; the imaginary one negated for op 'C'."""
    return x.real.copy(), (-x.imag if conj else x.imag.copy())


def _output(routine, a, b, c, shape, beta):
    if c is None:
        if beta != 0:
            raise ValueError(f"{routine}: beta = {beta} needs an output c to scale; pass c or leave beta at 0")
        return empty(shape, a.dtype)
    if c.shape != shape:
        raise ValueError(f"{routine}: c has shape {c.shape}, expected {shape} for a {a.shape}, b {b.shape}")
    if may_share_memory(c, a) or may_share_memory(c, b):
        raise ValueError(f"{routine}: c {c.shape} shares memory with an input; the output must not overlap one")
    return c


def gemm(real_gemm, a, b, c=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, **kw):
    """real_gemm's product (blas3.gemm or gemm_batched) for complex a, b, c of one dtype."""
    routine = real_gemm.__name__
    dtype = check_operands(routine, dtypes.COMPLEX, a=a, b=b, **({} if c is None else {"c": c}))
    ta, tb = trans_op(trans_a, routine), trans_op(trans_b, routine)
    nd = 2 if routine == "gemm" else 3
    if a.ndim != nd or b.ndim != nd or (nd == 3 and a.shape[0] != b.shape[0]):
        raise ValueError(f"{routine}: a {a.shape} and b {b.shape} must be {nd}-D" + (" with one batch size" * (nd == 3)))
    m, ka = a.shape[-2:][::-1] if ta != "N" else a.shape[-2:]
    kb, n = b.shape[-2:][::-1] if tb != "N" else b.shape[-2:]
    if ka != kb:
        raise ValueError(f"{routine}: inner dimensions differ: op(a) is {m}x{ka} but op(b) is {kb}x{n} "
                         f"(a {a.shape} trans {ta}, b {b.shape} trans {tb})")
    shape = a.shape[:-2] + (m, n)
    c = _output(routine, a, b, c, shape, beta)
    alpha, beta = complex(alpha), complex(beta)
    if alpha == 0 or ka == 0 or c.size == 0:  # reads neither a nor b; beta == 0 does not read c
        return c.fill(0) if beta == 0 else c.__imul__(beta)
    (ar, ai), (br, bi) = _parts(a, ta == "C"), _parts(b, tb == "C")
    s = alpha.real if alpha.imag == 0 else 1.0  # a real alpha scales inside the real GEMMs
    args = dict(trans_a=ta != "N", trans_b=tb != "N", **kw)
    if min(m, n, ka) >= THREE_M_MIN:
        p, t2 = real_gemm(ar, br, alpha=s, **args), real_gemm(ai, bi, alpha=s, **args)
        ar += ai
        br += bi
        q = real_gemm(ar, br, alpha=s, **args)
        q -= p
        q -= t2
        p -= t2
    else:
        p, q = real_gemm(ar, br, alpha=s, **args), real_gemm(ar, bi, alpha=s, **args)
        real_gemm(ai, bi, p, alpha=-s, beta=1.0, **args)
        real_gemm(ai, br, q, alpha=s, beta=1.0, **args)
    if alpha.imag == 0 and beta == 0:
        c.real[...] = p
        c.imag[...] = q
        return c
    t = empty(shape, dtype)
    t.real[...] = p
    t.imag[...] = q
    if alpha.imag != 0:
        t *= alpha
    if beta == 0:
        c[...] = t
    else:
        c *= beta
        c += t
    return c
