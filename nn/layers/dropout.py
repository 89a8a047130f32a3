"""Inverted dropout with the mask drawn on the device (counter-based hash of seed and position)."""
import numpy as np

import gpublas

from .. import init
from .. import kernels as K
from ..module import Module


class DeviceDraw:
    """What a layer drawing from dropout_rng.cuh's counter-based generator keeps: a seed from nn's generator
    (nn.manual_seed) and the int64 device scalar `counter`, the next draw's offset, advanced on the device (a
    replayed graph draws as eager calls would). Reading or setting `offset` copies it; nn.gradcheck resets it
    to replay a draw."""

    def _new_draw(self):
        self.seed = init.next_seed()
        self.counter = gpublas.zeros((1,), np.int64)

    @property
    def offset(self):
        return int(self.counter.get()[0])

    @offset.setter
    def offset(self, value):
        self.counter.set(np.array([value], np.int64))


class Dropout(DeviceDraw, Module):
    """In train mode zeroes each element with probability p and scales the rest by 1/(1-p); in eval
    mode the identity. The seed comes from nn's generator (nn.manual_seed); the counter `offset`
    advances by the number of elements on every call, so each call draws fresh numbers. The counter
    lives in device memory and advances there, so a replayed graph draws as eager calls would;
    reading or setting `offset` copies it."""
    kernel_families = ("dropout",)  # nn.prefetch

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = float(p)
        self._new_draw()
        self.mask = None

    def extra_repr(self):
        return f"p={self.p}"

    def forward(self, x):
        # x: any shape; y, mask: the same shape
        x = self._input(x)
        self.x_dtype = x.dtype  # cached: the output's dtype, which dy is rounded to (a loss's FP32 dy)
        if not self.training or self.p == 0.0:
            self.mask = False  # identity: backward passes dy through
            return x
        mask = gpublas.empty(x.shape, np.uint8)
        y = K.dropout_forward(x, gpublas.empty_like(x), mask, self.p, self.seed, self.counter)
        self.mask = mask  # cached: which elements were kept (uint8), all backward needs
        return y

    def backward(self, dy):
        # dy: the output's shape -> dx: the same shape
        if self.mask is None:
            raise RuntimeError(f"{self.describe()}: backward() called before forward() (nothing cached)")
        dy = self._input(self._grad_dtype(dy, self.x_dtype))
        if self.mask is False:
            return dy
        if dy.shape != self.mask.shape:
            raise ValueError(f"{self.describe()}: backward expects dy of shape {self.mask.shape}, got {dy.shape}")
        # y = x * mask / (1 - p)  =>  dL/dx = dy * mask / (1 - p)
        return K.dropout_backward(dy, self.mask, gpublas.empty_like(dy), self.p)
