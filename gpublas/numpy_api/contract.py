"""Tensor contractions with NumPy's names: einsum, tensordot, dot (NumPy's N-d rule), outer, trace.
Every contraction of two operands is views (transpose, a diagonal, stride-0 broadcasts) reshaped to
(batch, M, K) @ (batch, K, N): one batched GEMM through blas3.matmul (the GEMM planner picks the kernel)
for float dtypes, a broadcast multiply and one sum (reduce.cu) for integer and bool ones.

    c = gpublas.einsum("bij,bjk->bik", a, b);  t = gpublas.einsum("ii", m);  s = gpublas.einsum("...i,...i", x, y)
    d = gpublas.tensordot(a, b, axes=([1, 0], [0, 1]));  o = gpublas.outer(x, y);  tr = gpublas.trace(m)

einsum: a label repeated within one operand takes that diagonal (a view whose stride is the sum of the
axes'); a label on one operand only and not in the output is summed before any product; pairs are then
contracted in the order numpy.einsum_path chooses (greedy, from the shapes alone). Not covered (a
NotImplementedError says so): the interleaved operand/sublist form. Results are DeviceArrays (0-d when the
output has no label) of NumPy's result_type of the operands.
"""
import math
import operator
import string

import numpy as np

from ..blas import blas1, blas3
from ..core import elementwise as ew, reduction, views
from ..core.array import DeviceArray
from ..core.checks import as_array, is_scalar, normalize_axes
from ..core.indexing import copy_to

LETTERS = string.ascii_letters


def _operands(arrays, what):
    """The arrays as DeviceArrays of their common NumPy result_type."""
    arrays = [as_array(x, what) for x in arrays]
    dtype = np.result_type(*(x.dtype for x in arrays))
    return [x if x.dtype == dtype else x.astype(dtype) for x in arrays], dtype


def _product(a, b, dtype):
    """(batch, M, K) @ (batch, K, N) -> (batch, M, N) in `dtype`: a batched GEMM for floats, a
    broadcast multiply and a sum over K for the others (converted back to dtype)."""
    bt, m, k = a.shape
    n = b.shape[2]
    if bt * m * n == 0 or k == 0:
        return DeviceArray((bt, m, n), dtype).fill(0)
    if dtype in blas3.GEMM_FLOATS:
        return blas3.matmul(a, b)
    prod = ew.binary(ew.MUL, a.reshape(bt, m, k, 1), b.reshape(bt, 1, k, n), what="einsum")
    s = reduction.sum(prod, axis=2)
    return s if s.dtype == dtype else s.astype(dtype)


# -- einsum ---------------------------------------------------------------------------------------
def _parse(subscripts, arrays):
    """([labels per operand], output labels) with '...' expanded to letters the subscripts do not use."""
    subscripts = subscripts.replace(" ", "")
    ins, arrow, out = subscripts.partition("->")
    ins = ins.split(",")
    if len(ins) != len(arrays):
        raise ValueError(f"einsum: {len(ins)} operands in the subscripts, {len(arrays)} given")
    spare = [c for c in LETTERS if c not in subscripts]
    ell = max((a.ndim - (len(s) - 3) for s, a in zip(ins, arrays) if "..." in s), default=0)
    fill = "".join(spare[:ell])
    labels = []
    for s, a in zip(ins, arrays):
        if "..." in s:
            s = s.replace("...", fill[ell - (a.ndim - (len(s) - 3)):])
        if len(s) != a.ndim or not all(c in LETTERS for c in s):
            raise ValueError(f"einsum: subscripts {s!r} for an operand of {a.ndim} dimensions")
        labels.append(s)
    if arrow:
        out = out.replace("...", fill)
        if len(set(out)) != len(out) or any(c not in "".join(labels) for c in out):
            raise ValueError(f"einsum: output subscripts {out!r} repeat a label or name one no operand has")
    else:  # NumPy's implicit output: the broadcast axes, then the labels seen once, sorted
        counts = "".join(labels)
        out = fill + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in fill))
    return labels, out


