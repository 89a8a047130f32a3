"""Dense (Linear): y = x W^T + b, with W (out_features, in_features) as in PyTorch."""
import math

import numpy as np

import gpublas

from .. import amp
from .. import kernels as K
from ..module import Module, uniform_param


class Dense(Module):
    """Fully connected layer on (..., in_features) -> (..., out_features), as torch.nn.Linear: the leading
    axes are one batch axis to the GEMM (a view of a contiguous x). `activation` ('relu', 'tanh',
    'sigmoid', 'gelu', 'gelu_tanh') fuses an activation into the bias kernel; the default None is the
    plain affine map. The GELUs' derivative needs the pre-activation x W^T + b, which the same kernel
    writes beside y (kept for backward, as llm.c keeps its pre-GELU activations); the others' is
    written in terms of y. Under nn.autocast a float32 Dense computes in 16 bits from its FP32 weights
    (nn/amp.py).

    16-bit output (autocast, or a 16-bit layer) is rounded once, y = round16(act(x W^T + b)) from the
    FP32 accumulator, as PyTorch's fused linear (cuBLASLt's bias epilogue, oneDNN on the CPU) does: the
    GEMM writes FP32 (GemmEx's FP32 output) into a workspace and bias_act_forward adds the bias and the
    activation in FP32 and stores 16 bits. Two launches, as in FP32, where bias_act_forward works in
    place. A GEMM with beta = 1 onto C pre-filled with the broadcast bias would need a fill launch
    before it and a rounding pass to 16 bits after it (three); the cost here is only the FP32
    workspace, the output's size, freed at once. A plain product (no bias, no activation) is rounded by
    the GEMM itself."""
    kernel_families = ("gemm", "activation", "reduce")  # nn.prefetch
    _storage_inputs = True  # 16-bit input from a layer before it under autocast
    _fused_bias = True      # False: a subclass adds the bias itself (RowParallelDense, after its all-reduce)

    def __init__(self, in_features, out_features, bias=True, *, activation=None, dtype=np.float32):
        super().__init__()
        if in_features < 1 or out_features < 1:
            raise ValueError(f"Dense: in_features and out_features must be positive, got {in_features}, {out_features}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.act = K.act_code(activation)
        self.activation = activation
        bound = 1.0 / math.sqrt(in_features)
        self.weight = uniform_param((out_features, in_features), bound, dtype)
        self.bias = uniform_param((out_features,), bound, dtype) if bias else None
        self.x = self.y = None

    def extra_repr(self):
        act = f", activation={self.activation!r}" if self.activation else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}{act}"

    def forward(self, x):
        # x: (..., in_features), as (N, in_features) with N the product of the leading axes;
        # weight: (out_features, in_features); y: (..., out_features)
        x = self._input(x)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ValueError(f"{self.describe()}: expected input (..., {self.in_features}), got {x.shape}")
        lead = x.shape[:-1]
        x = x.reshape(-1, self.in_features) if x.ndim != 2 else x
        w, b = self.weight.data, self.bias.data if self.bias is not None and self._fused_bias else None
        # under autocast: 16-bit copies of x and the FP32 weights (cached for backward); outside it a
        # 16-bit input is computed in the layer's dtype
        x, w, b = amp.cast(amp.compute_dtype(w.dtype), x, w, b)
        epilogue = b is not None or self.act
        z = K.gemm(x, w, trans_b=True, acc=epilogue)  # x W^T (FP32 for 16-bit x when an epilogue follows)
        from_input = self.act in K.FROM_INPUT
        y = z if z.dtype == x.dtype and not from_input else gpublas.empty(z.shape, x.dtype)
        pre = None if not from_input else z if z.dtype == x.dtype else gpublas.empty(z.shape, x.dtype)
        if epilogue:
            K.bias_act_forward(z, b, y, self.out_features, 1, self.act, pre)  # act(z + b), rounded once
        if z is not y and z is not pre:
            z.free()
        # cached: x for dW = dy^T x; with a fused activation its derivative's argument: y (relu, tanh,
        # sigmoid: written in terms of the output) or the pre-activation z + b (the GELUs); w for
        # dx = dy W: the parameter itself, or its 16-bit copy under autocast (as x is then the 16-bit input).
        self.x, self.w, self.lead = x, w, lead
        self.y = (pre if from_input else y) if self.act else None
        return y.reshape(lead + (self.out_features,)) if len(lead) != 1 else y

    def backward(self, dy):
        # dy: (..., out_features) -> dx: (..., in_features); adds dW (out, in), db (out,)
        x, w = self._cached("x", "w")
        dy = self._grad_input(dy, self.lead + (self.out_features,), x.dtype)  # y's dtype: x's (as computed)
        dy = dy.reshape(x.shape[0], self.out_features) if dy.ndim != 2 else dy
        if self.act in K.FROM_INPUT:
            # y = gelu(z): dL/dz = dL/dy * gelu'(z), from the cached pre-activation z
            dy = K.act_backward_input(self.y, dy, gpublas.empty_like(dy), self.act)
        elif self.act:
            # y = act(z): dL/dz = dL/dy * act'(z), from the cached y
            dy = K.act_backward(self.y, dy, gpublas.empty_like(dy), self.act)
        # y = x W^T + b  =>  dL/dW = dy^T x (into the FP32 .grad: a float32 C accumulates 16-bit products)
        K.gemm(dy, x, self.weight.grad, beta=1.0, trans_a=True)
        if self.bias is not None and self._fused_bias:
            # dL/db = sum over the batch of dy
            K.bias_grad_sum(dy, self.bias.grad, self.out_features, 1)
        # dL/dx = dy W
        dx = K.gemm(dy, w)
        return dx.reshape(self.lead + (self.in_features,)) if len(self.lead) != 1 else dx


Linear = Dense
