"""SGD, Adam and AdamW (PyTorch's update rules, one fused kernel per parameter), learning-rate schedules
and gradient clipping by the global norm."""
import math

import numpy as np

import gpublas

from . import kernels as K
from .module import Parameter


def _param_list(params):
    params = list(params)
    for i, p in enumerate(params):
        if not isinstance(p, Parameter):
            raise TypeError(f"optimizer: item {i} is a {type(p).__name__}, not an nn.Parameter")
    return params


class SGD:
    """p -= lr * g with g = grad + weight_decay p, through momentum (buf = momentum buf + (1 -
    dampening) g; the first step sets buf = g) and optionally Nesterov (g + momentum buf)."""

    def __init__(self, params, lr, momentum=0.0, nesterov=False, weight_decay=0.0, dampening=0.0):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr, momentum and weight_decay must be >= 0, got {lr}, {momentum}, {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening 0")
        self.params = _param_list(params)
        self.lr, self.momentum, self.nesterov = float(lr), float(momentum), bool(nesterov)
        self.weight_decay, self.dampening = float(weight_decay), float(dampening)
        self.buffers = [None] * len(self.params)

    def zero_grad(self):
        for p in self.params:
            p.zero_grad()

    def step(self):
        for i, p in enumerate(self.params):
            first = False
            if self.momentum != 0 and self.buffers[i] is None:
                self.buffers[i] = gpublas.empty(p.shape, p.dtype)
                first = True
            K.sgd_update(p.data, p.grad, self.buffers[i], self.lr, self.momentum, self.dampening,
                         self.weight_decay, self.nesterov, first)


class Adam:
    """PyTorch's Adam: m = beta1 m + (1 - beta1) g, v = beta2 v + (1 - beta2) g^2 (amsgrad: the running
    max of v is used instead), p -= lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps), where
    weight_decay adds weight_decay * p to g (L2). One fused kernel per parameter and step."""

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False):
        name = type(self).__name__
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"{name}: lr, eps and weight_decay must be >= 0, got {lr}, {eps}, {weight_decay}")
        beta1, beta2 = (float(b) for b in betas)
        if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
            raise ValueError(f"{name}: betas must be in [0, 1), got {tuple(betas)}")
        self.params = _param_list(params)
        self.lr, self.betas, self.eps = float(lr), (beta1, beta2), float(eps)
        self.weight_decay, self.amsgrad = float(weight_decay), bool(amsgrad)
        self.steps = 0
        self.exp_avg = self.exp_avg_sq = self.max_exp_avg_sq = None   # per parameter, made on the first step

    def zero_grad(self):
        for p in self.params:
            p.zero_grad()

    def step(self):
        if self.exp_avg is None:
            self.exp_avg = [gpublas.zeros(p.shape, p.dtype) for p in self.params]
            self.exp_avg_sq = [gpublas.zeros(p.shape, p.dtype) for p in self.params]
            self.max_exp_avg_sq = [gpublas.zeros(p.shape, p.dtype) if self.amsgrad else None for p in self.params]
        self.steps += 1
        for p, m, v, vmax in zip(self.params, self.exp_avg, self.exp_avg_sq, self.max_exp_avg_sq):
            K.adam_update(p.data, p.grad, m, v, vmax, self.lr, *self.betas, self.eps, self.weight_decay,
                          self.decoupled, self.steps)


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


def clip_grad_norm(params, max_norm):
    """Scales every gradient by max_norm / (total + 1e-6) when the global L2 norm `total` of all the
    gradients exceeds max_norm; returns total. Each parameter's sum of squares is one fixed-order
    device reduction into its own slot; only those few numbers come back to the host."""
    params = _param_list(params)
    sums = {}
    for p in params:
        if p.dtype not in sums:
            sums[p.dtype] = gpublas.zeros((len(params),), p.dtype)
    for i, p in enumerate(params):
        K.sumsq(p.grad, sums[p.dtype], i)
    total = math.sqrt(sum(float(s.get().astype(np.float64).sum()) for s in sums.values()))
    if total > max_norm:
        for p in params:
            K.scale_inplace(p.grad, max_norm / (total + 1e-6))
    return total
