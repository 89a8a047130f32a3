"""NumPy's functions and ufuncs on DeviceArrays (NEP 13 and NEP 18, as CuPy): `np.sum(a)`,
`np.mean(a, axis=0)`, `np.exp(a)`, `np.add(h, a, out=a)` run gpublas' own function on the device and
return DeviceArrays; a NumPy function gpublas does not have raises a TypeError saying so and what to
call (`.get()` for a host copy), never a silent host round trip.

    np.sum(a)                     # -> gpublas.sum(a), a 0-d DeviceArray
    np.maximum(a, 0.0, out=a)     # -> gpublas.maximum(a, 0.0, out=a)
    np.asarray(a)                 # TypeError: call a.get() (DeviceArray.__array__, CuPy's rule)

Each table maps a NumPy callable to gpublas' function of the same meaning; a callable in neither
goes to the function of its NumPy name in elementwise, cumath, ops, bitwise, reduction, gather or manipulation
(np.sin reaches gpublas.core.cumath.sin, np.concatenate gpublas.numpy_api.manipulation.concatenate). Keyword
arguments are passed on by name, so one gpublas does not take (dtype=, where=) raises TypeError
naming it.
"""
import functools
import inspect

import numpy as np

from ..blas import blas3
from ..core import cumath, elementwise as ew, gather, indexing, reduction
from . import bitwise, manipulation, ops
from . import cumulative, order_stats, sorting
from ..core import views
from . import contract, linalg, predicates, rearrange
from ..core.array import DeviceArray, provide
from ..core.creation import empty_like, full_like, ones_like, zeros_like

FUNCTIONS = {
    np.sum: reduction.sum, np.mean: reduction.mean, np.max: reduction.max, np.amax: reduction.max,
    np.min: reduction.min, np.amin: reduction.min, np.argmax: reduction.argmax, np.argmin: reduction.argmin,
    np.any: ops.any, np.all: ops.all, np.where: ew.where, np.clip: ew.clip, np.take: indexing.take,
    np.nonzero: gather.nonzero, np.count_nonzero: gather.count_nonzero,
    np.transpose: lambda a, axes=None: a.transpose(axes or ()),
    np.reshape: lambda a, shape, order="C": a.reshape(shape, order=order),
    np.ravel: lambda a, order="C": a.ravel(order), np.copy: lambda a: a.copy(),
    np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim, np.size: lambda a: a.size,
    np.zeros_like: zeros_like, np.ones_like: ones_like, np.empty_like: empty_like, np.full_like: full_like,
}

UFUNCS = {
    np.add: ops.add, np.subtract: ops.subtract, np.multiply: ops.multiply, np.true_divide: ops.divide,
    np.power: ew.power, np.maximum: ew.maximum, np.minimum: ew.minimum, np.negative: ew.negative,
    np.absolute: ew.absolute, np.exp: ew.exp, np.log: ew.log, np.sqrt: ew.sqrt, np.tanh: ew.tanh,
    np.equal: ops.equal, np.not_equal: ops.not_equal, np.less: ops.less, np.less_equal: ops.less_equal,
    np.greater: ops.greater, np.greater_equal: ops.greater_equal,
    np.matmul: lambda a, b: ops.matmul(a, b),
}

# sorting and what stands on it (issue 32)
FUNCTIONS.update({np.sort: sorting.sort, np.argsort: sorting.argsort, np.unique: order_stats.unique,
                  np.median: order_stats.median, np.quantile: order_stats.quantile,
                  np.percentile: order_stats.percentile, np.cumsum: cumulative.cumsum,
                  np.cumprod: cumulative.cumprod, np.prod: cumulative.prod})

# views, rearrangements and value tests (issue 32, item 4)
FUNCTIONS.update({getattr(np, name): getattr(module, name) for module, names in (
    (views, "moveaxis swapaxes broadcast_to flip split array_split diagonal atleast_1d atleast_2d atleast_3d"),
    (rearrange, "roll repeat tile hstack vstack dstack diag tril triu argwhere"),
    (predicates, "nan_to_num isclose allclose array_equal round around")) for name in names.split()})
