"""MultiheadAttention with PyTorch's signature, defaults, names, layouts, init and state_dict keys (in_proj_weight
(3E, E), or q_proj_weight, k_proj_weight, v_proj_weight where kdim or vdim differ from embed_dim; in_proj_bias,
out_proj.weight, out_proj.bias), batch_first=False by default as PyTorch: (T, B, E), (B, T, E) with
batch_first, (T, E) unbatched.

Heads are split by one fused transpose: for self-attention the input projection writes (B, T, 3, H, D) in one
GEMM (q, k and v side by side in each row, as torch's packed in_proj), whose three slices are the attention's
q, k and v as strided views; the fused kernel writes the heads' output (B, H, T, D) straight into a (B, T, E)
buffer (the unfused path merges it by one copy). The attention is nn.ScaledDotProductAttention (the fused
kernels: no mask, a causal one, or a key-padding mask from the host that pads at the end, nn/layers/masks.py)
or, for any other mask, need_weights, or a head dim the fused kernels decline, the unfused path of
attention_unfused.py (PyTorch's SDPA picks its math backend likewise).
"""
import math

import numpy as np

import gpublas

from .. import amp, init
from .. import kernels as K
from ..kernels import attention as KA
from ..module import Module, Parameter
from . import masks
from .attention import ScaledDotProductAttention, fused_takes
from .attention_unfused import UnfusedAttention
from .dense import Dense


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


def layer_dtype(dtype, device, what):
    """PyTorch's factory kwargs: dtype None is float32; device None, 'cuda' or 'cuda:N' (nn's arrays live on
    the current gpublas device)."""
    if device is not None and not str(device).startswith("cuda"):
        raise ValueError(f"{what}: device must be None or 'cuda' (nn's arrays live on gpublas' device), got {device!r}")
    return np.dtype(np.float32 if dtype is None else dtype)


