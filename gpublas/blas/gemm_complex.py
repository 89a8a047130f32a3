"""Complex GEMM (cuBLAS's cgemm / zgemm and their batched forms) composed of real GEMMs, so complex runs
the real kernels the planner picks (gemm_plan), never a GEMM kernel of its own. With op(a) = Ar + i Ai
(m x k), z = alpha op(b) = Zr + i Zi (k x n) and c = P + i Q:

    1M (4M's work in one real GEMM, m x 2n x 2k): c seen as m x 2n reals = a seen as m x 2k reals @ B2,
        B2 = z's elements as real 2x2 blocks [[Zr, Zi], [-Zi, Zr]]   (op 'C' on a: [[Zr, Zi], [Zi, -Zr]])
    3M (three real products, one batched GEMM): T0, T1, T2 = Ar Br, Ai Bi, (Ar + Ai)(Br + Bi),
        P = T0 - T1, Q = T2 - T0 - T1, c = alpha (P + i Q) + beta c

1M does the work of four real products (8mnk flops) with one pass over b (complex_split writes B2) and,
where op(a) = a and c have unit stride along their rows and beta is real, none over a or c: the real
GEMM reads a and writes c in place (else op(a) is copied into a real workspace, or the GEMM writes one
and complex_combine adds it to c). 3M does three products' work (6mnk flops) for three passes (split
a, split b, combine) and a slightly larger error bound (the sums Ar + Ai cancel); it runs from
THREE_M_MIN up, where the GEMM work it saves outweighs its passes. The passes
(cuda_src/complex_parts.cu) read each operand once as the strided view op(x) is (a transpose or a slice
is never copied first) and fold op 'C''s conjugation and alpha into the planes they write, so every real
GEMM is a plain NN product of padded workspaces. alpha == 0 or K == 0 reads neither a nor b; beta == 0
never reads c.
"""
from ..runtime import backends, dtypes, source
from ..core.array import DeviceArray, empty
from ..core.checks import check_operands
from ..runtime.launch import ceil_div, get_kernel, simulated
from ..core.layout import may_share_memory

# Where 3M runs: from size(m, n, k) = 3 m n k / (m n + n k + m k) (n for a square product; the work
# the GEMM saves per element the passes touch, scaled) up, per backend. sim: measured (CPU time, one
# thread, complex64 and complex128, square 64..512 and skinny: 1M and 3M cross near 160); cuda: not yet
# measured on a GPU, where the passes are cheap beside the GEMMs but 3M's four launches are not: large
# products only.
THREE_M_MIN = {"sim": 160, "cuda": 1024}
_OPS = {False: "N", True: "T", "N": "N", "T": "T", "C": "C", "n": "N", "t": "T", "c": "C"}
_DEFINES = source.int_defines("complex_parts.cu", "PARTS_")
BLOCK = (_DEFINES["PARTS_BLOCK_X"], _DEFINES["PARTS_BLOCK_Y"])
MAX_GRID = 65535  # grid.y and grid.z
ROW_PAD = 64      # bytes past a workspace row (rounded up to 16 bytes): no power-of-two leading dimension
MATRIX_GAP = 1088  # bytes past a 4 KB multiple between workspace matrices: planes written in one pass do
                   # not alias in a CPU's caches (4K aliasing made a three-plane split 4x slower on the sim)


def trans_op(trans, routine):
    """'N', 'T' or 'C' for a trans argument (False, True, 'N', 'T', 'C'), or ValueError."""
    try:
        return _OPS[trans]
    except (KeyError, TypeError):
        raise ValueError(f"{routine}: trans must be False, True, 'N', 'T' or 'C', got {trans!r}") from None


def is_complex(*arrays):
    return any(isinstance(x, DeviceArray) and x.dtype.kind == "c" for x in arrays)


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


def gemm(routine, gemm_batched, a, b, c=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, **kw):
    """`routine` ('gemm' or 'gemm_batched') for complex a, b, c of one dtype, its real products run by
    gemm_batched (blas3's; kw: its stream= and kernel=)."""
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
    run = _gemm_3m if size(m, n, ka) >= THREE_M_MIN[backends.current().name] else _gemm_1m
    run(gemm_batched, a, b, c, ta, tb, alpha, beta, kw)
    return c


