"""DeviceArray operators and methods: + - * / ** (both sides, in place), unary -, abs(), .T and the
reduction methods, bound onto the class here so that gpublas/array.py stays about memory.

    c = 2 - a * b;  a += row;  a /= a.sum(axis=1, keepdims=True);  at = a.T

Rules (NumPy's, narrowed to what the kernels hold):
  * operands are DeviceArrays (float32 or float64), Python or NumPy scalars, or ndarrays (copied to
    the device first); a scalar takes the array's dtype;
  * float32 and float64 arrays are never mixed silently: the operation raises TypeError naming both
    dtypes (convert with .astype());
  * shapes broadcast as in NumPy: a row (N,) or (1, N) or a column (M, 1) against a matrix, a 0-d
    array against anything, and generally up to 4 independent axes (elementwise.broadcast_strides);
  * `a op= b` writes into a; it raises ValueError when broadcasting would change a's shape. An
    operand that overlaps a other than element for element (a row of a, say) is copied first.
"""
import numpy as np

from . import elementwise as ew
from . import reduction
from .array import DeviceArray, is_scalar


def _operand(x):
    return isinstance(x, (DeviceArray, np.ndarray)) or is_scalar(x)


def add(a, b, out=None):
    """a + b elementwise (arrays or scalars, broadcasting)."""
    return ew.binary(ew.ADD, a, b, out, "add")


def subtract(a, b, out=None):
    """a - b elementwise (arrays or scalars, broadcasting)."""
    return ew.binary(ew.SUB, a, b, out, "subtract")


def multiply(a, b, out=None):
    """a * b elementwise (arrays or scalars, broadcasting)."""
    return ew.binary(ew.MUL, a, b, out, "multiply")


def divide(a, b, out=None):
    """a / b elementwise (arrays or scalars, broadcasting)."""
    return ew.binary(ew.DIV, a, b, out, "divide")


def _forward(op, what):
    def method(self, other):
        if not _operand(other):
            return NotImplemented
        return ew.binary(op, self, other, None, what)

    return method


def _reflected(op, what):
    def method(self, other):
        if not _operand(other):
            return NotImplemented
        return ew.binary(op, other, self, None, what)

    return method


def _inplace(op, what):
    def method(self, other):
        if not _operand(other):
            return NotImplemented
        if not is_scalar(other):
            shape = np.shape(other)
            if shape != self.shape and ew.broadcast_shape(self.shape, shape) != self.shape:
                raise ValueError(f"{what}: in-place operation on shape {self.shape} with shape {shape} "
                                 f"would give shape {ew.broadcast_shape(self.shape, shape)}")
        ew.binary(op, self, other, self, what)
        return self

    return method


def _int(self):
    """int(a) of a one-element array (an argmax result, say)."""
    if self.size != 1:
        raise TypeError(f"only one-element arrays convert to int, this one has {self.size}")
    return int(self.get().reshape(()))


def _bind():
    for op, name, what in [(ew.ADD, "add", "add"), (ew.SUB, "sub", "subtract"), (ew.MUL, "mul", "multiply"),
                           (ew.DIV, "truediv", "divide"), (ew.POW, "pow", "pow")]:
        setattr(DeviceArray, f"__{name}__", _forward(op, what))
        setattr(DeviceArray, f"__r{name}__", _reflected(op, what))
        setattr(DeviceArray, f"__i{name}__", _inplace(op, what))
    DeviceArray.__neg__ = lambda self: ew.negative(self)
    DeviceArray.__pos__ = lambda self: self.copy()
    DeviceArray.__abs__ = lambda self: ew.absolute(self)
    DeviceArray.__int__ = _int
    DeviceArray.T = property(ew.transpose, doc="The transpose of a 2-D array, as a new array.")
    DeviceArray.sum = reduction.sum
    DeviceArray.mean = reduction.mean
    DeviceArray.max = reduction.max
    DeviceArray.min = reduction.min
    DeviceArray.argmax = reduction.argmax
    DeviceArray.argmin = reduction.argmin


_bind()