# contractions (issue 32, item 3): np.dot is ops.dot by name (NumPy's rule; gpublas.dot is BLAS's)
FUNCTIONS.update({np.einsum: contract.einsum, np.tensordot: contract.tensordot, np.outer: contract.outer,
                  np.trace: contract.trace, np.linalg.norm: linalg.norm})
UFUNCS.update({np.isnan: predicates.isnan, np.isinf: predicates.isinf, np.isfinite: predicates.isfinite})


BY_NAME = (ew, cumath, ops, bitwise, reduction, gather, manipulation)


def _lookup(table, func):
    """gpublas' function for NumPy's `func`: the table's, else the public function of its name."""
    f = table.get(func)
    name = func.__name__
    for module in BY_NAME if f is None and not name.startswith(("_", "launch")) else ():
        g = getattr(module, name, None)
        if callable(g) and str(getattr(g, "__module__", "")).startswith("gpublas."):
            return g
    return f


def _ours(types):
    return all(issubclass(t, (DeviceArray, np.ndarray, np.generic)) for t in types)


def _dotted(func):
    """NumPy's public name of `func`: numpy.linalg.norm, numpy.allclose, numpy.logaddexp."""
    module = getattr(func, "__module__", None) or "numpy"
    return f"{module if module.startswith('numpy') else 'numpy'}.{func.__name__}"


def _host_call(name, args, kwargs):
    """The call on host copies, as the user would write it: every DeviceArray (also inside a list or
    tuple) as a.get(), b.get(), ... in order, short other arguments as they are."""
    letters = iter("abcdefghijklmnopqrstuvwxyz")

    def text(x):
        if isinstance(x, DeviceArray):
            return f"{next(letters, 'x')}.get()"
        if isinstance(x, (list, tuple)) and any(isinstance(v, DeviceArray) for v in x):
            inner = ", ".join(text(v) for v in x)
            return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' * (len(x) == 1)})"
        r = repr(x)
        return r if len(r) <= 24 else "..."

    parts = [text(x) for x in args] + [f"{k}={text(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _refuse(func, args, kwargs):
    name = _dotted(func)
    return TypeError(f"{name} is not implemented for DeviceArray (gpublas has no {func.__name__}); "
                     f"copy to the host first, e.g. {_host_call(name, args, kwargs)}")


_signature = functools.lru_cache(maxsize=None)(inspect.signature)  # inspect's costs microseconds a call


def _call(f, name, args, kwargs):
    """f(*args, **kwargs), with a keyword f does not take reported as NumPy's name and gpublas'."""
    try:
        _signature(f).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"numpy.{name} on a DeviceArray runs gpublas' {name}, which cannot take these "
                        f"arguments ({e}); call it on a.get() for NumPy's") from None
    return f(*args, **kwargs)


def array_function(func, types, args, kwargs):
    """DeviceArray.__array_function__: gpublas' function for `func`, or TypeError naming what to call."""
    if not _ours(types):
        return NotImplemented
    f = _lookup(FUNCTIONS, func)
    if f is None:
        raise _refuse(func, args, kwargs)
    return _call(f, func.__name__, args, kwargs)


def array_ufunc(ufunc, method, *inputs, **kwargs):
    """DeviceArray.__array_ufunc__: ufunc(...) as gpublas' function; other methods (reduce,
    accumulate, at) and any out that is not one DeviceArray raise TypeError."""
    if method != "__call__":
        raise TypeError(f"numpy.{ufunc.__name__}.{method} is not implemented for DeviceArray; "
                        f"use gpublas' reductions (a.sum(), a.max(axis=0)) or call it on a.get()")
    f = _lookup(UFUNCS, ufunc)
    if f is None:
        raise _refuse(ufunc, inputs, kwargs)
    out = kwargs.pop("out", None)
    if out is not None:
        out = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        if not isinstance(out, DeviceArray):
            raise TypeError(f"numpy.{ufunc.__name__} on a DeviceArray writes into a DeviceArray only, "
                            f"got out={type(out).__name__}")
        kwargs["out"] = out
    return _call(f, ufunc.__name__, inputs, kwargs)


provide(array_function=array_function, array_ufunc=array_ufunc)  # DeviceArray's NumPy protocols
