"""MultiheadAttention and TransformerEncoderLayer with PyTorch's names, layouts, init and state_dict keys
(in_proj_weight (3E, E), in_proj_bias, out_proj.weight, out_proj.bias; the encoder layer's self_attn,
linear1, dropout, linear2, norm1, norm2, dropout1, dropout2), batch_first layouts (B, T, E).

Heads are split by one fused transpose: the input projection writes (B, T, 3, H, D) in one GEMM (q, k and v
side by side in each row, as torch's packed in_proj), and one strided copy makes it (3, B, H, T, D), whose
three slices are the attention's q, k and v; the heads' output (B, H, T, D) is merged back into (B, T, E)
by one more. The attention itself is nn.ScaledDotProductAttention (the fused kernels, which read q, k and v
as strided views of the projections: the heads are split with no copy at all; attention dropout inside
them; 16-bit data under nn.autocast on the tensor cores), or, where those decline (a head dim outside
16..128 in steps of 8, 16-bit data on a GPU without tensor cores), the unfused path of attention_unfused.py
(PyTorch's SDPA picks its math backend likewise).
"""
import math

import numpy as np

import gpublas

from .. import amp, init
from .. import kernels as K
from ..module import Module, Parameter
from ..kernels import attention as KA
from .attention import ScaledDotProductAttention
from .attention_unfused import UnfusedAttention
from .dense import Dense
from .dropout import Dropout
from .norm import LayerNorm


def _linear(x, w, b):
    """x (M, in) W^T (in, out) + b: one GEMM and, with a bias, the bias kernel (in place, or from the FP32
    accumulator into 16 bits, rounded once)."""
    z = K.gemm(x, w, trans_b=True, acc=b is not None)
    if b is None:
        return z
    return K.bias_act_forward(z, b, z if z.dtype == x.dtype else gpublas.empty(z.shape, x.dtype), w.shape[0], 1,
                              K.ACT[None])


def _linear_backward(d, x, w, dw, db):
    """dL/dx of y = x W^T + b for dL/dy = d (M, out); adds dW += d^T x and db += column sums of d."""
    K.gemm(d, x, dw, beta=1.0, trans_a=True)
    if db is not None:
        K.bias_grad_sum(d, db, w.shape[0], 1)
    return K.gemm(d, w)


def _heads(x, B, T, H, D):
    """(B, T, H, D) rows as (B, H, T, D): a view."""
    return x.reshape(B, T, H, D).transpose(0, 2, 1, 3)


