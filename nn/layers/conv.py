"""Conv2d over NCHW data, lowered to one GEMM for the whole minibatch (im2col), with the gather form
of col2im for the input gradient."""
import math

import numpy as np

import gpublas

from .. import amp
from .. import kernels as K
from ..module import Module, uniform_param


def pair(v, what):
    """An int or a pair of ints -> a pair of ints."""
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    v = tuple(int(a) for a in v)
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or a pair, got {v}")
    return v


def out_size(size, k, stride, pad, dilation=1):
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


class Unbatched2d:
    """PyTorch's unbatched input for the 2-D layers (Conv2d, the pools): x (C, H, W) runs as a batch of
    one and the output comes back as (C', OH, OW); backward takes dy and returns dx the same way. The
    layer's own forward and backward (_forward4 and _backward4) see NCHW only."""

    def forward(self, x):
        # x: (N, C, H, W) or (C, H, W)
        x = self._input(x)
        self.unbatched = x.ndim == 3
        y = self._forward4(x.reshape((1,) + x.shape) if self.unbatched else x)
        return y.reshape(y.shape[1:]) if self.unbatched else y

    def backward(self, dy):
        # dy: y's shape -> dx: x's shape
        if getattr(self, "unbatched", False):
            dx = self._backward4(dy.reshape((1,) + tuple(dy.shape)))
            return dx.reshape(dx.shape[1:])
        return self._backward4(dy)


class Conv2d(Unbatched2d, Module):
    """2-D convolution (cross-correlation, as PyTorch): weight (C_out, C_in, kh, kw), bias (C_out,).
    `activation` ('relu', 'tanh', 'sigmoid') fuses an activation into the output kernel. Under
    nn.autocast a float32 Conv2d lowers and multiplies in 16 bits from its FP32 weights (nn/amp.py).

    16-bit outputs are rounded once from the FP32 accumulator, as PyTorch's convolutions on the CPU
    (oneDNN) round them: the forward GEMM writes Y in FP32 and cnp_to_nchw_bias, the NCHW permute that
    runs anyway, adds the bias and the activation in FP32 and stores 16 bits; the input gradient's GEMM
    writes dcols in FP32 and col2im sums the taps in FP32 and stores 16 bits. No launch is added (the
    permute and col2im run in FP32 too); the cost is Y and dcols in FP32, freed at once."""
    kernel_families = ("conv", "gemm", "reduce", "transpose:swap01")  # nn.prefetch
    _storage_inputs = True  # 16-bit input from a layer before it under autocast

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, bias=True,
                 *, activation=None, dtype=np.float32):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = pair(kernel_size, "kernel_size")
        self.stride = pair(stride, "stride")
        self.padding = pair(padding, "padding")
        self.dilation = pair(dilation, "dilation")
        if min(self.kernel_size + self.stride + self.dilation) < 1 or min(self.padding) < 0:
            raise ValueError(f"Conv2d: kernel_size, stride and dilation must be >= 1 and padding >= 0, got "
                             f"{self.kernel_size}, {self.stride}, {self.dilation}, {self.padding}")
        if self.in_channels < 1 or self.out_channels < 1:
            raise ValueError(f"Conv2d: channel counts must be positive, got {in_channels}, {out_channels}")
        self.act = K.act_code(activation, from_output=True)
        self.activation = activation
        kh, kw = self.kernel_size
        bound = 1.0 / math.sqrt(in_channels * kh * kw)
        self.weight = uniform_param((out_channels, in_channels, kh, kw), bound, dtype)
        self.bias = uniform_param((out_channels,), bound, dtype) if bias else None
        self.cols = self.w = self.y = self.x_shape = None

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
             f"padding={self.padding}")
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.bias is None:
            s += ", bias=False"
        return s + (f", activation={self.activation!r}" if self.activation else "")

    def _geometry(self, H, W):
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self.kernel_size, self.stride, self.padding, self.dilation
        OH, OW = out_size(H, kh, sh, ph, dh), out_size(W, kw, sw, pw, dw)
        if OH < 1 or OW < 1:
            raise ValueError(f"{self.describe()}: input {H}x{W} is smaller than the (dilated) kernel")
        return (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)

    def _forward4(self, x):
        # x: (N, C_in, H, W); weight: (C_out, C_in, kh, kw); y: (N, C_out, OH, OW)
        x = self._input(x)
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"{self.describe()}: expected input (N, {self.in_channels}, H, W) or unbatched "
                             f"({self.in_channels}, H, W), got {x.shape}")
        N, C, H, W = x.shape
        geom = self._geometry(H, W)
        OH, OW = geom[-2:]
        Kdim = C * geom[0] * geom[1]
        # under autocast: 16-bit copies of x, W and b (a 16-bit x outside it: the layer's dtype)
        x, w, b = amp.cast(amp.compute_dtype(self.weight.dtype), x, self.weight.data,
                           None if self.bias is None else self.bias.data)
        cols = K.im2col(x, gpublas.empty((Kdim, N * OH * OW), x.dtype), geom)  # (K, N*P)
        Y = K.gemm(w.reshape(self.out_channels, Kdim), cols, acc=True)             # (C_out, N*P), FP32
        y = gpublas.empty((N, self.out_channels, OH, OW), x.dtype)
        K.cnp_to_nchw_bias(Y, b, y, self.act)
        Y.free()
        # cached: cols (the lowered input) for dW = dY cols^T, the input shape for col2im, y only
        # with a fused activation (its derivative is written in terms of the output), and w for
        # dcols = W^T dY: the parameter itself, or its 16-bit copy under autocast
        self.cols, self.w, self.x_shape, self.geom = cols, w, x.shape, geom
        self.y = y if self.act else None
        return y

    def _backward4(self, dy):
        # dy: (N, C_out, OH, OW) -> dx: (N, C_in, H, W); adds dW (C_out, C_in, kh, kw), db (C_out,)
        cols, w = self._cached("cols", "w")
        N, C, H, W = self.x_shape
        OH, OW = self.geom[-2:]
        dy = self._grad_input(dy, (N, self.out_channels, OH, OW), cols.dtype)  # y's dtype: the lowered x's
        if self.act:
            # y = act(z): dL/dz = dL/dy * act'(z), from the cached y
            dy = K.act_backward(self.y, dy, gpublas.empty_like(dy), self.act)
        if self.bias is not None:
            # dL/db[c] = sum over n, oh, ow of dy[n, c, oh, ow]
            K.bias_grad_sum(dy, self.bias.grad, self.out_channels, OH * OW)
        # dY (C_out, N*OH*OW) = dy (N, C_out, OH*OW) with its first two axes swapped
        dY = K.swap01(dy.reshape(N, self.out_channels, OH * OW),
                      gpublas.empty((self.out_channels, N, OH * OW), dy.dtype)).reshape(self.out_channels, N * OH * OW)
        Kdim = cols.shape[0]
        # Y = W cols  =>  dL/dW = dY cols^T (into the FP32 .grad: a float32 C accumulates 16-bit products)
        dW = self.weight.grad.reshape(self.out_channels, Kdim)
        K.gemm(dY, cols, dW, beta=1.0, trans_b=True)
        # dL/dcols = W^T dY, then each input pixel gathers the taps that read it
        dcols = K.gemm(w.reshape(self.out_channels, Kdim), dY, trans_a=True, acc=True)  # FP32 for 16-bit dY
        dx = K.col2im(dcols, gpublas.empty(self.x_shape, dy.dtype), self.geom)
        dY.free()
        dcols.free()
        return dx
