"""Parameter and Module: the bookkeeping every layer and model shares (PyTorch's names and layouts).

A Module registers the Parameters and child Modules assigned to its attributes, in order, so that
named_parameters() yields PyTorch's names ("0.weight", "lstm.weight_ih_l0"), and state_dict() /
load_state_dict() move weights both ways as host ndarrays. Buffers (register_buffer: BatchNorm's running
statistics) are state that is saved and loaded but not trained; state_dict() lists each module's
parameters, then its buffers, then its children's, in PyTorch's order.
"""
from collections import OrderedDict

import numpy as np

import gpublas

from . import init, portable


_set = object.__setattr__
_F32 = np.dtype(np.float32)  # compared with a dtype: no conversion of np.float32 per call


class Parameter:
    """A trainable array: `.data` and `.grad` are DeviceArrays of the same shape; backward ADDS into
    `.grad`, zero_grad() clears it."""

    def __init__(self, host):
        host = np.ascontiguousarray(host)
        self.data = gpublas.to_device(host)
        self.grad = gpublas.zeros(host.shape, host.dtype)

    @classmethod
    def part_of(cls, whole, index):
        """A Parameter whose data and grad are views of `whole`'s at `index` (basic indexing): a layer
        made of pieces (nn.distributed's column layers) trains the whole through them."""
        p = cls.__new__(cls)
        p.data, p.grad = whole.data[index], whole.grad[index]
        return p

    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    def zero_grad(self):
        self.grad.fill(0)

    def __getstate__(self):  # copy.deepcopy and pickle (nn/portable.py): host copies
        return {"data": portable.host(self.data), "grad": portable.host(self.grad)}

    def __setstate__(self, state):
        self.data, self.grad = portable.device(state["data"]), portable.device(state["grad"])

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
    _storage_inputs = False  # True: also takes 16-bit input computed in the layer's dtype (see _input)
    _keep_fp32 = False       # True: to(float16 / bfloat16) leaves this module's parameters FP32
    kernel_families = ()     # the kernel families forward and backward launch (nn.prefetch)

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_check_site", None)  # a device-side index check's id, once asked for

    def __setattr__(self, name, value):
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(f"{type(self).__name__}.__init__ must call Module.__init__ first")
        if not (name in d["_parameters"] or name in d["_modules"] or name in d["_buffers"]
                or isinstance(value, (Parameter, Module))):
            _set(self, name, value)  # plain state (a layer's forward caches, each step): nothing to register
            return
        if not (isinstance(value, Parameter) and name in self._parameters):   # a replacement keeps its place
            self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if name in self._buffers:
            self._buffers[name] = value
        elif isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __getstate__(self):
        """copy.deepcopy(model) and pickle (nn/portable.py): the attributes, with each device array as
        host bytes; Parameters and child Modules travel as themselves."""
        state = dict(self.__dict__)
        state["_check_site"] = None   # a device check's id is this process's (gpublas.runtime.device_checks)
        return portable.pack(state, {})

    def __setstate__(self, state):
        self.__dict__.update(portable.unpack(state, {}))

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} defines no forward(); an nn.Module subclass writes "
                                  "forward(x) and backward(dy) (see docs/custom-modules.md)")

    def backward(self, dy):
        """nn has no autograd: each module writes its backward by hand. This default says so."""
        raise NotImplementedError(
            f"{type(self).__name__} defines no backward(): nn has no autograd, so a Module subclass writes "
            "backward(dy) itself: call its layers' backward in the reverse order of forward (each returns the "
            "gradient of its input and adds into its parameters' .grad) and return the gradient of the "
            "input; or build the model as nn.Sequential(...), whose backward does that. See "
            "docs/custom-modules.md")

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

    def register_buffer(self, name, value):
        """Adds a buffer: state saved in state_dict but not trained. `value` is a DeviceArray, a host
        ndarray (a host-side counter such as num_batches_tracked), or None (the name is reserved and left
        out of state_dict, as PyTorch does). Assigning the attribute later replaces the buffer."""
        if value is not None and not isinstance(value, (gpublas.DeviceArray, np.ndarray)):
            raise TypeError(f"register_buffer('{name}'): expected a DeviceArray, an ndarray or None, "
                            f"got {type(value).__name__}")
        self._buffers[name] = value
        object.__setattr__(self, name, value)

    def named_buffers(self, prefix=""):
        for name, b in self._buffers.items():
            if b is not None:
                yield (f"{prefix}.{name}" if prefix else name), b
        for name, child in self._modules.items():
            yield from child.named_buffers(f"{prefix}.{name}" if prefix else name)

    def _named_state(self, prefix="", owners=False):
        """(name, Parameter or buffer) in state_dict order: own parameters, own buffers, then children;
        with owners=True (name, value, module, the name within the module)."""
        own = list(self._parameters.items()) + [(n, b) for n, b in self._buffers.items() if b is not None]
        for name, v in own:
            full = f"{prefix}.{name}" if prefix else name
            yield (full, v, self, name) if owners else (full, v)
        for name, child in self._modules.items():
            yield from child._named_state(f"{prefix}.{name}" if prefix else name, owners)

    # A model split over ranks (nn.distributed's tensor-parallel layers) holds a part of some entries;
    # these three say how its state_dict reads and writes the whole one. A plain module holds it all.
    def _full_state(self, name, host):
        """Entry `name` of this module's state_dict from this rank's part `host` (collective where split)."""
        return host

    def _full_shape(self, name, shape):
        """The shape of entry `name` in the whole model, from this rank's `shape`."""
        return tuple(shape)

    def _local_state(self, name, full):
        """This rank's part of the whole model's entry `name`."""
        return full

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
        for p in self._parameters.values():  # the first parameter's (named_parameters yields its own first)
            return p.data.dtype
        for _, p in self.named_parameters():  # a child's: no list of them all (layers ask per call)
            return p.dtype
        return getattr(self, "_dtype", np.dtype(np.float32))

    def to(self, dtype):
        """Converts every parameter to `dtype` (on the device); gradients restart at 0. float16 and
        bfloat16 give pure 16-bit training, as PyTorch's model.to(torch.bfloat16): weights, gradients
        and activations in 16 bits (GEMMs and reductions accumulate in FP32), except in modules whose
        `_keep_fp32` says so (BatchNorm: its statistics and affine parameters stay FP32)."""
        dtype = np.dtype(dtype)
        if not gpublas.runtime.dtypes.is_float(dtype):
            raise TypeError(f"{self.describe()}: dtype must be float16, bfloat16, float32 or float64, got {dtype}")
        for m in self.modules():
            target = np.dtype(np.float32) if m._keep_fp32 and dtype in gpublas.runtime.dtypes.HALVES else dtype
            object.__setattr__(m, "_dtype", target)
            for name, b in m._buffers.items():      # float buffers follow; integer counters stay
                if isinstance(b, gpublas.DeviceArray) and gpublas.runtime.dtypes.is_float(b.dtype) and b.dtype != target:
                    setattr(m, name, b.astype(target))
            for p in m._parameters.values():
                p.to(target)
        return self

    def bfloat16(self):
        return self.to(gpublas.bfloat16)

    def half(self):
        return self.to(np.float16)

    def double(self):
        return self.to(np.float64)

    def float(self):
        return self.to(np.float32)

    # -- weights in and out -------------------------------------------------------------------------
    def state_dict(self):
        """{name: host ndarray} in PyTorch's names and layouts: parameters and buffers."""
        return OrderedDict((name, m._full_state(local, _host(v))) for name, v, m, local in self._named_state(owners=True))

    def load_state_dict(self, state):
        """Copies every array of `state` into the parameter or buffer of that name. Missing or unexpected
        names raise KeyError; a shape mismatch or a dtype the target cannot take raises ValueError, each
        naming the model, the key, the expected and the given. Taken: real floats (rounded to the
        target's precision) and integers that the target holds exactly; refused: bool, complex, strings,
        objects and every other kind, so that text such as "1.5" never loads as a number."""
        owners = {name: (m, local) for name, _, m, local in self._named_state(owners=True)}
        own = OrderedDict(self._named_state())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if missing or unexpected:
            raise KeyError(f"{self.describe()}: state_dict names do not match: missing {missing}, unexpected "
                           f"{unexpected}; expected {list(own)}")
        values = {}
        for name, target in own.items():
            values[name] = value = np.asarray(state[name])
            m, local = owners[name]
            shape = m._full_shape(local, target.shape)
            if value.shape != tuple(shape):
                raise ValueError(f"{self.describe()}: parameter '{name}' expects shape {tuple(shape)}, "
                                 f"got {value.shape}")
            _check_loadable(self.describe(), name, value, target.dtype)
        for name, target in own.items():
            m, local = owners[name]
            host = np.ascontiguousarray(m._local_state(local, values[name]), dtype=target.dtype)
            if isinstance(target, Parameter):
                target.data.set(host)
            elif isinstance(target, gpublas.DeviceArray):
                target.set(host)
            else:
                target[...] = host
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
        """x as a float DeviceArray: a layer with parameters wants its own dtype (or, where
        `_storage_inputs` says so, a 16-bit one computed in it: BatchNorm's FP32 statistics of bf16
        data); one without takes float16, bfloat16, float32 or float64 as given. An ndarray is converted and copied to the device."""
        want = self.dtype if self._parameters or hasattr(self, "_dtype") else None
        if isinstance(x, gpublas.DeviceArray):
            if want is not None and x.dtype != want and not (
                    self._storage_inputs and gpublas.runtime.dtypes.TABLE[x.dtype].compute == want):
                raise TypeError(f"{self.describe()}: input dtype {x.dtype} does not match the layer's {want}")
            if not gpublas.runtime.dtypes.is_float(x.dtype):
                raise TypeError(f"{self.describe()}: input dtype must be a float (16, 32 or 64 bits), got {x.dtype}")
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

    def _grad_input(self, dy, shape, dtype=None):
        """dy checked against the output's shape; with `dtype` (the output's), a float32 dy for a 16-bit
        output is rounded to it first (_grad_dtype)."""
        dy = self._input(self._grad_dtype(dy, dtype))
        if dy.shape != tuple(shape):
            raise ValueError(f"{self.describe()}: backward expects dy of shape {tuple(shape)} (the output's), "
                             f"got {dy.shape}")
        return dy

    @staticmethod
    def _grad_dtype(dy, dtype):
        """dy in `dtype` where dy is float32 and `dtype` (an output's) float16 or bfloat16: the loss
        boundary, where a loss computed in FP32 hands back an FP32 gradient for 16-bit logits. PyTorch's
        gradient has its tensor's dtype, so it is rounded to it once here; anything else is left as given."""
        if (dtype is not None and isinstance(dy, gpublas.DeviceArray) and dy.dtype == _F32
                and np.dtype(dtype) in gpublas.runtime.dtypes.HALVES):
            return dy.astype(dtype)
        return dy