def _xavier(shape, dtype):
    return Parameter(init.uniform(shape, math.sqrt(6.0 / (shape[0] + shape[1]))).astype(dtype))


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention. forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False) returns (attn_output, attn_weights): the
    weights (B, Tq, Tk) averaged over the heads (or (B, H, Tq, Tk)) with need_weights, else None. Masks as
    PyTorch's: a boolean True (or a float -inf) masks; attn_mask (Tq, Tk) or (B * num_heads, Tq, Tk),
    key_padding_mask (B, Tk); is_causal alone is the causal mask (PyTorch asks for the mask too), beside a mask
    a hint that it is causal. backward(dy) returns dquery where query, key and value are one array (self-
    attention), else (dquery, dkey, dvalue); the weights are an output without gradient.
    add_bias_kv appends bias_k and bias_v (parameters (1, 1, E)) to every sequence's projected keys and values,
    add_zero_attn a key and value of zeros after them; the masks get columns for them that mask nothing, as
    PyTorch pads them (nn/layers/masks.py's extend_keys).
    Init as torch: the input projections xavier-uniform, the biases zero, out_proj.weight Linear's uniform,
    bias_k and bias_v xavier-normal.
    Under nn.autocast the projections and the attention compute in 16 bits from the FP32 weights (as Dense)."""
    _storage_inputs = True  # a 16-bit input under autocast (from a layer before it)

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        what = "MultiheadAttention"
        E, H = int(embed_dim), int(num_heads)
        if E < 1 or H < 1 or E % H:
            raise ValueError(f"{what}: embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads}), both "
                             "positive")
        dtype = layer_dtype(dtype, device, what)
        self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
        self.kdim, self.vdim = int(kdim or E), int(vdim or E)
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _xavier((3 * E, E), dtype)  # xavier_uniform_ on (3E, E)
        else:
            self.q_proj_weight = _xavier((E, E), dtype)
            self.k_proj_weight = _xavier((E, self.kdim), dtype)
            self.v_proj_weight = _xavier((E, self.vdim), dtype)
        self.in_proj_bias = Parameter(np.zeros(3 * E, dtype)) if bias else None
        # add_bias_kv: one more key and value, bias_k and bias_v (1, 1, E) (head h's are columns h D .. h D + D - 1),
        # after the projected ones; xavier_normal_ as torch: std sqrt(2 / (fan_in + fan_out)) = sqrt(1 / E)
        self.bias_k = Parameter((init.normal((1, 1, E)) / math.sqrt(E)).astype(dtype)) if add_bias_kv else None
        self.bias_v = Parameter((init.normal((1, 1, E)) / math.sqrt(E)).astype(dtype)) if add_bias_kv else None
        self.add_zero_attn = bool(add_zero_attn)   # and a key and value of zeros after them
        self.extra = 0                             # the keys they add (set by forward)
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
        dtype = self.dtype
        fused = fused_takes(self.head_dim, dtype)
        return ("gemm", "activation", "reduce", *((family, dtype, defines) for drop in (False, True)[:1 + (self.dropout > 0)]
                                                  for family, defines in KA.builds(dtype, self.head_dim, drop) if fused))

    def extra_repr(self):
        kv = (", add_bias_kv=True" if self.bias_k is not None else "") + (", add_zero_attn=True" if self.add_zero_attn
                                                                         else "")
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}{kv}"

    def _projections(self, low):
        """[(w, b, dw, db)] of the q, k and v projections: rows of in_proj_weight or the three weights, cast
        to the compute dtype `low` (autocast), with their gradients' views."""
        inner = self.num_heads * self.head_dim   # embed_dim, or this rank's heads' share of it (nn.distributed)
        bias = self.in_proj_bias
        out = []
        for i, name in enumerate(("q", "k", "v")):
            rows = slice(i * inner, (i + 1) * inner)
            p = self.in_proj_weight if self._qkv_same_embed_dim else getattr(self, f"{name}_proj_weight")
            w, dw = (p.data[rows], p.grad[rows]) if self._qkv_same_embed_dim else (p.data, p.grad)
            b, db = (None, None) if bias is None else (bias.data[rows], bias.grad[rows])
            out.append((*amp.cast(low, w, b), dw, db))
        return out

    def _seq(self, x, what, width):
        """x as (B, T, width) batch-first; `unbatched` set for (T, width)."""
        x = self._input(x)
        order = "(B, T" if self.batch_first else "(T, B"
        if x.ndim not in (2, 3) or x.shape[-1] != width:
            raise ValueError(f"{self.describe()}: expected {what} {order}, {width}) or (T, {width}), got {x.shape}")
        if x.ndim == 2:
            return x[None]
        return x if self.batch_first else gpublas.ascontiguousarray(x.transpose(1, 0, 2))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        # query: (B, Tq, E) (or (Tq, B, E), or (Tq, E)); key: (B, Tk, kdim); value: (B, Tk, vdim)
        # -> (y (B, Tq, E) in query's layout, weights (B, Tq, Tk) / (B, H, Tq, Tk) or None)
        self_attn = key is query and value is query and self._qkv_same_embed_dim
        E, H, D = self.embed_dim, self.num_heads, self.head_dim
        unbatched = getattr(query, "ndim", np.ndim(query)) == 2
        q = self._seq(query, "query", E)
        self.in_dtype, low = q.dtype, amp.compute_dtype(self.dtype)   # under autocast: 16-bit projections
        proj = self._projections(low)
        B, Tq = q.shape[:2]
        if self_attn:
            x2 = amp.cast(low, q.reshape(B * Tq, E))[0]
            w, b = amp.cast(low, self.in_proj_weight.data, None if self.in_proj_bias is None else self.in_proj_bias.data)
            qkv = _linear(x2, w, b).reshape(B, Tq, 3, H, D)  # (B*T, 3E) = (B, T, 3, H, D)
            qh, kh, vh = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # (B, H, T, D) views
            inputs, Tk, self.w = (x2,), Tq, w
        else:
            k, v = self._seq(key, "key", self.kdim), self._seq(value, "value", self.vdim)
            if k.shape[:2] != v.shape[:2] or k.shape[0] != B:
                raise ValueError(f"{self.describe()}: key {k.shape} and value {v.shape} must have one batch and "
                                 f"length, batch {B}")
            Tk = k.shape[1]
            inputs = amp.cast(low, q.reshape(B * Tq, E), k.reshape(B * Tk, self.kdim), v.reshape(B * Tk, self.vdim))
            qh, kh, vh = (_heads(_linear(x2, w, b), B, x2.shape[0] // B, H, D)
                          for x2, (w, b, _, _) in zip(inputs, proj))
        if unbatched and key_padding_mask is not None:
            key_padding_mask = key_padding_mask[None]
        self.extra = (self.bias_k is not None) + self.add_zero_attn
        if self.extra:   # the bias and zero rows after the keys: (B, H, Tk + extra, D), the masks padded
            kh, vh = self._extend(kh, low), self._extend(vh, low, value=True)
            attn_mask, key_padding_mask, is_causal = masks.extend_keys(
                attn_mask, key_padding_mask, is_causal, need_weights, self.extra, Tq, Tk, self.describe())
            Tk += self.extra
        fused_ok = fused_takes(D, qh.dtype) and not need_weights
        plan = masks.plan(attn_mask, key_padding_mask, is_causal, B, H, Tq, Tk, qh.dtype, self.describe(), fused_ok)
        if fused_ok and plan.fusable:
            attn = self.attn
            attn.is_causal = plan.causal
            heads = gpublas.empty((B, Tq, H, D), qh.dtype)   # the kernel writes the heads merged: no copy after
            attn(qh, kh, vh, lengths=plan.lengths, out=heads.transpose(0, 2, 1, 3))
            merged = heads.reshape(B, Tq, H * D)
        else:
            attn = self.attn_unfused
            attn.is_causal = plan.causal
            yh = attn(qh, kh, vh, plan.mask)
            merged = gpublas.ascontiguousarray(yh.transpose(0, 2, 1, 3)).reshape(B, Tq, H * D)
        y = self.out_proj(merged)
        # cached: the projections' inputs (for dW = d^T x), whether it was self-attention, the shapes
        self.x, self.self_attn, self.shape, self.proj, self.used = inputs, self_attn, (B, Tq, unbatched), proj, attn
        weights = None
        if need_weights:
            weights = attn.weights                          # (B, H, Tq, Tk)
            if average_attn_weights:
                weights = weights.mean(axis=1)
            weights = weights[0] if unbatched else weights
        return self._layout(y, unbatched), weights

    def _extend(self, h, low, value=False):
        """h (B, H, Tk, D) followed by bias_k's (bias_v's) row for every sequence, then a row of zeros, as
        add_bias_kv and add_zero_attn ask: (B, H, Tk + extra, D)."""
        B, H, Tk, D = h.shape
        out = gpublas.empty((B, H, Tk + self.extra, D), h.dtype)
        out[:, :, :Tk] = h
        bias = self.bias_v if value else self.bias_k
        if bias is not None:
            out[:, :, Tk] = amp.cast(low, bias.data)[0].reshape(H, D)
        if self.add_zero_attn:
            out[:, :, -1] = 0
        return out

    def _extended_grads(self, dk, dv):
        """dk, dv (B, H, Tk + extra, D) cut to the projected keys' rows; bias_k.grad, bias_v.grad += the sums over
        the batch of their rows' gradients (y depends on bias_k through every sequence's copy of it)."""
        Tk = dk.shape[2] - self.extra
        if self.bias_k is not None:
            for p, d in ((self.bias_k, dk), (self.bias_v, dv)):
                g = p.grad.reshape(d.shape[1], d.shape[3])
                g += d[:, :, Tk].astype(g.dtype).sum(axis=0)
        return dk[:, :, :Tk], dv[:, :, :Tk]

    def _layout(self, y, unbatched):
        """(B, T, E) as the caller's layout: (T, E) unbatched, (T, B, E) without batch_first."""
        if unbatched:
            return y[0]
        return y if self.batch_first else gpublas.ascontiguousarray(y.transpose(1, 0, 2))

    def backward(self, dy):
        # dy: y's shape -> dquery for self-attention, else (dquery, dkey, dvalue) in the inputs' layouts
        inputs = self._cached("x")
        E, H, D = self.embed_dim, self.num_heads, self.head_dim
        B, Tq, unbatched = self.shape
        dy = self._input(dy)
        if unbatched:
            dy = dy[None]
        elif not self.batch_first:
            dy = gpublas.ascontiguousarray(dy.transpose(1, 0, 2))
        dm = self.out_proj.backward(dy)                    # (B, Tq, H * D): the heads' outputs side by side
        dq, dk, dv = self.used.backward(_heads(dm, B, Tq, H, D))
        if self.extra:
            dk, dv = self._extended_grads(dk, dv)
        if self.self_attn:
            dqkv = gpublas.empty((B, Tq, 3, H, D), dy.dtype)
            for i, d in enumerate((dq, dk, dv)):               # (B, H, T, D) -> its third of each row
                dqkv[:, :, i] = d.transpose(0, 2, 1, 3)
            db = None if self.in_proj_bias is None else self.in_proj_bias.grad
            dx = _linear_backward(dqkv.reshape(B * Tq, 3 * H * D), inputs[0], self.w, self.in_proj_weight.grad, db)
            return self._out(dx.reshape(B, Tq, E), unbatched)
        outs = []
        for d, x2, (w, _, dw, db) in zip((dq, dk, dv), inputs, self.proj):
            T = x2.shape[0] // B
            d2 = gpublas.ascontiguousarray(d.transpose(0, 2, 1, 3)).reshape(B * T, H * D)  # heads merged: one copy
            outs.append(self._out(_linear_backward(d2, x2, w, dw, db).reshape(B, T, x2.shape[1]), unbatched))
        return tuple(outs)

    def _out(self, d, unbatched):
        """An input's gradient in the input's layout and dtype (the FP32 of an input cast to 16 bits)."""
        d = d if d.dtype == self.in_dtype else d.astype(self.in_dtype)
        return self._layout(d, unbatched)