def _diagonal(a, labels):
    """a with each repeated label's axes taken as one (a diagonal view), and its labels."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i, j = labels.index(c), labels.index(c, labels.index(c) + 1)
        a = views.moveaxis(views.diagonal(a, 0, i, j), -1, i)
        labels = labels[:j] + labels[j + 1:]
    return a, labels


def _sum_out(a, labels, keep):
    """a summed over its labels not in `keep` (a string)."""
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not axes:
        return a, labels
    s = reduction.sum(a, axis=axes)
    return (s if s.dtype == a.dtype else s.astype(a.dtype)), "".join(c for c in labels if c in keep)


def _broadcast(a, labels, sizes):
    """a with each of its axes of size 1 stretched (stride 0) to the label's size."""
    shape = tuple(sizes[c] for c in labels)
    return a if shape == a.shape else views.broadcast_to(a, shape)


def _pair(a, la, b, lb, keep, sizes, dtype):
    """The contraction of a (labels la) with b (lb), keeping the labels in `keep`: (result, labels)."""
    batch = [c for c in la if c in lb and c in keep]
    inner = [c for c in la if c in lb and c not in keep]
    fa, fb = [c for c in la if c not in lb], [c for c in lb if c not in la]
    a = _broadcast(a, la, sizes).transpose(tuple(la.index(c) for c in batch + fa + inner))
    b = _broadcast(b, lb, sizes).transpose(tuple(lb.index(c) for c in batch + inner + fb))
    dims = [math.prod(sizes[c] for c in g) for g in (batch, fa, inner, fb)]
    c = _product(a.reshape(dims[0], dims[1], dims[2]), b.reshape(dims[0], dims[2], dims[3]), dtype)
    out = batch + fa + fb
    return c.reshape(tuple(sizes[x] for x in out)), "".join(out)


def _path(labels, out, sizes, arrays):
    """numpy.einsum_path's greedy pair order, from the shapes only (stride-0 stand-ins, no data)."""
    stand_ins = [np.lib.stride_tricks.as_strided(np.zeros(1), a.shape, (0,) * a.ndim) for a in arrays]
    spec = ",".join(labels) + "->" + out
    path, _ = np.einsum_path(spec, *stand_ins, optimize="greedy")
    return path[1:]


def einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    """NumPy's einsum on DeviceArrays: 'ij,jk->ik', implicit outputs, '...' broadcasting, traces and
    diagonals ('ii', 'ii->i'), outer products, any number of operands."""
    if not operands or not isinstance(operands[0], str):
        raise NotImplementedError("einsum: gpublas takes the subscripts string form only "
                                  "(einsum('ij,jk->ik', a, b)), not interleaved operand/sublist lists")
    arrays, result = _operands(operands[1:], "einsum")
    if dtype is not None:
        result = np.dtype(dtype)
        arrays = [x.astype(result) if x.dtype != result else x for x in arrays]
    labels, output = _parse(operands[0], arrays)
    sizes = {}
    for s, a in zip(labels, arrays):
        for c, d in zip(s, a.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = d
            elif d not in (1, sizes[c]):
                raise ValueError(f"einsum: label {c!r} has sizes {sizes[c]} and {d}")
    ops = []
    for i, (a, s) in enumerate(zip(arrays, labels)):
        a, s = _diagonal(a, s)
        others = output + "".join(t for j, t in enumerate(labels) if j != i)
        ops.append(_sum_out(a, s, others))
    for i, j in _path([s for _, s in ops], output, sizes, arrays) if len(ops) > 1 else ():
        (a, la), (b, lb) = ops[i], ops[j]
        rest = [x for k, x in enumerate(ops) if k not in (i, j)]
        keep = output + "".join(s for _, s in rest)
        ops = rest + [_pair(a, la, b, lb, keep, sizes, result)]
    (a, la), = ops
    a, la = _sum_out(a, la, output)
    a = _broadcast(a, la, sizes).transpose(tuple(la.index(c) for c in output)) if la else a
    res = a.copy() if a.base is not None or not a.c_contiguous else a
    return res if out is None else copy_to(out, res)


# -- on einsum's pieces -----------------------------------------------------------------------------
def tensordot(a, b, axes=2):
    """The sum over a's axes axes[0] and b's axes[1] (an int n: a's last n with b's first n) of the
    products, the remaining axes of a then b."""
    (a, b), dtype = _operands((a, b), "tensordot")
    if isinstance(axes, (int, np.integer)):
        n = operator.index(axes)
        if n < 0 or n > min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={n} for operands of {a.ndim} and {b.ndim} dimensions")
        xa, xb = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        xa, xb = ([x] if isinstance(x, (int, np.integer)) else list(x) for x in axes)
        xa = [normalize_axes(x, a.ndim, "tensordot")[0] for x in xa]
        xb = [normalize_axes(x, b.ndim, "tensordot")[0] for x in xb]
    if len(xa) != len(xb) or any(a.shape[i] != b.shape[j] for i, j in zip(xa, xb)):
        raise ValueError(f"tensordot: shape-mismatch for sum: a {a.shape} axes {xa}, b {b.shape} axes {xb}")
    fa, fb = [i for i in range(a.ndim) if i not in xa], [j for j in range(b.ndim) if j not in xb]
    m, k, n = math.prod(a.shape[i] for i in fa), math.prod(a.shape[i] for i in xa), math.prod(b.shape[j] for j in fb)
    c = _product(a.transpose(tuple(fa + xa)).reshape(1, m, k), b.transpose(tuple(xb + fb)).reshape(1, k, n), dtype)
    return c.reshape(tuple(a.shape[i] for i in fa) + tuple(b.shape[j] for j in fb))


def dot(a, b, out=None):
    """NumPy's dot: a * b with a scalar or 0-d operand, else the sum over a's last axis and b's
    second-to-last (its only one when 1-D); 1-D with 1-D is a 0-d array."""
    if is_scalar(a) or is_scalar(b) or np.ndim(a) == 0 or np.ndim(b) == 0:
        r = ew.binary(ew.MUL, a, b, what="dot")
    else:
        b_ndim = b.ndim if isinstance(b, DeviceArray) else np.ndim(b)
        r = tensordot(a, b, ([-1], [max(b_ndim - 2, 0)]))
    return r if out is None else copy_to(out, r)


def blas_dot(a, b, stream=None, out=None):
    """gpublas.dot: BLAS's dot of two 1-D vectors (a Python float; with `out`, a one-element DeviceArray, the
    result stays on the device), else NumPy's dot as cupy.dot takes it: the matrix product for 2-D operands,
    the sum over a's last axis and b's second-to-last for more, a product with a 0-d or scalar operand."""
    if getattr(a, "ndim", None) == 1 and getattr(b, "ndim", None) == 1:
        return blas1.dot(a, b, stream, out)
    if stream is not None:
        raise ValueError("gpublas.dot: stream= is BLAS's, for two 1-D vectors; these operands take NumPy's dot")
    return dot(a, b, out)


def outer(a, b, out=None):
    """a.ravel()[:, None] * b.ravel()[None, :], one broadcast multiply."""
    a, b = as_array(a, "outer").reshape(-1), as_array(b, "outer").reshape(-1)
    r = ew.binary(ew.MUL, a.reshape(a.size, 1), b.reshape(1, b.size), out, "outer")
    return r


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum along diagonal `offset` over axes axis1, axis2 (the diagonal view, one reduction)."""
    s = reduction.sum(views.diagonal(as_array(a, "trace"), offset, axis1, axis2), axis=-1)
    s = s if dtype is None or s.dtype == np.dtype(dtype) else s.astype(dtype)
    return s if out is None else copy_to(out, s)
