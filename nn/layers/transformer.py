"""TransformerEncoderLayer and TransformerDecoderLayer with PyTorch's signatures, defaults (batch_first=False:
(T, B, E); batch_first: (B, T, E); unbatched (T, E)), masks, names and state_dict keys (self_attn,
[multihead_attn,] linear1, dropout, linear2, norm1, norm2, [norm3,] dropout1, dropout2, [dropout3]).

Each block is a residual branch with a LayerNorm after it (norm_first=False) or before it (norm_first=True:
GPT-2's pre-norm block). The layers pass their layout to their attention (MultiheadAttention transposes once
each way); LayerNorm, the feed-forward's Dense and the residual adds work on the last axis in any layout.
The activation is fused into linear1's bias kernel.
"""
from ..module import Module
from .dense import Dense
from .dropout import Dropout
from .multihead import MultiheadAttention, layer_dtype
from .norm import LayerNorm

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


def activation_name(activation, what):
    """'relu', 'gelu' or 'gelu_tanh' for the activations PyTorch's layers take: those strings, the functional
    relu and gelu (torch.nn.functional's, torch's, nn.functional's: by name), and ReLU() / GELU(approximate)
    module instances (torch.nn's or nn's: by class). Any other callable raises ValueError: nn fuses the activation
    into linear1's kernel, which has these three."""
    if isinstance(activation, str):
        name = activation
    elif type(activation).__name__ in ("ReLU", "GELU"):          # a module instance, torch's or nn's
        approximate = getattr(activation, "approximate", "none")
        name = "relu" if type(activation).__name__ == "ReLU" else {"none": "gelu", "tanh": "gelu_tanh"}.get(approximate)
    elif callable(activation):
        name = getattr(activation, "__name__", None)
    else:
        name = None
    if name not in ACTIVATIONS:
        raise ValueError(f"{what}: activation must be 'relu', 'gelu' or 'gelu_tanh', the functional relu or gelu "
                         f"(torch's or nn's) or a ReLU() / GELU() instance: nn fuses it into linear1's kernel and "
                         f"cannot run {activation!r}")
    return name


