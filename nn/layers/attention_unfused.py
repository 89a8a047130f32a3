"""Scaled dot-product attention written with gpublas' batched GEMM and softmax (the T x T scores in memory),
with nn.ScaledDotProductAttention's interface: MultiheadAttention's path where the fused kernels decline (a head
dim outside 16..128 in steps of 8, 16-bit data on a GPU without tensor cores), as PyTorch's SDPA falls back to
its math backend. Its dropout draws nn.Dropout's mask, which the fused kernels draw too for the same seed and
offset (the tests compare the two paths so)."""
import math

import numpy as np

import gpublas

from .. import kernels as K
from ..module import Module
from .dropout import DeviceDraw


class UnfusedAttention(DeviceDraw, Module):
    """y = softmax(scale q k^T + mask) v on (B, H, T, D) arrays; is_causal masks key j > query i (torch's
    top-left alignment); mask (forward's argument) is an additive device array broadcastable to the scores
    (B, H, Tq, Tk) (nn/layers/masks.py makes PyTorch's masks so); scale defaults to 1 / sqrt(D); dropout_p drops
    attention weights in train mode. After forward, `weights` holds the (B, H, Tq, Tk) attention weights (after
    dropout, as MultiheadAttention's need_weights returns them). backward(dy) returns (dq, dk, dv)."""

    def __init__(self, is_causal=False, scale=None, dropout_p=0.0):
        super().__init__()
        if not 0.0 <= dropout_p < 1.0:
            raise ValueError(f"UnfusedAttention: dropout_p must be in [0, 1), got {dropout_p}")
        self.is_causal, self.scale, self.dropout_p = bool(is_causal), scale, float(dropout_p)
        self._new_draw()
        self.q = None

    def extra_repr(self):
        return f"is_causal={self.is_causal}, scale={self.scale}, dropout_p={self.dropout_p}"

    def forward(self, q, k, v, mask=None):
        # q: (B, H, Tq, D); k: (B, H, Tk, D); v: (B, H, Tk, Dv); mask: broadcastable to (B, H, Tq, Tk); y: (B, H, Tq, Dv)
        q, k, v = (self._input(a) for a in (q, k, v))
        if (q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]
                or q.shape[3] != k.shape[3]):
            raise ValueError(f"{self.describe()}: expected q (B, H, Tq, D), k (B, H, Tk, D) and v (B, H, Tk, Dv), got "
                             f"{q.shape}, {k.shape}, {v.shape}")
        B, H, Tq, D = q.shape
        Tk, Dv = k.shape[2], v.shape[3]
        causal = self.is_causal
        scale = 1.0 / math.sqrt(D) if self.scale is None else float(self.scale)
        q3, k3, v3 = (a.reshape(B * H, a.shape[2], a.shape[3]) for a in (q, k, v))
        s = gpublas.gemm_batched(q3, k3, alpha=scale, trans_b=True)      # (BH, Tq, Tk)
        if causal:
            s += _causal_mask(Tq, Tk, s.dtype)
        if mask is not None:
            s4 = s.reshape(B, H, Tq, Tk)
            s4 += mask if mask.dtype == s.dtype else mask.astype(s.dtype)
        p = gpublas.softmax(s, out=s)
        pd, mask = p, None
        if self.training and self.dropout_p > 0:
            mask = gpublas.empty(p.shape, np.uint8)
            pd = K.dropout_forward(p, gpublas.empty_like(p), mask, self.dropout_p, self.seed, self.counter)
        y = gpublas.gemm_batched(pd, v3)                                 # (BH, Tq, Dv)
        # cached: q, k, v, the attention weights p (T x T: what the fused kernel avoids) and the dropout mask
        self.q, self.k, self.v, self.p, self.pd, self.mask, self.sc = q3, k3, v3, p, pd, mask, scale
        self.bh = (B, H)
        return y.reshape(B, H, Tq, Dv)

    @property
    def weights(self):
        """The last forward's attention weights (B, H, Tq, Tk), after dropout."""
        return self._cached("pd").reshape(*self.bh, *self.pd.shape[1:])

    def backward(self, dy):
        # dy: (B, H, Tq, Dv) -> dq (B, H, Tq, D), dk (B, H, Tk, D), dv (B, H, Tk, Dv)
        q = self._cached("q")
        k, v, p, scale = self.k, self.v, self.p, self.sc
        dy = self._input(dy).reshape(q.shape[0], q.shape[1], v.shape[2])
        dv = gpublas.gemm_batched(self.pd, dy, trans_a=True)               # P^T dy
        dp = gpublas.gemm_batched(dy, v, trans_b=True)                     # dy V^T
        if self.mask is not None:
            dp = K.dropout_backward(dp, self.mask, dp, self.dropout_p)
        # p = softmax(s): ds = p (dp - rowsum(dp p))
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
        dq = gpublas.gemm_batched(ds, k, alpha=scale)
        dk = gpublas.gemm_batched(ds, q, alpha=scale, trans_a=True)
        B, H = self.bh
        return tuple(a.reshape(B, H, a.shape[1], a.shape[2]) for a in (dq, dk, dv))


def _causal_mask(Tq, Tk, dtype, _cache={}):
    """(Tq, Tk) additive mask: 0 where key j <= query i, -inf above (made once per shape on the host)."""
    key = (Tq, Tk, np.dtype(dtype), gpublas.backend())
    if key not in _cache:
        m = np.where(np.arange(Tk)[None, :] > np.arange(Tq)[:, None], -np.inf, 0.0).astype(dtype)
        _cache[key] = gpublas.to_device(m)
    return _cache[key]
