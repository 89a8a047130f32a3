"""Parameter and Module: the bookkeeping every layer and model shares (PyTorch's names and layouts).

A Module registers the Parameters and child Modules assigned to its attributes, in order, so that
named_parameters() yields PyTorch's names ("0.weight", "lstm.weight_ih_l0"), and state_dict() /
load_state_dict() move weights both ways as host ndarrays.
"""
from collections import OrderedDict

import numpy as np

import gpublas

from . import init


class Parameter:
    """A trainable array: `.data` and `.grad` are DeviceArrays of the same shape; backward ADDS into
    `.grad`, zero_grad() clears it."""

    def __init__(self, host):
        host = np.ascontiguousarray(host)
        self.data = gpublas.to_device(host)
        self.grad = gpublas.zeros(host.shape, host.dtype)

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def zero_grad(self):
        self.grad.fill(0)

    def to(self, dtype):
        dtype = np.dtype(dtype)
        if dtype != self.data.dtype:
            self.data = self.data.astype(dtype)
            self.grad = gpublas.zeros(self.data.shape, dtype)
        return self

    def __repr__(self):
        return f"Parameter(shape={self.shape}, dtype={self.dtype})"


class Module:
    """Base of layers and models. Subclasses set parameters and children as attributes and
    implement forward(x) and backward(dy)."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call Module.__init__ first")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # -- traversal ----------------------------------------------------------------------------------
    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return [m for _, m in self.named_modules()]

    def named_parameters(self, prefix=""):
        for name, p in self._parameters.items():
            yield (f"{prefix}.{name}" if prefix else name), p
        for name, child in self._modules.items():
            yield from child.named_parameters(f"{prefix}.{name}" if prefix else name)

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def zero_grad(self):
        for p in self.parameters():
            p.zero_grad()

    # -- modes and dtype ----------------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    @property
    def dtype(self):
        ps = self.parameters()
        return ps[0].dtype if ps else getattr(self, "_dtype", np.dtype(np.float32))

    def to(self, dtype):
        """Converts every parameter to float32 or float64 (on the device); gradients restart at 0."""
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"{self.describe()}: dtype must be float32 or float64, got {dtype}")
        for m in self.modules():
            object.__setattr__(m, "_dtype", dtype)
        for p in self.parameters():
            p.to(dtype)
        return self

    def double(self):
        return self.to(np.float64)

    def float(self):
        return self.to(np.float32)

    # -- weights in and out -------------------------------------------------------------------------
    def state_dict(self):
        """{name: host ndarray} in PyTorch's names and layouts."""
        return OrderedDict((name, p.data.get()) for name, p in self.named_parameters())

    def load_state_dict(self, state):
        """Copies every array of `state` into the parameter of that name. Missing or unexpected names
        raise KeyError, a shape mismatch ValueError, each naming the model, the expected and the given."""
        own = OrderedDict(self.named_parameters())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if missing or unexpected:
            raise KeyError(f"{self.describe()}: state_dict names do not match: missing {missing}, unexpected "
                           f"{unexpected}; expected {list(own)}")
        for name, p in own.items():
            value = np.asarray(state[name])
            if value.shape != p.shape:
                raise ValueError(f"{self.describe()}: parameter '{name}' expects shape {p.shape}, "
                                 f"got {value.shape}")
        for name, p in own.items():
            p.data.set(np.ascontiguousarray(np.asarray(state[name]), dtype=p.dtype))
        return self

    # -- helpers for layers -------------------------------------------------------------------------
    def describe(self):
        """A short name for messages: the class and its constructor arguments."""
        return f"{type(self).__name__}({self.extra_repr()})"

    def extra_repr(self):
        return ""

    def __repr__(self):
        if not self._modules:
            return self.describe()
        lines = [f"  ({name}): {repr(m)}".replace("\n", "\n  ") for name, m in self._modules.items()]
        return f"{type(self).__name__}(\n" + "\n".join(lines) + "\n)"

    def _input(self, x):
        """x as a float DeviceArray: a layer with parameters wants its own dtype; one without takes
        float32 or float64 as given. An ndarray is converted and copied to the device."""
        want = self.dtype if self._parameters or hasattr(self, "_dtype") else None
        if isinstance(x, gpublas.DeviceArray):
            if want is not None and x.dtype != want:
                raise TypeError(f"{self.describe()}: input dtype {x.dtype} does not match the layer's {want}")
            if x.dtype not in (np.float32, np.float64):
                raise TypeError(f"{self.describe()}: input dtype must be float32 or float64, got {x.dtype}")
            return x
        x = np.asarray(x)
        if want is None:
            want = np.float64 if x.dtype == np.float64 else np.float32
        return gpublas.to_device(np.ascontiguousarray(x, dtype=want))

    def _cached(self, *names):
        """The forward caches backward needs; a clear error when forward has not run."""
        values = [getattr(self, n, None) for n in names]
        if any(v is None for v in values):
            raise RuntimeError(f"{self.describe()}: backward() called before forward() (nothing cached)")
        return values if len(values) > 1 else values[0]

    def _grad_input(self, dy, shape):
        dy = self._input(dy)
        if dy.shape != tuple(shape):
            raise ValueError(f"{self.describe()}: backward expects dy of shape {tuple(shape)} (the output's), "
                             f"got {dy.shape}")
        return dy


def _param(host, dtype):
    return Parameter(np.asarray(host, dtype=dtype))


def uniform_param(shape, bound, dtype):
    """A Parameter drawn uniformly from [-bound, bound) with nn's seeded generator (PyTorch's default
    init for Linear, Conv2d and LSTM)."""
    return _param(init.uniform(shape, bound), dtype)
