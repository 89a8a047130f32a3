"""What DeviceArray works out once per layout rather than per array: a new array's converted shape, dtype,
sizes and strides (LAYOUTS, by the constructor's arguments), and the layout of each reshape view (RESHAPES,
by the base's layout and the shape asked). A training step makes the same few dozen arrays and views
each step; looked up, each costs a dict probe instead of the checks and loops that made it (1-3 us).

Both tables are keyed by values that decide the answer completely, so a hit is the answer the full path
would give; they empty when they reach MAX_KEPT entries (a program with endless shapes)."""
import math

import numpy as np

from . import layout
from ..runtime import dtypes

MAX_KEPT = 4096
LAYOUTS = {}   # (shape, dtype) as a constructor was given them -> new_layout's answer
RESHAPES = {}  # (shape, strides, itemsize, the shape asked, Python ints) -> (shape, strides, c_contiguous)


def _shape(shape):
    if type(shape) is tuple:  # the launchers' case (a shape computed from arrays): taken as it is
        for s in shape:
            if type(s) is not int or s < 0:
                break
        else:
            return shape
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return shape


def new_layout(shape, dtype):
    """(shape, dtype, size, nbytes, C strides) of a new array, checked and converted; kept in LAYOUTS for
    hashable arguments (equal arguments convert equally: np.int64(3) and 3, np.float32 and its dtype)."""
    key = (shape, dtype)
    shape, dtype = _shape(shape), dtypes.canonical(dtype)
    size = math.prod(shape)
    out = shape, dtype, size, size * dtype.itemsize, layout.c_strides(shape, dtype.itemsize)
    try:
        if len(LAYOUTS) >= MAX_KEPT:
            LAYOUTS.clear()
        LAYOUTS[key] = out
    except TypeError:  # unhashable (a list): converted each time
        pass
    return out


def reshape_kept(out, a, key):
    """`out` (a.reshape(shape) made by core.indexing), its layout kept in RESHAPES under `key` when it is a
    view of a's memory (a copy is made again each time)."""
    if out._mem is a._mem:
        if len(RESHAPES) >= MAX_KEPT:
            RESHAPES.clear()
        RESHAPES[key] = (out.shape, out.strides, out.c_contiguous)
    return out
