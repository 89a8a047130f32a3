"""MaxPool2d and AvgPool2d over NCHW data (PyTorch's defaults: no ceil mode, padding counted in the
average's divisor)."""
import numpy as np

import gpublas

from .. import kernels as K
from ..module import Module
from .conv import Unbatched2d, out_size, pair


class _Pool2d(Unbatched2d, Module):
    kernel_families = ("pool",)  # nn.prefetch
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = pair(kernel_size, "kernel_size")
        self.stride = pair(stride if stride is not None else kernel_size, "stride")
        self.padding = pair(padding, "padding")
        if min(self.kernel_size + self.stride) < 1 or min(self.padding) < 0:
            raise ValueError(f"{type(self).__name__}: kernel_size and stride must be >= 1 and padding >= 0")
        if any(2 * p > k for p, k in zip(self.padding, self.kernel_size)):
            raise ValueError(f"{type(self).__name__}: padding {self.padding} must be at most half the kernel "
                             f"{self.kernel_size}")
        self.x_shape = self.y_dtype = None

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def _setup(self, x):
        x = self._input(x)
        if x.ndim != 4:
            raise ValueError(f"{self.describe()}: expected input (N, C, H, W) or unbatched (C, H, W), got {x.shape}")
        (kh, kw), (sh, sw), (ph, pw) = self.kernel_size, self.stride, self.padding
        OH, OW = out_size(x.shape[2], kh, sh, ph), out_size(x.shape[3], kw, sw, pw)
        if OH < 1 or OW < 1:
            raise ValueError(f"{self.describe()}: input {x.shape[2]}x{x.shape[3]} is smaller than the window")
        return x, (kh, kw, sh, sw, ph, pw), (OH, OW)


class MaxPool2d(_Pool2d):
    kernel_families = ("pool:maxpool_forward",)  # nn.prefetch: the max-pooling unit on the sim

    def _forward4(self, x):
        # x: (N, C, H, W); y, idx: (N, C, OH, OW)
        x, geom, (OH, OW) = self._setup(x)
        y = gpublas.empty(x.shape[:2] + (OH, OW), x.dtype)
        idx = gpublas.empty(y.shape, np.int32)
        K.maxpool_forward(x, y, idx, geom)
        # cached: the argmax of every window (where the gradient goes) and the input shape; not x
        self.idx, self.x_shape, self.geom = idx, x.shape, geom
        self.y_dtype = y.dtype
        return y

    def _backward4(self, dy):
        # dy: (N, C, OH, OW) -> dx: (N, C, H, W)
        idx = self._cached("idx")
        dy = self._grad_input(dy, idx.shape, self.y_dtype)
        # y = x[argmax]  =>  dL/dx[h, w] = sum of dy over the windows whose argmax is (h, w)
        return K.maxpool_backward(dy, idx, gpublas.empty(self.x_shape, dy.dtype), self.geom)


class AvgPool2d(_Pool2d):
    kernel_families = ("pool:avgpool_forward",)  # nn.prefetch

    def _forward4(self, x):
        # x: (N, C, H, W); y: (N, C, OH, OW)
        x, geom, (OH, OW) = self._setup(x)
        y = gpublas.empty(x.shape[:2] + (OH, OW), x.dtype)
        K.avgpool_forward(x, y, geom)
        # cached: only the shapes; the average's derivative does not depend on x
        self.x_shape, self.y_shape, self.geom = x.shape, y.shape, geom
        self.y_dtype = y.dtype
        return y

    def _backward4(self, dy):
        # dy: (N, C, OH, OW) -> dx: (N, C, H, W)
        x_shape = self._cached("x_shape")
        dy = self._grad_input(dy, self.y_shape, self.y_dtype)
        # y = sum(window) / (kh kw)  =>  dL/dx = sum over covering windows of dy / (kh kw)
        return K.avgpool_backward(dy, gpublas.empty(x_shape, dy.dtype), self.geom)