class _Layer(Module):
    """What both layers share: the feed-forward block and the residual wiring of one sublayer."""

    def _feed_forward(self, d_model, dim_feedforward, dropout, activation, layer_norm_eps, bias, dtype, norms):
        self.linear1 = Dense(d_model, dim_feedforward, bias=bias, activation=activation, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Dense(dim_feedforward, d_model, bias=bias, dtype=dtype)
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        for i in range(1, norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.ran = False

    def _ff(self, x, out_drop):
        return out_drop(self.linear2(self.dropout(self.linear1(x))))

    def _ff_backward(self, d, out_drop):
        return self.linear1.backward(self.dropout.backward(self.linear2.backward(out_drop.backward(d))))

    def _sub(self, x, norm, branch):
        """One residual sublayer: x + branch(norm(x)) (norm_first) or norm(x + branch(x))."""
        return x + branch(norm(x)) if self.norm_first else norm(x + branch(x))

    def _sub_backward(self, d, norm, branch_backward):
        """dx of _sub: y = x + f(norm(x)) => dx = dy + norm'(f'(dy)); y = norm(x + f(x)) => g = norm'(dy),
        dx = g + f'(g)."""
        if self.norm_first:
            return d + norm.backward(branch_backward(d))
        g = norm.backward(d)
        return g + branch_backward(g)

    def _check_ran(self):
        if not self.ran:
            raise RuntimeError(f"{self.describe()}: backward() called before forward() (nothing cached)")

    def extra_repr(self):
        return (f"d_model={self.self_attn.embed_dim}, nhead={self.self_attn.num_heads}, "
                f"activation={self.activation!r}, norm_first={self.norm_first}, batch_first={self.batch_first}")


class TransformerEncoderLayer(_Layer):
    """torch.nn.TransformerEncoderLayer: self-attention and a feed-forward block (linear1, activation, dropout,
    linear2), each with a residual connection and a LayerNorm. forward(src, src_mask=None,
    src_key_padding_mask=None, is_causal=False): masks as MultiheadAttention's. backward(dy) returns dsrc."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        dtype = layer_dtype(dtype, device, "TransformerEncoderLayer")
        self.activation = activation_name(activation, "TransformerEncoderLayer")
        self.batch_first, self.norm_first = bool(batch_first), bool(norm_first)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dtype)
        self._feed_forward(d_model, dim_feedforward, dropout, self.activation, layer_norm_eps, bias, dtype, 2)

    def _sa(self, x, mask, kpm, is_causal):
        return self.dropout1(self.self_attn(x, x, x, key_padding_mask=kpm, need_weights=False, attn_mask=mask,
                                            is_causal=is_causal)[0])

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        # src: (T, B, E) ((B, T, E) with batch_first, (T, E) unbatched); y: src's shape
        x = self._input(src)
        x = self._sub(x, self.norm1, lambda h: self._sa(h, src_mask, src_key_padding_mask, is_causal))
        y = self._sub(x, self.norm2, lambda h: self._ff(h, self.dropout2))
        self.ran = True  # cached: nothing of its own (the children keep what their backward needs)
        return y

    def backward(self, dy):
        # dy: the output's shape -> dsrc: the same; each residual adds its gradient to its branch's
        self._check_ran()
        d = self._sub_backward(self._input(dy), self.norm2, lambda g: self._ff_backward(g, self.dropout2))
        return self._sub_backward(d, self.norm1, lambda g: self.self_attn.backward(self.dropout1.backward(g)))


class TransformerDecoderLayer(_Layer):
    """torch.nn.TransformerDecoderLayer: self-attention on the target, cross-attention on the encoder's memory
    (multihead_attn) and the feed-forward block, each with a residual connection and a LayerNorm. forward(tgt,
    memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=False, memory_is_causal=False); backward(dy) returns (dtgt, dmemory)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        dtype = layer_dtype(dtype, device, "TransformerDecoderLayer")
        self.activation = activation_name(activation, "TransformerDecoderLayer")
        self.batch_first, self.norm_first = bool(batch_first), bool(norm_first)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dtype)
        self._feed_forward(d_model, dim_feedforward, dropout, self.activation, layer_norm_eps, bias, dtype, 3)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        # tgt: (T, B, E), memory: (S, B, E) (batch_first: (B, T, E), (B, S, E); unbatched (T, E), (S, E))
        x, mem = self._input(tgt), self._input(memory)

        def sa(h):
            return self.dropout1(self.self_attn(h, h, h, key_padding_mask=tgt_key_padding_mask, need_weights=False,
                                                attn_mask=tgt_mask, is_causal=tgt_is_causal)[0])

        def ca(h):
            return self.dropout2(self.multihead_attn(h, mem, mem, key_padding_mask=memory_key_padding_mask,
                                                     need_weights=False, attn_mask=memory_mask,
                                                     is_causal=memory_is_causal)[0])
        x = self._sub(x, self.norm1, sa)
        x = self._sub(x, self.norm2, ca)
        y = self._sub(x, self.norm3, lambda h: self._ff(h, self.dropout3))
        self.ran = True  # cached: nothing of its own (the children keep what their backward needs)
        return y

    def backward(self, dy):
        # dy: the output's shape -> (dtgt, dmemory); memory feeds the cross-attention's key and value
        self._check_ran()
        dmem = []

        def ca_backward(g):
            dq, dk, dv = self.multihead_attn.backward(self.dropout2.backward(g))
            dmem.append(dk + dv)
            return dq
        d = self._sub_backward(self._input(dy), self.norm3, lambda g: self._ff_backward(g, self.dropout3))
        d = self._sub_backward(d, self.norm2, ca_backward)
        d = self._sub_backward(d, self.norm1, lambda g: self.self_attn.backward(self.dropout1.backward(g)))
        return d, dmem[0]
