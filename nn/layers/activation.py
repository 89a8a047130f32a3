"""Elementwise activations (ReLU, Tanh, Sigmoid, GELU) and Flatten. ReLU, Tanh and Sigmoid keep their
output: each derivative is written in terms of it (relu: y > 0, tanh: 1 - y^2, sigmoid: y (1 - y)); GELU
keeps its input, as its derivative has no form in the output."""
import gpublas

from .. import kernels as K
from ..module import Module


class _Activation(Module):
    kernel_families = ("activation",)  # nn.prefetch
    act = 0

    def __init__(self):
        super().__init__()
        self.y = None

    def forward(self, x):
        # x: any shape; y: same shape
        x = self._input(x)
        y = K.act_forward(x, gpublas.empty_like(x), self.act)
        self.y = y  # cached: the output, which the derivative is written in terms of
        return y

    def backward(self, dy):
        # dy: the output's shape -> dx: the same shape
        y = self._cached("y")
        dy = self._grad_input(dy, y.shape, y.dtype)
        # dL/dx = dL/dy * act'(x), with act' expressed through y = act(x)
        return K.act_backward(y, dy, gpublas.empty_like(dy), self.act)


class ReLU(_Activation):
    act = K.ACT["relu"]


class Tanh(_Activation):
    act = K.ACT["tanh"]


class Sigmoid(_Activation):
    act = K.ACT["sigmoid"]


class GELU(Module):
    """torch.nn.GELU: x Phi(x) (approximate='none', erf) or GPT-2's tanh form (approximate='tanh'); any shape."""
    kernel_families = ("activation",)  # nn.prefetch

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate
        self.act = K.ACT["gelu" if approximate == "none" else "gelu_tanh"]
        self.x = None

    def extra_repr(self):
        return f"approximate={self.approximate!r}"

    def forward(self, x):
        # x: any shape; y: same shape
        x = self._input(x)
        self.x = x  # cached: the input, which the derivative is written in terms of
        return K.act_forward(x, gpublas.empty_like(x), self.act)

    def backward(self, dy):
        # dy: the output's shape -> dx: the same shape
        x = self._cached("x")
        dy = self._grad_input(dy, x.shape, x.dtype)
        # y = gelu(x)  =>  dL/dx = dL/dy * gelu'(x)
        return K.act_backward_input(x, dy, gpublas.empty_like(dy), self.act)


class Flatten(Module):
    """(N, d1, d2, ...) -> (N, d1*d2*...), a view; backward reshapes dy back."""

    def __init__(self):
        super().__init__()
        self.shape = None

    def forward(self, x):
        # x: (N, ...); y: (N, prod(...))
        x = self._input(x)
        if x.ndim < 1:
            raise ValueError(f"{self.describe()}: expected input (N, ...), got a 0-d array")
        self.shape, self.x_dtype = x.shape, x.dtype  # cached: only the input's shape (to undo the reshape) and dtype
        return x.reshape(x.shape[0], _size(x.shape[1:]))

    def backward(self, dy):
        # dy: (N, prod(...)) -> dx: (N, ...)
        shape = self._cached("shape")
        dy = self._input(self._grad_dtype(dy, self.x_dtype))
        if dy.size != _size(shape):
            raise ValueError(f"{self.describe()}: backward expects dy with {_size(shape)} elements, got {dy.shape}")
        return dy.reshape(shape)


def _size(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class Identity(Module):
    """torch.nn.Identity: y = x (any constructor arguments are ignored, as torch's); dx = dy."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input

    def backward(self, dy):
        return dy


def softmax_dim(ndim, dim):
    """torch's implicit dim for dim=None (0 for 0-, 1- and 3-D input, else 1), and a negative dim made positive."""
    if dim is None:
        dim = 0 if ndim in (0, 1, 3) else 1
    if not -ndim <= dim < ndim:
        raise ValueError(f"softmax: dim {dim} is out of range for a {ndim}-D input")
    return dim % ndim


class _AlongDim(Module):
    """A map along one axis `dim` (torch's None: softmax_dim's legacy choice) that keeps its output y."""
    kernel_families = ("reduce", "elementwise")

    def __init__(self, dim=None):
        super().__init__()
        self.dim, self.y = dim, None

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    """torch.nn.Softmax(dim=None): y = exp(x) / sum(exp(x)) along dim (gpublas.softmax); keeps y, since
    dx = y (dy - sum(dy y)) along dim."""

    def forward(self, input):
        # input: any shape; y: the same
        x = self._input(input)
        self.axis = softmax_dim(x.ndim, self.dim)
        self.y = gpublas.softmax(x, axis=self.axis)  # cached: the output (the derivative's only argument)
        return self.y

    def backward(self, dy):
        # y = softmax(x)  =>  dx = y (dy - sum(dy y))
        y = self._cached("y")
        dy = self._grad_input(dy, y.shape, y.dtype)
        return y * (dy - (dy * y).sum(axis=self.axis, keepdims=True))


class LogSoftmax(_AlongDim):
    """torch.nn.LogSoftmax(dim=None): y = x - logsumexp(x) along dim; keeps y, since dx = dy - exp(y) sum(dy)."""

    def forward(self, input):
        # input: any shape; y: the same
        x = self._input(input)
        self.axis = softmax_dim(x.ndim, self.dim)
        self.y = x - gpublas.logsumexp(x, axis=self.axis, keepdims=True)  # cached: the output
        return self.y

    def backward(self, dy):
        # y = x - logsumexp(x)  =>  dx = dy - softmax(x) sum(dy), softmax(x) = exp(y)
        y = self._cached("y")
        dy = self._grad_input(dy, y.shape, y.dtype)
        return dy - gpublas.exp(y) * dy.sum(axis=self.axis, keepdims=True)
