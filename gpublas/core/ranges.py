"""Numerical ranges made on the device (cuda_src/memory.cu's arange_real and linspace_real).

    i = gpublas.arange(10);  t = gpublas.arange(0.0, 1.0, 0.1, dtype=np.float32)
    x = gpublas.linspace(-1, 1, 101);  x, dx = gpublas.linspace(0, 1, 8, endpoint=False, retstep=True)

NumPy's rules: arange's length is ceil((stop - start) / step) (0 when negative); without dtype it is
int64 for integer arguments and float64 when any is a float; its values are start + i * delta with
delta = dtype(start + step) - dtype(start), computed in the dtype as NumPy's fill does. linspace
computes start + i * step in float64, with the last value exactly `stop` when endpoint is set, then
converts (integer dtypes floor first); its default dtype is np.result_type(start, stop, float(num)).
"""
import math

import numpy as np

from .array import DeviceArray
from .checks import is_scalar
from ..runtime.launch import BLOCK, get_kernel, grid_1d

NUMBERS = tuple(np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint8))


def _dtype(dtype, default, what):
    dtype = np.dtype(default if dtype is None else dtype)
    if dtype not in NUMBERS:
        raise TypeError(f"{what}: dtype must be one of {', '.join(map(str, NUMBERS))}, got {dtype}")
    return dtype


def _scalars(what, **values):
    for name, v in values.items():
        if not is_scalar(v) or isinstance(v, (complex, np.complexfloating)):
            raise TypeError(f"{what}: {name} must be a real scalar, got {type(v).__name__}")


def arange(start, stop=None, step=1, *, dtype=None):
    """Evenly spaced values in [start, stop) with spacing `step` (arange(stop) starts at 0), as NumPy's."""
    if stop is None:
        start, stop = 0, start
    _scalars("arange", start=start, stop=stop, step=step)
    if step == 0:
        raise ZeroDivisionError("arange: step must not be zero")
    floats = any(isinstance(v, (float, np.floating)) for v in (start, stop, step))
    dtype = _dtype(dtype, np.float64 if floats else np.int64, "arange")
    delta, quotient = stop - start, (stop - start) / step
    length = math.ceil(quotient)
    if quotient == 0 and delta != 0:  # underflowed (a huge step): one value when it points the right way
        length = int(math.copysign(1, quotient) == math.copysign(1, delta))
    first = dtype.type(start)
    out = DeviceArray((max(length, 0),), dtype)
    delta = dtype.type(dtype.type(start + step) - first)  # in the dtype, as NumPy's fill
    if out.size == 1:
        delta = dtype.type(0)  # NumPy writes start alone (0 * an infinite delta would be NaN)
    if out.size:
        get_kernel("memory", "arange_real", dtype)(grid_1d(out.size), BLOCK, out, first.item(), delta.item(), out.size)
    return out


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None):
    """`num` evenly spaced values from start to stop (stop included when endpoint), as NumPy's;
    with retstep, (values, step)."""
    _scalars("linspace", start=start, stop=stop)
    num = int(num)
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    dtype = _dtype(dtype, np.result_type(start, stop, float(num)), "linspace")
    div = num - 1 if endpoint else num
    step = (float(stop) - float(start)) / div if div > 0 else np.nan
    out = DeviceArray((num,), dtype)
    if num:
        last = num - 1 if endpoint and num > 1 else -1
        get_kernel("memory", "linspace_real", dtype)(grid_1d(num), BLOCK, out, float(start), 0.0 if div <= 0 else step,
                                                    float(stop), last, int(dtype.kind != "f"), num)
    return (out, step) if retstep else out
