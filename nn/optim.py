"""SGD, Adam and AdamW (PyTorch's update rules, one fused kernel per parameter), learning-rate schedules
and gradient clipping by the global norm. float16 / bfloat16 parameters (pure 16-bit training) are
updated in FP32 arithmetic, each stored value rounded once; their state (momentum buffers, Adam's
moments) has the parameter's dtype, as PyTorch keeps it."""
import math

import numpy as np

import gpublas

from . import portable
from . import kernels as K
from .flat_params import FlatGroups, span
from .module import Parameter


def _param_groups(params):
    """(parameters, each one's group index, the groups' options) from a list of Parameters or of PyTorch's
    parameter groups, dicts {'params': [...], 'weight_decay': ...} (options a group leaves out take the
    optimizer's)."""
    params = list(params)
    if not params or not isinstance(params[0], dict):
        return _param_list(params), [0] * len(params), [{}]
    flat, index, options = [], [], []
    for g, group in enumerate(params):
        if not isinstance(group, dict) or "params" not in group:
            raise TypeError(f"optimizer: parameter group {g} must be a dict with 'params'")
        unknown = set(group) - {"params", "weight_decay"}
        if unknown:
            raise ValueError(f"optimizer: parameter group {g} has options {sorted(unknown)}; only weight_decay "
                             "can differ between groups")
        members = _param_list(group["params"])
        flat += members
        index += [g] * len(members)
        options.append({k: v for k, v in group.items() if k != "params"})
    return flat, index, options


def _param_list(params):
    params = list(params)
    for i, p in enumerate(params):
        if not isinstance(p, Parameter):
            raise TypeError(f"optimizer: item {i} is a {type(p).__name__}, not an nn.Parameter")
    return params


class _Optimizer:
    """What SGD and Adam share: the parameters, zero_grad, and the device state [lr, t, step_size,
    bc2_sqrt] (float64) the update kernels read. `opt.lr = x` writes the learning rate into it (a
    host-to-device copy, so between steps, never inside a captured one) and schedules do the same;
    the step count t advances on the device (optim_tick), so a replayed step sees both as an eager
    step would. The parameters are moved into flat groups (nn.flat_params: one buffer per dtype for
    the weights, one for the gradients), so zero_grad and each update are one launch per group."""
    kernel_families = ("optim", ("optim", np.float64))  # the step count and clipping run in float64

    def __init__(self, params, lr):
        self.params, self._group_of, self._group_options = _param_groups(params)
        if not self.params:  # PyTorch's words: a model with nothing to train is a mistake, not a no-op
            raise ValueError(f"{type(self).__name__}: optimizer got an empty parameter list")
        self.flat = FlatGroups(self.params, self._group_of)
        self.state = gpublas.zeros((4,), np.float64)
        self.lr = lr

    @property
    def lr(self):
        return self._lr

    @lr.setter
    def lr(self, value):
        self._lr = float(value)
        self.state[0:1].set(np.array([self._lr]))

    @property
    def steps(self):
        """Steps taken: the device count (a read-back; replayed steps are counted too)."""
        return int(self.state.get()[1])

    def zero_grad(self):
        self.flat.zero_grad()

    # copy.deepcopy(opt) and pickle: the parameters, the hyperparameters, [lr, t, ...] and each
    # parameter's state (momentum, moments) as host copies; the flat groups are built again over the
    # copied parameters (nn/portable.py says why a model and its optimizer stay joined)
    _device = ("flat", "state")  # rebuilt, never copied (with each subclass's _make_state attributes)

    def __getstate__(self):
        keep = {k: v for k, v in self.__dict__.items() if k not in self._device + self._state_attrs}
        keep["state"] = self.state.get()
        keep["per_param"] = {name: [portable.host(a) for a in getattr(self, name)] for name in self._per_param}
        return keep

    def __setstate__(self, state):
        state = dict(state)
        per_param, values = state.pop("per_param"), state.pop("state")
        self.__dict__.update(state)
        self.flat = FlatGroups(self.params, self._group_of)
        self.state = gpublas.to_device(values)
        self._make_state()
        for name, arrays in per_param.items():
            for view, a in zip(getattr(self, name), arrays):
                if view is not None and a is not None:
                    view.set(a)

    def _operands(self, *states):
        """[(weights, gradients, *state arrays)] to update: one entry per flat group while the groups
        are intact, else one per parameter. Each of `states` is a (per group, per parameter) pair of lists."""
        if self.flat.intact():
            return [(d, g, *(s[0][k] for s in states)) for k, (d, g, _) in enumerate(self.flat.groups)]
        return [(p.data, p.grad, *(s[1][i] for s in states)) for i, p in enumerate(self.params)]

    def _option(self, name, default):
        """Option `name` of each entry of _operands (its parameter group's, else `default`)."""
        members = [m[0] for _, _, m in self.flat.groups] if self.flat.intact() else range(len(self.params))
        return [self._group_options[self._group_of[i]].get(name, default) for i in members]