def size(m, n, k):
    """3 m n k / (m n + n k + m k): the size of the square product whose GEMM work per element of its
    operands and result is that of an m x n x k one (THREE_M_MIN's measure)."""
    return 3 * m * n * k / (m * n + n * k + m * k)


def _gemm_1m(gemm_batched, a, b, c, ta, tb, alpha, beta, kw):
    """c = alpha op(a) op(b) + beta c as one real GEMM (m, 2n, 2k) (the module's docstring)."""
    (batch, m, n), real, stream = _dims(c), dtypes.real_of(c.dtype), kw.get("stream")
    k = b.shape[-1 if tb != "N" else -2]
    sa, sb = (-1.0 if t == "C" else 1.0 for t in (ta, tb))
    zr, zi = (alpha.real, -alpha.imag * sb), (alpha.imag, alpha.real * sb)  # Zr, Zi as (Br, Bi) coefficients
    b2 = workspace(batch, 2 * k, 2 * n, real)
    ld = b2.strides[1] // real.itemsize
    split(b, tb, b2, 2 * ld, 2, [(0, *zr), (1, *zi), (ld, -sa * zi[0], -sa * zi[1]), (ld + 1, sa * zr[0], sa * zr[1])],
          stream)
    if ta == "N" and a.strides[-1] == a.itemsize:
        a2 = as_reals(a)
    else:  # op(a) copied into interleaved rows (its conjugation is in b2's signs)
        a2 = workspace(batch, m, 2 * k, real)
        split(a, ta, a2, a2.strides[1] // real.itemsize, 2, [(0, 1.0, 0.0), (1, 0.0, 1.0)], stream)
    if c.strides[-1] == c.itemsize and beta.imag == 0:
        gemm_batched(a2, b2, as_reals(c), beta=beta.real, **kw)
        return
    t = workspace(batch, m, 2 * n, real)
    gemm_batched(a2, b2, t, **kw)
    combine(t, 2, 1, 0, False, 1.0, beta, c, stream)


def _gemm_3m(gemm_batched, a, b, c, ta, tb, alpha, beta, kw):
    """c = alpha op(a) op(b) + beta c by 3M: one batched real GEMM of three (the module's docstring)."""
    (batch, m, n), real, stream = _dims(c), dtypes.real_of(c.dtype), kw.get("stream")
    k = b.shape[-1 if tb != "N" else -2]
    planes = {}
    for name, x, op, rows, cols in (("a", a, ta, m, k), ("b", b, tb, k, n)):
        s = -1.0 if op == "C" else 1.0
        p = planes[name] = workspace(3 * batch, rows, cols, real)
        gap, ld = p.strides[0] // real.itemsize, p.strides[1] // real.itemsize
        split(x, op, p, ld, 1, [(0, 1.0, 0.0), (batch * gap, 0.0, s), (2 * batch * gap, 1.0, s)], stream)
    t = workspace(3 * batch, m, n, real)  # T0, T1, T2
    gemm_batched(planes["a"], planes["b"], t, **kw)
    gap = t.strides[0] // real.itemsize
    combine(t, 1, batch * gap, 2 * batch * gap, True, alpha, beta, c, stream)


def _dims(x):
    """(batch, rows, cols) of a 2-D or 3-D array."""
    return (x.shape[0] if x.ndim == 3 else 1,) + x.shape[-2:]


def workspace(count, rows, cols, real):
    """A new (count, rows, cols) real array as a view of a padded buffer: rows ld apart (cols rounded up
    to 16 bytes, plus ROW_PAD), matrices a 4 KB multiple plus MATRIX_GAP bytes apart."""
    item = real.itemsize
    ld = ceil_div(cols * item, 16) * 16 // item + ROW_PAD // item
    gap = (ceil_div(rows * ld * item, 4096) * 4096 + MATRIX_GAP) // item
    buf = empty(count * gap, real)
    return DeviceArray((count, rows, cols), real, _mem=buf._mem, _offset=buf._offset,
                       _strides=(gap * item, ld * item, item), _base=buf)


def as_reals(x):
    """x, a 2-D or 3-D complex view with unit stride along its rows, as a (batch, rows, 2 cols) real view
    (real and imaginary parts interleaved)."""
    x.ptr  # a view of freed memory is an error now, not later
    batch, rows, cols = _dims(x)
    strides = ((x.strides[0] if x.ndim == 3 else 0), x.strides[-2], x.itemsize // 2)
    return DeviceArray((batch, rows, 2 * cols), dtypes.real_of(x.dtype), _mem=x._mem, _offset=x._offset,
                       _strides=strides, _base=x if x.base is None else x.base)


def _launch_shape(batch, m, n):
    """(grid, block) of complex_parts.cu's kernels: on a GPU a 32x8 block, a thread per column (coalesced)
    and row; on the sim a 1x8 block, a thread per row walking all of it (a call per element costs more
    than the element there); a matrix per grid z; at most MAX_GRID row blocks and matrices (the kernels
    stride over the rest)."""
    bx, by = (1, BLOCK[1]) if simulated() else BLOCK
    return (1 if simulated() else ceil_div(n, bx), min(ceil_div(m, by), MAX_GRID), min(batch, MAX_GRID)), (bx, by)


def _real_strides(x, op="N"):
    """(batch, rows, cols) strides of op(x), a 2-D or 3-D complex view, in reals."""
    s = [st // (x.itemsize // 2) for st in x.strides]
    s = [0] * (3 - len(s)) + s
    return (s[0], s[2], s[1]) if op != "N" else tuple(s)


def split(x, op, out, ldo, ocs, planes, stream=None):
    """complex_split: planes [(offset, c_re, c_im)] (one to four) of op(x), x a 2-D or 3-D complex view,
    into the real 3-D array `out` (a workspace): element (b, i, j)'s c_re Re + c_im Im at
    out[b * obs + i * ldo + j * ocs + offset], obs out's matrix stride (offsets and strides in reals from
    out's first element)."""
    m, n = x.shape[-2:][::-1] if op != "N" else x.shape[-2:]
    batch = _dims(x)[0]
    if out.dtype != dtypes.real_of(x.dtype) or not 1 <= len(planes) <= 4:
        raise ValueError(f"complex_split: a {x.dtype} operand needs a {dtypes.real_of(x.dtype)} output and 1 to 4 "
                         f"planes, got {out.dtype} and {len(planes)}")
    if batch * m * n == 0:
        return
    planes = list(planes) + [(-1, 0.0, 0.0)] * (4 - len(planes))
    k = get_kernel("complex_parts", "complex_split", out.dtype)
    k(*_launch_shape(batch, m, n), m, n, batch, x, *_real_strides(x, op), out, out.strides[0] // out.itemsize, ldo, ocs,
      *(v for off, c_re, c_im in planes for v in (int(off), float(c_re), float(c_im))), stream=stream, views=True)


def combine(t, tcs, t1, t2, three_m, alpha, beta, c, stream=None):
    """complex_combine: c = alpha (P + i Q) + beta c for c a 2-D or 3-D complex view, from real GEMM
    products in t (batch, m, .) with columns tcs apart: P, Q at offsets 0 and t1 (three_m False), or 3M's
    T0, T1, T2 at 0, t1, t2 (offsets in reals)."""
    batch, m, n = _dims(c)
    if t.dtype != dtypes.real_of(c.dtype):
        raise ValueError(f"complex_combine: a {c.dtype} output needs {dtypes.real_of(c.dtype)} products, got {t.dtype}")
    if c.size == 0:
        return
    alpha, beta = complex(alpha), complex(beta)
    k = get_kernel("complex_parts", "complex_combine", t.dtype)
    k(*_launch_shape(batch, m, n), m, n, batch, t, t.strides[0] // t.itemsize, t.strides[1] // t.itemsize, tcs, t1, t2,
      int(three_m), alpha.real, alpha.imag, beta.real, beta.imag, c, *_real_strides(c), stream=stream, views=True)
