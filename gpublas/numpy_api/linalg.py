"""numpy.linalg's norm on DeviceArrays (gpublas.linalg.norm; numpy.linalg.norm(device_array) runs it).

    gpublas.linalg.norm(x)                 # the 2-norm of x flattened (Frobenius for a matrix): blas1.nrm2
    gpublas.linalg.norm(x, ord=1, axis=0)  # vector norms along an axis: reductions of |x|
    gpublas.linalg.norm(m, ord="fro", axis=(1, 2))

Results are DeviceArrays (0-d over everything) of x's real float dtype (float64 for integers), as
NumPy's. Over everything with ord None, 2 (1-D) or 'fro' the norm is blas1.nrm2's scaled two-pass sum
(no overflow for huge elements), kept on the device; along axes: sqrt(sum(|x|^2)), max or min of |x|,
sum(|x|), sum(x != 0), sum(|x|^p)^(1/p); matrix norms 1, -1, inf, -inf and 'fro' from column or row sums.
The spectral and nuclear norms (ord 2, -2, 'nuc' on matrices) need an SVD gpublas lacks: NotImplementedError.
"""
import numpy as np

from ..blas import blas1
from ..core import cumath, reduction
from ..runtime import dtypes
from ..core import elementwise as ew
from ..core.array import DeviceArray
from ..core.checks import as_array, normalize_axes


def _real_float(a):
    """a as a float (or complex) array: integers and bools in float64."""
    return a if a.dtype.kind in "fc" or a.dtype in dtypes.HALVES else a.astype(np.float64)


def _flat_2norm(a):
    """The 2-norm of all of a as a 0-d DeviceArray, through nrm2 (float32 / float64; the others by a sum)."""
    real = dtypes.real_of(a.dtype) if a.dtype.kind == "c" else a.dtype
    if real not in blas1.FLOATS:  # 16-bit floats: nrm2 has no build
        return _vector(a, 2, None, False)
    x = a if a.c_contiguous else a.copy()
    if a.dtype.kind == "c":
        parts = DeviceArray(2, real)
        blas1.nrm2(x.real.reshape(-1), out=parts[0:1])
        blas1.nrm2(x.imag.reshape(-1), out=parts[1:2])
        return cumath.hypot(parts[0], parts[1])
    return blas1.nrm2(x.reshape(-1), out=DeviceArray((), real))


def _vector(a, ord, axis, keepdims):
    """A vector norm of a (float) along `axis` (None: all of it)."""
    mag = ew.absolute(a)  # real for complex a
    if ord == np.inf:
        return reduction.max(mag, axis, keepdims)
    if ord == -np.inf:
        return reduction.min(mag, axis, keepdims)
    if ord == 0:
        n = reduction.sum(ew.compare(ew.NE, mag, 0, what="norm"), axis, keepdims)
        return n.astype(mag.dtype)
    if ord == 1:
        return reduction.sum(mag, axis, keepdims)
    if ord is None or ord == 2:
        return ew.sqrt(reduction.sum(ew.binary(ew.MUL, mag, mag, what="norm"), axis, keepdims))
    p = float(ord)
    return ew.power(reduction.sum(ew.power(mag, p), axis, keepdims), 1.0 / p)


def _matrix(a, ord, axes, keepdims):
    """A matrix norm of a over the two `axes` (row axis, column axis)."""
    row, col = axes
    if ord in (None, "fro"):
        mag = ew.absolute(a)
        return ew.sqrt(reduction.sum(ew.binary(ew.MUL, mag, mag, what="norm"), axes, keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        summed, other = (row, col) if ord in (1, -1) else (col, row)  # 1: column sums; inf: row sums
        s = reduction.sum(ew.absolute(a), summed, keepdims=True)
        r = reduction.max(s, other, keepdims=True) if ord > 0 else reduction.min(s, other, keepdims=True)
        return r if keepdims else r.squeeze(axis=(row, col))
    if ord in (2, -2, "nuc"):
        raise NotImplementedError(f"norm: ord={ord!r} of a matrix needs singular values; gpublas has no SVD")
    raise ValueError(f"norm: invalid norm order {ord!r} for matrices")


def norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: vector norms (ord None, 2, 1, inf, -inf, 0, any p) and matrix norms
    (None / 'fro', 1, -1, inf, -inf) over `axis` (None: the whole 1-D or 2-D array)."""
    a = _real_float(as_array(x, "norm"))
    if axis is None:
        if ord is None or (ord == 2 and a.ndim == 1) or (ord == "fro" and a.ndim == 2):
            r = _flat_2norm(a)
            return r.reshape((1,) * a.ndim) if keepdims else r
        if a.ndim not in (1, 2):
            raise ValueError("norm: improper number of dimensions to norm (an ord needs a 1-D or 2-D array)")
        axis = tuple(range(a.ndim))
    axes = normalize_axes(axis, a.ndim, "norm") if not isinstance(axis, tuple) else \
        tuple(normalize_axes(ax, a.ndim, "norm")[0] for ax in axis)
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
        return _vector(a, ord, axes[0], keepdims)
    if len(axes) == 2:
        if axes[0] == axes[1]:
            raise ValueError("norm: duplicate axes given")
        return _matrix(a, ord, axes, keepdims)
    raise ValueError("norm: improper number of dimensions to norm")

