"""GPT: GPT-2's architecture as llm.c and nanoGPT write it, on nn's layers.

    model = nn.models.GPT(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=64)
    opt = model.configure_optimizers(weight_decay=0.1, learning_rate=1e-3)
    loss = crit(model(x), y); opt.zero_grad(); model.backward(crit.backward()); opt.step()

Token and position embeddings (wte, wpe), n_layer pre-norm causal blocks (nn.TransformerEncoderLayer with
norm_first=True, GELU's tanh form, a 4 n_embd feed-forward: nanoGPT's Block), a final LayerNorm (ln_f) and
the LM head tied to wte: logits = ln_f(x) wte.weight^T, so wte.weight.grad receives the head's gradient
and the embedding's, summed. GPT-2's init: every Linear weight and both embeddings N(0, 0.02), biases 0,
the residual projections (self_attn.out_proj and linear2) N(0, 0.02 / sqrt(2 n_layer)).
"""
import math

import numpy as np

import gpublas

from .. import init
from .. import kernels as K
from ..layers.container import Sequential
from ..layers.dropout import Dropout
from ..layers.embedding import Embedding
from ..layers.norm import LayerNorm
from ..layers.transformer import TransformerEncoderLayer
from ..loss import SoftmaxCrossEntropy
from ..module import Module
from ..optim import AdamW
from . import gpt_decode, gpt_generate, gpt_io


