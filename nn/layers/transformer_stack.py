"""TransformerEncoder, TransformerDecoder and Transformer with PyTorch's signatures, names (layers.N.*, norm.*,
encoder.*, decoder.*) and state_dict keys: stacks of deep copies of one layer (as torch's _get_clones: the copies
start from the same weights; each copy's dropout draws from a fresh seed), an optional final norm, and the
backward passes that run the stacks in reverse (the decoder's memory gradient summed over its layers).
"""
import copy

import numpy as np

from .. import init
from ..module import Module
from .container import ModuleList
from .dropout import DeviceDraw
from .multihead import layer_dtype
from .norm import LayerNorm
from .transformer import TransformerDecoderLayer, TransformerEncoderLayer


def _clones(layer, n, what):
    if not isinstance(layer, Module):
        raise TypeError(f"{what}: the layer to stack must be an nn.Module, got {type(layer).__name__}")
    if int(n) < 1:
        raise ValueError(f"{what}: num_layers must be positive, got {n}")
    layers = ModuleList()
    for _ in range(int(n)):
        clone = copy.deepcopy(layer)
        for m in clone.modules():
            if isinstance(m, DeviceDraw):
                m._new_draw()
        layers.append(clone)
    return layers


class TransformerEncoder(Module):
    """torch.nn.TransformerEncoder: num_layers copies of encoder_layer, then norm (if any). forward(src,
    mask=None, src_key_padding_mask=None, is_causal=None) passes the masks to every layer (a causal mask from
    the host is recognised as torch's _detect_is_causal_mask does); backward(dy) returns dsrc."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        # src: the layers' layout; y: src's shape
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)

    def backward(self, dy):
        # dy: the output's shape -> dsrc; the layers in reverse
        d = dy if self.norm is None else self.norm.backward(dy)
        for layer in reversed(list(self.layers)):
            d = layer.backward(d)
        return d


class TransformerDecoder(Module):
    """torch.nn.TransformerDecoder: num_layers copies of decoder_layer, then norm (if any). forward(tgt, memory,
    tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=None, memory_is_causal=False); backward(dy) returns (dtgt, dmemory), dmemory summed over
    the layers (each one reads the same memory)."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                      bool(tgt_is_causal), memory_is_causal)
        return x if self.norm is None else self.norm(x)

    def backward(self, dy):
        # dy: the output's shape -> (dtgt, dmemory)
        d = dy if self.norm is None else self.norm.backward(dy)
        dmem = None
        for layer in reversed(list(self.layers)):
            d, dm = layer.backward(d)
            dmem = dm if dmem is None else dmem + dm
        return d, dmem


class Transformer(Module):
    """torch.nn.Transformer: an encoder (num_encoder_layers layers and a final LayerNorm) and a decoder
    (num_decoder_layers, a final LayerNorm); every weight of two or more dimensions xavier-uniform, as torch's
    _reset_parameters. forward(src, tgt, src_mask, tgt_mask, memory_mask, src_key_padding_mask,
    tgt_key_padding_mask, memory_key_padding_mask, src_is_causal, tgt_is_causal, memory_is_causal) returns the
    decoder's output; backward(dy) returns (dsrc, dtgt)."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        dtype = layer_dtype(dtype, device, "Transformer")
        kw = dict(layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first, bias=bias, dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self.d_model, self.nhead, self.batch_first = int(d_model), int(nhead), bool(batch_first)
        for p in self.parameters():
            if p.data.ndim > 1:  # xavier_uniform_
                bound = np.sqrt(6.0 / (p.shape[0] + int(np.prod(p.shape[1:]))))
                p.data.set(np.ascontiguousarray(init.uniform(p.shape, bound), dtype=p.dtype))

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) causal mask as torch makes it: -inf above the diagonal, 0 elsewhere (a host array, which
        the layers recognise as causal and run through the fused kernels' own mask)."""
        upper = np.arange(sz)[None, :] > np.arange(sz)[:, None]
        return np.where(upper, -np.inf, 0.0).astype(np.float32 if dtype is None else dtype)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                            tgt_is_causal, memory_is_causal)

    def backward(self, dy):
        # dy: the output's shape -> (dsrc, dtgt): the memory's gradient runs back through the encoder
        dtgt, dmem = self.decoder.backward(dy)
        return self.encoder.backward(dmem), dtgt

