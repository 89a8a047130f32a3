"""NumPy's array creation routines that fill a new array or copy one (gpublas.empty and to_device
are array.py's):

    z = gpublas.zeros((3, 4));  o = gpublas.ones_like(z, np.float64);  f = gpublas.full_like(z, 7.5)

`dtype` defaults to float32 (to the model array's dtype for the *_like routines); every fill is a
memset (zeros) or one fill kernel (DeviceArray.fill).
"""
import numpy as np

from .array import DeviceArray, asarray


def zeros(shape, dtype=np.float32):
    return DeviceArray(shape, dtype).fill(0)


def ones(shape, dtype=np.float32):
    return DeviceArray(shape, dtype).fill(1)


def full(shape, value, dtype=np.float32):
    return DeviceArray(shape, dtype).fill(value)


def empty_like(a, dtype=None):
    return DeviceArray(a.shape, dtype or a.dtype)


def zeros_like(a, dtype=None):
    return zeros(a.shape, dtype or a.dtype)


def ones_like(a, dtype=None):
    return full(a.shape, 1, dtype or a.dtype)


def full_like(a, value, dtype=None):
    return full(a.shape, value, dtype or a.dtype)


def ascontiguousarray(a):
    """`a` itself when it is C-contiguous, else a contiguous copy (NumPy's name)."""
    a = asarray(a)
    return a if a.c_contiguous else a.copy()