class GPT(Module):
    """forward(idx, targets=None) on (B, T) token ids (T <= block_size) returns logits (B, T, vocab_size), or with
    targets (B, T) (logits, loss): the mean cross-entropy (a float; targets -1 ignored), as nanoGPT's;
    backward(dlogits=None) adds every parameter's gradient (dlogits None: the loss's) and returns None.
    tensor_parallel=group (an nn.distributed group) splits the built model over its ranks, Megatron-LM's way
    (nn.distributed.parallelize: each rank's logits are then its V / T columns)."""
    # nn.prefetch: the example's training step launches these besides the layers' own (residual adds,
    # the embeddings' sum, casts; measured with a Module.get hook)
    kernel_families = ("elementwise:binary_real", "elementwise:unary_real", "memory:cast_nd3_real",
                       ("memory:cast_nd3_real", np.int64))

    def __init__(self, vocab_size, block_size, n_layer=12, n_head=12, n_embd=768, dropout=0.0, bias=True, *,
                 dtype=np.float32, tensor_parallel=None):
        super().__init__()
        if min(vocab_size, block_size, n_layer, n_head, n_embd) < 1:
            raise ValueError(f"GPT: sizes must be positive, got vocab_size={vocab_size}, block_size={block_size}, "
                             f"n_layer={n_layer}, n_head={n_head}, n_embd={n_embd}")
        self.vocab_size, self.block_size, self.n_layer = int(vocab_size), int(block_size), int(n_layer)
        self.n_head, self.n_embd = int(n_head), int(n_embd)
        C = self.n_embd
        self.wte = Embedding(vocab_size, C, dtype=dtype)
        self.wpe = Embedding(block_size, C, dtype=dtype)
        self.drop = Dropout(dropout)
        self.h = Sequential(*(TransformerEncoderLayer(C, n_head, 4 * C, dropout, "gelu_tanh", 1e-5, True, True, bias,
                                                      dtype=dtype) for _ in range(n_layer)))
        for block in self.h:  # nanoGPT's Block: dropout on the attention probabilities and on each residual
            block.dropout.p = 0.0  # branch's output, none between the GELU and the second Linear
        self.ln_f = LayerNorm(C, bias=bias, dtype=dtype)
        self._init_weights()
        self.x = None
        if tensor_parallel is not None:   # a Group: nn.distributed is loaded (it made the group) and registered
            parallelize(self, tensor_parallel)

    def _init_weights(self):
        resid = 0.02 / math.sqrt(2 * self.n_layer)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                p.data.fill(0)
            elif p.data.ndim == 2:  # Linear weights, in_proj_weight and the embeddings
                std = resid if name.endswith(("out_proj.weight", "linear2.weight")) else 0.02
                p.data.set(np.ascontiguousarray(std * init.normal(p.shape), dtype=p.dtype))

    def extra_repr(self):
        return (f"vocab_size={self.vocab_size}, block_size={self.block_size}, n_layer={self.n_layer}, "
                f"n_head={self.n_head}, n_embd={self.n_embd}")

    def num_parameters(self):
        return sum(p.data.size for p in self.parameters())

    def forward(self, idx, targets=None):
        # idx: (B, T) ints; logits: (B, T, V); targets: (B, T) ints (-1: ignored), as nanoGPT's
        logits = self._logits(idx)
        if targets is None:
            self.crit = None
            return logits
        self.crit = self._criterion()
        return logits, self.crit(logits, targets)

    def _logits(self, idx):
        shape = idx.shape
        if len(shape) != 2 or shape[1] < 1:
            raise ValueError(f"{self.describe()}: expected token ids (B, T), got shape {shape}")
        B, T = shape
        if T > self.block_size:
            raise ValueError(f"{self.describe()}: sequence length {T} is past the position table (block_size "
                             f"{self.block_size})")
        x = self.wte(idx)                                  # (B, T, C)
        x += self.wpe(_positions(T))                       # (T, C), broadcast over B
        x = self.drop(x)
        for block in self.h:
            x = block(x, is_causal=True)
        x2 = self.ln_f(x).reshape(B * T, self.n_embd)
        logits = self._head(x2)                            # (B * T, V)
        V = logits.shape[1]
        self.x, self.bt = x2, (B, T, V)  # cached: the final LayerNorm's output, for the head's weight gradient
        return logits.reshape(B, T, V)

    def _head(self, x2):
        """The LM head tied to wte: logits (B*T, V) = x2 (B*T, C) wte.weight^T (V / T columns on a rank of a
        tensor-parallel GPT, whose wte holds V / T rows)."""
        return K.gemm(x2, self.wte.weight.data, trans_b=True)

    def _head_backward(self, d2, x2):
        """dL/dx2 (B*T, C) for dlogits d2 (B*T, V); adds the head's share of wte.weight.grad."""
        w = self.wte.weight
        K.gemm(d2, x2, w.grad, beta=1.0, trans_a=True)     # logits = x W^T  =>  dW += dlogits^T x
        return K.gemm(d2, w.data)                          #                     dx = dlogits W

    def _criterion(self):
        """The loss forward(idx, targets) computes: nanoGPT's cross-entropy, -1 ignored."""
        return SoftmaxCrossEntropy(ignore_index=-1)

    def backward(self, dlogits=None):
        # dlogits: (B, T, V) -> None; adds every parameter's gradient (wte's: the head's and the embedding's).
        # After model(idx, targets), dlogits None is the loss's gradient.
        x2 = self._cached("x")
        if dlogits is None:
            if getattr(self, "crit", None) is None:
                raise RuntimeError(f"{self.describe()}: backward() without dlogits needs a forward with targets")
            dlogits = self.crit.backward()
        B, T, V = self.bt
        d2 = self._grad_input(dlogits, (B, T, V), x2.dtype).reshape(B * T, V)
        dx = self.ln_f.backward(self._head_backward(d2, x2).reshape(B, T, self.n_embd))
        for block in reversed(list(self.h)):
            dx = block.backward(dx)
        dx = self.drop.backward(dx)
        self.wpe.backward(gpublas.sum(dx, axis=0))          # x = tok + pos[t]  =>  dpos = the sum over B
        self.wte.backward(dx)
        return None

    @classmethod
    def from_pretrained(cls, path, dtype=None):
        """A GPT from a transformers GPT-2 directory (config.json, model.safetensors or pytorch_model.bin): the
        Conv1D (in, out) weights transposed into nn's (out, in), lm_head tied to wte; no torch needed for
        safetensors, no network. dtype None keeps the file's. A bad file raises GPTLoadError (nn/models/gpt_io.py)."""
        return gpt_io.from_pretrained(cls, path, dtype)

    def save_pretrained(self, path, safe_serialization=True):
        """This model as a transformers GPT-2 directory (GPT2LMHeadModel.from_pretrained reads it)."""
        return gpt_io.save_pretrained(self, path, safe_serialization)

    @classmethod
    def from_llmc(cls, path, dtype=np.float32):
        """A GPT from llm.c's checkpoint file (gpt2_124M.bin: version 3 float32 or 5 bfloat16)."""
        return gpt_io.from_llmc(cls, path, dtype)

    def save_llmc(self, path, dtype="float32"):
        """This model as llm.c's checkpoint (train_gpt2.c / train_gpt2.cu read it), float32 or bfloat16."""
        return gpt_io.save_llmc(self, path, dtype)

    def configure_optimizers(self, weight_decay=0.1, learning_rate=6e-4, betas=(0.9, 0.95), eps=1e-8):
        """AdamW with nanoGPT's groups: weight decay on the 2-D weights (matrices and embeddings) only,
        none on biases and LayerNorm parameters."""
        params = self.parameters()
        decay = [p for p in params if p.data.ndim >= 2]
        no_decay = [p for p in params if p.data.ndim < 2]
        return AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                     lr=learning_rate, betas=betas, eps=eps)

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True, rng=None,
                 use_graph=True):
        """idx (B, T) (or a 1-D prompt (T,)) extended by max_new_tokens tokens, each drawn from softmax(logits /
        temperature) of the last position, top_k keeping the k largest logits and top_p the smallest set of
        tokens whose probability reaches top_p (nanoGPT's and transformers' sampling), the draw on the device
        with nn's generator (or `rng`). use_cache keeps each block's K and V in a device cache: a prefill, then
        one position per token through the blocks (nn/models/gpt_generate.py); past block_size the context
        slides as nanoGPT's. use_graph captures that decode step once (gpublas.graph) and replays it per token:
        the same kernels, so the same tokens as use_graph=False, for one host call a token. top_k=1 is greedy
        decoding (the same tokens with and without the cache)."""
        return gpt_generate.generate(self, idx, max_new_tokens, temperature, top_k, top_p, use_cache, rng, use_graph)


_positions = gpt_decode.positions


def parallelize(model, group):
    """GPT(..., tensor_parallel=group): nn.distributed.parallelize, which nn.distributed puts here when it is
    imported (nn's core never imports nn.distributed; a group is made by it, so it is loaded by then)."""
    raise TypeError("GPT: tensor_parallel takes a group of nn.distributed (dist.Group, dist.init_grid(...).tensor)")