def _fused_takes(D, dtype):
    """Whether the fused kernels take head dim D of dtype here (16-bit data: on the tensor cores)."""
    if D not in KA.HEAD_DIMS:
        return False
    if dtype in gpublas.runtime.dtypes.HALVES:
        try:
            KA.require_tensor_cores(dtype)
        except KA.NoTensorCoresError:
            return False
    return True


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention(embed_dim, num_heads, dropout, bias, batch_first): forward(query, key=None,
    value=None, *, is_causal=False) returns the output (B, T, E) (no attention weights); with key and value None
    (or the query itself) it is self-attention, and backward(dy) returns dx, else (dquery, dkey, dvalue).
    Init as torch: in_proj_weight xavier-uniform, the biases zero, out_proj.weight Linear's uniform. Under
    nn.autocast the projections and the attention compute in 16 bits from the FP32 weights (as Dense)."""
    _storage_inputs = True  # a 16-bit input under autocast (from a layer before it)

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=True, *, dtype=np.float32):
        super().__init__()
        E, H = int(embed_dim), int(num_heads)
        if E < 1 or H < 1 or E % H:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads}), both positive")
        self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        bound = math.sqrt(6.0 / (E + 3 * E))  # xavier_uniform_ on (3E, E)
        self.in_proj_weight = Parameter(init.uniform((3 * E, E), bound).astype(dtype))
        self.in_proj_bias = Parameter(np.zeros(3 * E, dtype)) if bias else None
        self.out_proj = Dense(E, E, bias=bias, dtype=dtype)
        if bias:
            self.out_proj.bias.data.fill(0)
        self.attn = ScaledDotProductAttention(dropout_p=self.dropout)
        self.attn_unfused = UnfusedAttention(dropout_p=self.dropout)
        self.x = None

    @property
    def kernel_families(self):
        """nn.prefetch: the projections' families and the fused attention's builds at this head dim in the weights'
        dtype (the dropout build too when dropout > 0: train mode's; eval mode's is the other)."""
        dtype = self.in_proj_weight.dtype
        fused = _fused_takes(self.head_dim, dtype)
        return ("gemm", "activation", "reduce", *((family, dtype, defines) for drop in (False, True)[:1 + (self.dropout > 0)]
                                                  for family, defines in KA.builds(dtype, self.head_dim, drop) if fused))

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"

    def _seq(self, x, what):
        x = self._input(x)
        if x.ndim != 3 or x.shape[2] != self.embed_dim:
            raise ValueError(f"{self.describe()}: expected {what} (B, T, {self.embed_dim})"
                             f"{'' if self.batch_first else ' as (T, B, E)'}, got {x.shape}")
        return x if self.batch_first else gpublas.ascontiguousarray(x.transpose(1, 0, 2))

    def forward(self, query, key=None, value=None, *, is_causal=False):
        # query: (B, Tq, E); key, value: (B, Tk, E) (None: self-attention); y: (B, Tq, E)
        self_attn = (key is None or key is query) and (value is None or value is query)
        E, H, D = self.embed_dim, self.num_heads, self.head_dim
        w, b = self.in_proj_weight.data, None if self.in_proj_bias is None else self.in_proj_bias.data
        q = self._seq(query, "query")
        self.in_dtype, low = q.dtype, amp.compute_dtype(w.dtype)   # under autocast: 16-bit projections
        w, b = amp.cast(low, w, b)
        B, Tq = q.shape[:2]
        if self_attn:
            x2 = amp.cast(low, q.reshape(B * Tq, E))[0]
            qkv = _linear(x2, w, b).reshape(B, Tq, 3, H, D)  # (B*T, 3E) = (B, T, 3, H, D)
            qh, kh, vh = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # (B, H, T, D) views
            inputs = (x2,)
        else:
            k, v = self._seq(key, "key"), self._seq(value, "value")
            if k.shape != v.shape or k.shape[0] != B:
                raise ValueError(f"{self.describe()}: key {k.shape} and value {v.shape} must match, batch {B}")
            Tk = k.shape[1]
            inputs = amp.cast(low, q.reshape(B * Tq, E), k.reshape(B * Tk, E), v.reshape(B * Tk, E))
            qh, kh, vh = (_heads(_linear(x2, w[i * E:(i + 1) * E], None if b is None else b[i * E:(i + 1) * E]),
                                 B, x2.shape[0] // B, H, D) for i, x2 in enumerate(inputs))
        attn = self.attn if _fused_takes(D, qh.dtype) else self.attn_unfused
        attn.is_causal = bool(is_causal)
        yh = attn(qh, kh, vh)                              # (B, H, Tq, D)
        merged = gpublas.ascontiguousarray(yh.transpose(0, 2, 1, 3)).reshape(B, Tq, E)
        y = self.out_proj(merged)
        # cached: the projections' inputs (for dW = d^T x), whether it was self-attention, the shapes
        self.x, self.self_attn, self.shape, self.w, self.used = inputs, self_attn, (B, Tq), w, attn
        return y if self.batch_first else gpublas.ascontiguousarray(y.transpose(1, 0, 2))

    def backward(self, dy):
        # dy: (B, Tq, E) -> dx (B, Tq, E) for self-attention, else (dquery, dkey, dvalue)
        inputs = self._cached("x")
        E, H, D = self.embed_dim, self.num_heads, self.head_dim
        (B, Tq), w = self.shape, self.w
        if not self.batch_first:
            dy = gpublas.ascontiguousarray(self._input(dy).transpose(1, 0, 2))
        dm = self.out_proj.backward(dy)                    # (B, Tq, E) = (B, Tq, H, D)
        dq, dk, dv = self.used.backward(_heads(dm, B, Tq, H, D))
        dw, db = self.in_proj_weight.grad, None if self.in_proj_bias is None else self.in_proj_bias.grad
        if self.self_attn:
            dqkv = gpublas.empty((B, Tq, 3, H, D), dy.dtype)
            for i, d in enumerate((dq, dk, dv)):               # (B, H, T, D) -> its third of each row
                dqkv[:, :, i] = d.transpose(0, 2, 1, 3)
            dx = _linear_backward(dqkv.reshape(B * Tq, 3 * E), inputs[0], w, dw, db)
            return self._out(dx.reshape(B, Tq, E))
        outs = []
        for i, (d, x2) in enumerate(zip((dq, dk, dv), inputs)):
            T = x2.shape[0] // B
            d2 = gpublas.ascontiguousarray(d.transpose(0, 2, 1, 3)).reshape(B * T, E)  # heads merged: one copy
            rows = slice(i * E, (i + 1) * E)
            outs.append(self._out(_linear_backward(d2, x2, w[rows], dw[rows], None if db is None else db[rows])
                                  .reshape(B, T, E)))
        return tuple(outs)

    def _out(self, d):
        """An input's gradient in the input's layout and dtype (the FP32 of an input cast to 16 bits)."""
        d = d if d.dtype == self.in_dtype else d.astype(self.in_dtype)
        return d if self.batch_first else gpublas.ascontiguousarray(d.transpose(1, 0, 2))


class TransformerEncoderLayer(Module):
    """torch.nn.TransformerEncoderLayer: self-attention and a feed-forward block (linear1, activation, dropout,
    linear2), each with a residual connection and a LayerNorm, after it (norm_first=False) or before it
    (norm_first=True: GPT-2's pre-norm block). The activation is fused into linear1's bias kernel."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=True, norm_first=False, bias=True, *, dtype=np.float32):
        super().__init__()
        if activation not in ("relu", "gelu", "gelu_tanh"):
            raise ValueError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or 'gelu_tanh', "
                             f"got {activation!r}")
        self.batch_first, self.norm_first, self.activation = bool(batch_first), bool(norm_first), activation
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=True, dtype=dtype)
        self.linear1 = Dense(d_model, dim_feedforward, bias=bias, activation=activation, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Dense(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.ran = False

    def extra_repr(self):
        return (f"d_model={self.self_attn.embed_dim}, nhead={self.self_attn.num_heads}, "
                f"activation={self.activation!r}, norm_first={self.norm_first}")

    def _sa(self, x, is_causal):
        return self.dropout1(self.self_attn(x, is_causal=is_causal))

    def _ff(self, x):
        return self.dropout2(self.linear2(self.dropout(self.linear1(x))))

    def _sa_backward(self, d):
        return self.self_attn.backward(self.dropout1.backward(d))

    def _ff_backward(self, d):
        return self.linear1.backward(self.dropout.backward(self.linear2.backward(self.dropout2.backward(d))))

    def forward(self, x, is_causal=False):
        # x: (B, T, E) (batch_first; else (T, B, E)); y: x's shape
        x = self._input(x)
        if not self.batch_first:
            x = gpublas.ascontiguousarray(x.transpose(1, 0, 2))
        if self.norm_first:   # x = x + sa(norm1(x)); x = x + ff(norm2(x))
            x = x + self._sa(self.norm1(x), is_causal)
            y = x + self._ff(self.norm2(x))
        else:                 # x = norm1(x + sa(x)); x = norm2(x + ff(x))
            x = self.norm1(x + self._sa(x, is_causal))
            y = self.norm2(x + self._ff(x))
        self.ran = True  # cached: nothing of its own (the children keep what their backward needs)
        return y if self.batch_first else gpublas.ascontiguousarray(y.transpose(1, 0, 2))

    def backward(self, dy):
        # dy: the output's shape -> dx: the same; the residual adds its gradient to the branch's
        if not self.ran:
            raise RuntimeError(f"{self.describe()}: backward() called before forward() (nothing cached)")
        dy = self._input(dy)
        if not self.batch_first:
            dy = gpublas.ascontiguousarray(dy.transpose(1, 0, 2))
        if self.norm_first:   # y = x + f(norm(x))  =>  dx = dy + norm'(f'(dy))
            d = dy + self.norm2.backward(self._ff_backward(dy))
            dx = d + self.norm1.backward(self._sa_backward(d))
        else:                 # y = norm(x + f(x))  =>  with g = norm'(dy): dx = g + f'(g)
            g = self.norm2.backward(dy)
            d = g + self._ff_backward(g)
            g = self.norm1.backward(d)
            dx = g + self._sa_backward(g)
        return dx if self.batch_first else gpublas.ascontiguousarray(dx.transpose(1, 0, 2))