def _host(v):
    """A state entry as a host ndarray (a copy)."""
    if isinstance(v, Parameter):
        return v.data.get()
    return v.get() if isinstance(v, gpublas.DeviceArray) else np.array(v)


def _check_loadable(model, name, value, dtype):
    """Raises ValueError unless `value`'s dtype is a real float (for a float target) or integers that
    `dtype` holds exactly."""
    dtype = np.dtype(dtype)
    kind = "f" if gpublas.runtime.dtypes.is_float(value.dtype) else value.dtype.kind  # bfloat16's NumPy kind is 'V'
    if kind not in "fiu":
        raise ValueError(f"{model}: '{name}' holds {value.dtype} data, not real numbers; expected a float or "
                         f"integer array for the {dtype} target")
    if kind == "f":
        if not gpublas.runtime.dtypes.is_float(dtype):
            raise ValueError(f"{model}: '{name}' holds {value.dtype} values; the {dtype} target takes integers only")
        with np.errstate(all="ignore"):
            overflow = np.isfinite(value) & ~np.isfinite(value.astype(dtype))
        if overflow.any():
            raise ValueError(f"{model}: '{name}' holds {value.dtype} values beyond the range of {dtype}")
        return
    if value.size == 0:
        return
    if gpublas.runtime.dtypes.is_float(dtype):
        with np.errstate(all="ignore"):
            exact = np.array_equal(value.astype(dtype).astype(value.dtype), value)
    else:
        info = np.iinfo(dtype)
        exact = info.min <= int(value.min()) and int(value.max()) <= info.max
    if not exact:
        raise ValueError(f"{model}: '{name}' holds {value.dtype} values that {dtype} cannot represent exactly")


def _param(host, dtype):
    return Parameter(np.asarray(host, dtype=dtype))


def uniform_param(shape, bound, dtype):
    """A Parameter drawn uniformly from [-bound, bound) with nn's seeded generator (PyTorch's default
    init for Linear, Conv2d and LSTM)."""
    return _param(init.uniform(shape, bound), dtype)