class SGD(_Optimizer):
    """p -= lr * g with g = grad + weight_decay p, through momentum (buf = momentum buf + (1 -
    dampening) g; the first step sets buf = g) and optionally Nesterov (g + momentum buf)."""

    def __init__(self, params, lr, momentum=0.0, nesterov=False, weight_decay=0.0, dampening=0.0):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr, momentum and weight_decay must be >= 0, got {lr}, {momentum}, {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening 0")
        super().__init__(params, lr)
        self.momentum, self.nesterov = float(momentum), bool(nesterov)
        self.weight_decay, self.dampening = float(weight_decay), float(dampening)
        self._make_state()

    _state_attrs, _per_param = ("_buffers", "buffers"), ("buffers",)

    def _make_state(self):
        # momentum buffers: written whole on the first step (t == 1), so never read uninitialized
        none = ([None] * len(self.flat.groups), [None] * len(self.params))
        self._buffers = self.flat.state(gpublas.empty) if self.momentum != 0 else none
        self.buffers = self._buffers[1]   # per parameter

    def step(self):
        K.optim_tick(self.state)  # t counts the steps; t == 1 marks the first (buf = g)
        decays = self._option("weight_decay", self.weight_decay)
        for (p, g, buf), wd in zip(self._operands(self._buffers), decays):
            K.sgd_update(p, g, buf, self.state, self.momentum, self.dampening, float(wd), self.nesterov)


class Adam(_Optimizer):
    """PyTorch's Adam: m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2 (amsgrad: the running
    max of v is used instead), p -= lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps), where
    weight_decay adds weight_decay * p to g (L2). One fused kernel per parameter and step, after one
    one-thread kernel that advances t and computes the bias corrections on the device."""

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        name = type(self).__name__
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"{name}: lr, eps and weight_decay must be >= 0, got {lr}, {eps}, {weight_decay}")
        beta1, beta2 = (float(b) for b in betas)
        if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
            raise ValueError(f"{name}: betas must be in [0, 1), got {tuple(betas)}")
        super().__init__(params, lr)
        self.betas, self.eps = (beta1, beta2), float(eps)
        self.weight_decay, self.amsgrad = float(weight_decay), bool(amsgrad)
        self._make_state()

    _state_attrs = ("_moments", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    _per_param = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def _make_state(self):
        self._moments = [self.flat.state(gpublas.zeros) for _ in range(2)]
        none = ([None] * len(self.flat.groups), [None] * len(self.params))
        self._moments.append(self.flat.state(gpublas.zeros) if self.amsgrad else none)
        # per parameter, as PyTorch's state names them
        self.exp_avg, self.exp_avg_sq, self.max_exp_avg_sq = (m[1] for m in self._moments)

    def step(self):
        K.optim_tick(self.state, *self.betas)
        decays = self._option("weight_decay", self.weight_decay)
        for (p, g, m, v, vmax), wd in zip(self._operands(*self._moments), decays):
            K.adam_update(p, g, m, v, vmax, self.state, *self.betas, self.eps, float(wd), self.decoupled)


class AdamW(Adam):
    """PyTorch's AdamW: Adam with decoupled weight decay, p *= 1 - lr * weight_decay before the Adam
    step (instead of adding weight_decay * p to the gradient); weight_decay defaults to 0.01."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)


class _Schedule:
    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.base_lr = optimizer.lr
        self.epoch = 0

    def step(self):
        """Advances one epoch and sets the optimizer's learning rate."""
        self.epoch += 1
        self.optimizer.lr = self.lr_at(self.epoch)
        return self.optimizer.lr


class StepLR(_Schedule):
    """lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1):
        super().__init__(optimizer)
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)

    def lr_at(self, epoch):
        return self.base_lr * self.gamma ** (epoch // self.step_size)


class CosineLR(_Schedule):
    """lr = eta_min + (base_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2 (PyTorch's CosineAnnealingLR)."""

    def __init__(self, optimizer, T_max, eta_min=0.0):
        super().__init__(optimizer)
        if T_max < 1:
            raise ValueError(f"CosineLR: T_max must be >= 1, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)

    def lr_at(self, epoch):
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2


def clip_grad_norm(params, max_norm, on_device=False):
    """Scales every gradient by max_norm / (total + 1e-6) when the global L2 norm `total` of all the
    gradients exceeds max_norm; returns total as a float, or with on_device=True as a float64 (1,)
    DeviceArray with no read-back (a captured step). Each parameter's sum of squares is one
    fixed-order device reduction into its own slot; one one-thread kernel sums the slots (in NumPy's
    order, in double), takes the root and the coefficient, and the scaling kernels read it there.
    Gradients that lie back to back in one buffer (an optimizer's flat group, nn.flat_params) of a
    float32 or float64 dtype are one slot instead: one reduction over the buffer and one scaling launch
    (the total's last bits can differ from the per-parameter sums'; the scaled gradients are the same
    function of it). A 16-bit gradient's sum of squares is taken in float32 (of its widened copy)."""
    params = _param_list(params)
    compute = [gpublas.runtime.dtypes.TABLE[p.dtype].compute for p in params]
    dtypes = list(dict.fromkeys(compute))
    flat = span([p.grad for p in params]) if len(dtypes) == 1 and params[0].dtype == dtypes[0] else None
    grads = [p.grad for p in params] if flat is None else [flat]
    make = gpublas.empty if len(dtypes) == 1 else gpublas.zeros   # slot i: gradient i (the others' stay 0)
    sums = {dtype: make((len(grads),), dtype) for dtype in dtypes}
    for i, (g, dtype) in enumerate(zip(grads, compute)):
        K.sumsq(g if g.dtype == dtype else g.astype(dtype), sums[dtype], i)
    clip = gpublas.empty((2,), np.float64)
    K.clip_coef(sums.get(np.dtype(np.float32)), sums.get(np.dtype(np.float64)), float(max_norm), clip)
    for g in grads:
        K.clip_scale(g, clip)
    return clip[0:1] if on_device else float(clip.get()[0])
