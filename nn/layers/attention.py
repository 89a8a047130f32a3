"""Scaled dot-product attention, fused: y = softmax(scale q k^T [+ causal mask]) v in one kernel forward and
one (after a small row-sum pre-pass) backward, FlashAttention-2's algorithm (nn/cuda/attention.cu): no
T x T matrix in device memory in either direction, so memory grows with T, not T^2. float32 and float64 run on
CUDA cores; float16 and bfloat16 on the tensor cores (nn/cuda/attention_half.cu: mma.sync with float softmax and
sums; a GPU below compute capability 8.0 raises nn.kernels_attention.NoTensorCoresError).

    attn = nn.ScaledDotProductAttention(is_causal=True)
    y = attn(q, k, v)                  # q (B, H, Tq, D), k and v (B, H, Tk, D)
    dq, dk, dv = attn.backward(dy)     # dy (B, H, Tq, D)

nn.functional.scaled_dot_product_attention(q, k, v, is_causal=..., scale=...) is the forward alone, with
torch.nn.functional's argument names.
"""
import math

import numpy as np

import gpublas
from gpublas import dtypes

from .. import kernels_attention as KA
from ..module import Module


def _check(q, k, v, what):
    """q, k, v as 4-D (B, H, T, D) float DeviceArrays of one dtype that the fused kernels take, else a
    ValueError / TypeError naming the problem."""
    arrays = []
    for name, x in (("query", q), ("key", k), ("value", v)):
        if not isinstance(x, gpublas.DeviceArray):
            x = gpublas.to_device(np.asarray(x))
        if x.ndim == 3:
            x = x[:, None]  # (B, T, D): one head
        if x.ndim != 4:
            raise ValueError(f"{what}: {name} must be (B, H, T, D) or (B, T, D), got shape {x.shape}")
        arrays.append(x)
    q, k, v = arrays
    if not (q.dtype == k.dtype == v.dtype) or not dtypes.is_float(q.dtype):
        raise TypeError(f"{what}: query, key and value must share one float dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.shape[-1] == k.shape[-1] == v.shape[-1]):
        raise ValueError(f"{what}: mismatched head dims: query {q.shape[-1]}, key {k.shape[-1]}, value "
                         f"{v.shape[-1]} (the fused kernels take one head dim D for all three)")
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]:
        raise ValueError(f"{what}: query {q.shape}, key {k.shape} and value {v.shape} must be (B, H, Tq, D), "
                         f"(B, H, Tk, D), (B, H, Tk, D)")
    if k.shape[2] == 0:
        raise ValueError(f"{what}: key and value have no positions (Tk = 0)")
    KA.check_head_dim(q.shape[-1], what)
    if q.dtype in dtypes.HALVES:
        KA.require_tensor_cores(q.dtype, what)
    return q, k, v


def _scale(scale, D):
    return 1.0 / math.sqrt(D) if scale is None else float(scale)


def _no_dropout(p, what):
    if p:
        raise NotImplementedError(f"{what}: dropout_p > 0 is not implemented in the fused kernels (got {p}); "
                                  "use dropout_p=0.0 or eval mode")


def _forward(q, k, v, scale, causal):
    """(y, lse): the output (B, H, Tq, D) and the rows' logsumexp (B * H * Tq,) in the compute dtype."""
    B, H, Tq, D = q.shape
    y = gpublas.empty((B, H, Tq, D), q.dtype)
    lse = gpublas.empty((B * H * Tq,), dtypes.TABLE[q.dtype].compute)
    KA.forward(q, k, v, y, lse, scale, causal)
    return y, lse


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(scale query key^T [causal]) value for query (B, H, Tq, D), key and value (B, H, Tk, D) (or
    (B, T, D)): torch.nn.functional.scaled_dot_product_attention's forward, fused. scale defaults to
    1 / sqrt(D); is_causal masks key j > query i (top-left, as PyTorch). No attn_mask, no dropout."""
    what = "scaled_dot_product_attention"
    if attn_mask is not None:
        raise NotImplementedError(f"{what}: attn_mask is not supported by the fused kernels (is_causal is)")
    _no_dropout(dropout_p, what)
    q, k, v = _check(query, key, value, what)
    y, _ = _forward(q, k, v, _scale(scale, q.shape[-1]), is_causal)
    return y if query.ndim == 4 else y[:, 0]


class ScaledDotProductAttention(Module):
    """y = softmax(scale q k^T [causal]) v with its hand-written backward, both fused (FlashAttention-2):
    forward keeps q, k, v, y and the rows' logsumexp (O(T) memory), backward recomputes the probabilities
    tile by tile from them. is_causal masks key j > query i (PyTorch's top-left alignment); scale defaults to
    1 / sqrt(D). dropout_p > 0 in training raises NotImplementedError (eval mode ignores it, as PyTorch)."""
    kernel_families = ("attention",)  # nn.prefetch

    def __init__(self, is_causal=False, scale=None, dropout_p=0.0):
        super().__init__()
        if not 0.0 <= dropout_p < 1.0:
            raise ValueError(f"ScaledDotProductAttention: dropout_p must be in [0, 1), got {dropout_p}")
        self.is_causal, self.scale, self.dropout_p = bool(is_causal), scale, float(dropout_p)
        self.saved = None

    def extra_repr(self):
        return f"is_causal={self.is_causal}, scale={self.scale}, dropout_p={self.dropout_p}"

    def forward(self, q, k, v):
        # q: (B, H, Tq, D) or (B, Tq, D); k, v: (B, H, Tk, D) or (B, Tk, D) -> y: q's shape
        if self.training:
            _no_dropout(self.dropout_p, self.describe())
        squeeze = getattr(q, "ndim", 4) == 3
        q, k, v = _check(q, k, v, self.describe())
        scale = _scale(self.scale, q.shape[-1])
        y, lse = _forward(q, k, v, scale, self.is_causal)
        # cached: the inputs and the output (delta = rowsum(dy y)), and the rows' logsumexp, from which
        # backward recomputes P = exp(scale q k^T - lse) tile by tile: O(T) memory, no T x T matrix
        self.saved = (q, k, v, y, lse, scale, squeeze)
        return y[:, 0] if squeeze else y

    def backward(self, dy):
        # dy: y's shape -> (dq, dk, dv): the shapes of q, k, v
        q, k, v, y, lse, scale, squeeze = self._cached("saved")
        dy = self._grad_dtype(dy, y.dtype)
        if squeeze and getattr(dy, "ndim", 0) == 3:
            dy = dy[:, None]
        dy = self._grad_input(dy, y.shape, y.dtype)
        B, H, Tk, D = k.shape
        # dV = P^T dY;  dP = dY V^T;  dS = P * (dP - rowsum(dY * Y));  dQ = scale dS K;  dK = scale dS^T Q
        dq = gpublas.empty(q.shape, dtypes.TABLE[q.dtype].compute)
        dk, dv = gpublas.empty((B, H, Tk, D), q.dtype), gpublas.empty((B, H, Tk, D), q.dtype)
        KA.backward(q, k, v, y, dy, lse, dq, dk, dv, scale, self.is_causal)
        if dq.dtype != q.dtype:
            dq = dq.astype(q.dtype)
        return (dq[:, 0], dk[:, 0], dv[:, 0]) if squeeze else (dq, dk, dv)
