"""GPT decoding with a key/value cache: the prefill, and a decode step with static shapes that a graph replays.

A prefill runs the prompt (its last block_size tokens) through every block once, keeping each block's K and V
in a preallocated (B, H, block_size, D) device cache. Each new token then runs one position through the blocks
(Decoder.step): its q, k, v from one (B, 3C) projection, k and v written into the cache at the position, one
query against the cache's first p + 1 keys (nn/cuda/attention_decode.cu: split over the keys in chunks, as
flash-decoding, then combined; no mask needed: every cached key precedes it), the MLP on one row per sequence,
the LM head on that position only. With one sequence (B = 1) the projections are matrix-vector products
(gpublas.gemv): a GEMM's tile would compute rows that do not exist.

The step reads everything that changes from token to token from device memory at fixed addresses: the token
ids (B, 1) and `where` = [p, p + 1] (int32: the new position, which the position embedding and the cache's
append read, and the keys the attention takes); its last launch advances `where` by one, and under greedy
decoding the step also writes the argmax of its logits into the token ids. So the launches of one step serve
every position, and Decoder(graph=True) records them once with gpublas.graph() and replays them per token (a
CUDA graph on a GPU, as vLLM's and gpt-fast's decoding; the simulator's C loop over the recorded launches): the
host's cost of a token is one call instead of ~10 launches a layer. A replay runs exactly the eager step's
kernels on the same arrays, so both give the same bits.
"""
import math

import numpy as np

import gpublas
from gpublas.runtime import device_checks

from .. import kernels as K
from ..kernels import attention_decode as KD
from ..layers.attention import scaled_dot_product_attention

GEMV_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class KVCache:
    """Each block's K and V: (B, H, block_size, D) device arrays, and how many positions they hold."""

    def __init__(self, model, B, dtype):
        H, D = model.n_head, model.n_embd // model.n_head
        self.k = [gpublas.empty((B, H, model.block_size, D), dtype) for _ in range(model.n_layer)]
        self.v = [gpublas.empty((B, H, model.block_size, D), dtype) for _ in range(model.n_layer)]
        self.B, self.dtype, self.length = B, np.dtype(dtype), 0

    def fits(self, B, dtype):
        return self.B == B and self.dtype == np.dtype(dtype)


def rows_linear(x, w, b=None, act=None):
    """act(x W^T + b) for x (M, in), w (out, in) (act: an activation code, nn.kernels.ACT; None: none), as Dense
    computes it: with one row of float32 / float64 data a matrix-vector product (gemv), else nn's GEMM; then the
    bias and activation kernel (in place, or from the FP32 accumulator into 16 bits)."""
    act = K.ACT[None] if act is None else act
    epilogue = b is not None or act != K.ACT[None]
    if x.shape[0] == 1 and x.dtype in GEMV_DTYPES and w.dtype == x.dtype:
        z = gpublas.gemv(w, x.reshape(x.shape[1])).reshape(1, w.shape[0])   # y^T = W x^T
    else:
        z = K.gemm(x, w, trans_b=True, acc=epilogue)
    if not epilogue:
        return z
    return K.bias_act_forward(z, b, z if z.dtype == x.dtype else gpublas.empty(z.shape, x.dtype), w.shape[0], 1,
                              act)


def _head(model, last):
    """The tied LM head on the last positions' rows last (B, C): logits (B, V)."""
    return rows_linear(model.ln_f(last), model.wte.weight.data)


# -- the prefill: positions p0 .. p0 + Tn - 1 given on the host ------------------------------------------------
def _block(block, cache_k, cache_v, x, p0):
    """One pre-norm block on x (B, Tn, C) at positions p0 .. p0 + Tn - 1, its K and V written into the cache:
    x + attn(norm1(x)), then + mlp(norm2(x)). A prefill (p0 = 0) is causal; one position attends to all p0 + 1."""
    B, Tn, C = x.shape
    attn = block.self_attn
    H, D = attn.num_heads, attn.head_dim
    h = block.norm1(x).reshape(B * Tn, C)
    b = None if attn.in_proj_bias is None else attn.in_proj_bias.data
    qkv = rows_linear(h, attn.in_proj_weight.data, b).reshape(B, Tn, 3, H, D)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))      # (B, H, Tn, D) views
    t = p0 + Tn
    cache_k[:, :, p0:t] = k
    cache_v[:, :, p0:t] = v
    k, v = cache_k[:, :, :t], cache_v[:, :, :t]
    if Tn == 1 and KD.takes(q, k):   # one query against the cache: split over the keys (attention_decode.cu)
        y = KD.decode(q, k, v, 1.0 / math.sqrt(D))
    else:
        y = scaled_dot_product_attention(q, k, v, is_causal=Tn > 1)
    merged = gpublas.ascontiguousarray(y.transpose(0, 2, 1, 3)).reshape(B, Tn, C)
    x = x + attn.out_proj(merged)
    return x + block.linear2(block.linear1(block.norm2(x)))


def run(model, cache, ids, p0):
    """Logits (B, V) of the last of the positions p0 .. p0 + Tn - 1 holding ids (B, Tn) (int32 on the device)."""
    B, Tn = ids.shape
    x = model.wte(ids) + model.wpe(positions(model.block_size)[p0:p0 + Tn])
    for i, block in enumerate(model.h):
        x = _block(block, cache.k[i], cache.v[i], x, p0)
    cache.length = p0 + Tn
    return _head(model, gpublas.ascontiguousarray(x[:, -1]).reshape(B, model.n_embd))


def positions(T, _cache={}):
    """The position ids 0 .. T-1 as an int32 device array (made once per length and backend)."""
    key = (T, gpublas.backend())
    if key not in _cache:
        _cache[key] = gpublas.to_device(np.arange(T, dtype=np.int32))
    return _cache[key]


# -- the decode step: the position read from the device ------------------------------------------------------
class Decoder:
    """The decode state of B sequences: the KV cache, the token ids (B, 1) and where = [p, p + 1] (int32 on the
    device), at fixed addresses. prefill(ids) fills the cache; feed(tokens) puts the next tokens in; step() runs
    one position and returns its logits (B, V), eagerly, or with graph=True the first time eagerly (kernels
    compiled, the memory pool warm), then captured once and replayed. greedy: the step writes argmax(logits)
    into the token ids itself (read them with next_tokens())."""

    def __init__(self, model, B, dtype, greedy=False, graph=False):
        self.model, self.greedy, self.use_graph = model, bool(greedy), bool(graph)
        self.cache = KVCache(model, B, dtype)
        self.tokens = gpublas.empty((B, 1), np.int32)
        self.where = gpublas.empty((2,), np.int32)
        self.position = 0                        # the host's copy of where[0]
        self.graph = self.logits = None
        self.steps = 0
        self.site = device_checks.site("GPT.generate: the decode position {value} is outside the cache [0, "
                                       "{limit})")

    @staticmethod
    def takes(model):
        """Whether the decode kernels take this model's heads and dtype (else generate decodes as the prefill does,
        one position given on the host)."""
        D = model.n_embd // model.n_head
        return 0 < D <= KD.MAX_D and np.dtype(model.dtype).kind == "f"

    def fits(self, B, dtype, greedy):
        return self.cache.fits(B, dtype) and self.greedy == bool(greedy)

    def prefill(self, ids):
        """Logits (B, V) of the last of ids (B, T) (host ints, T <= block_size), their K and V in the cache."""
        logits = run(self.model, self.cache, gpublas.to_device(np.ascontiguousarray(ids, dtype=np.int32)), 0)
        self.seek(ids.shape[1])
        return logits

    def seek(self, position):
        """The next step at `position` (the cache must hold positions 0 .. position - 1; a prefill sets it)."""
        if not 0 <= position <= self.cache.length:
            raise ValueError(f"Decoder.seek: the cache holds {self.cache.length} positions, got {position}")
        self.position = int(position)
        self.where.set(np.array([self.position, self.position + 1], np.int32))

    def feed(self, tokens):
        """The next token ids (B,) (a device array of any integer dtype) into the step's input."""
        self.tokens[:, 0] = tokens

    def next_tokens(self):
        """The token ids the last step wrote (greedy), (B,) int64 on the host."""
        return self.tokens.get()[:, 0].astype(np.int64)

    def step(self):
        """One position through the blocks (position self.position < block_size): its logits (B, V)."""
        if self.position >= self.model.block_size:
            raise ValueError(f"GPT.generate: the cache holds {self.model.block_size} positions; prefill the window")
        if not self.use_graph or self.steps == 0:
            logits = self._step()
        else:
            if self.graph is None:
                with gpublas.graph() as g:       # recorded, not run: the replay below runs it
                    self.logits = self._step()
                self.graph = g
            self.graph.replay()
            logits = self.logits
        self.steps += 1
        self.position += 1
        self.cache.length = self.position
        return logits

    def _step(self):
        """The launches of one step: every operand at a fixed address, the position read from `where`."""
        model, B, C = self.model, self.cache.B, self.model.n_embd
        x = (model.wte(self.tokens) + model.wpe(self.where[:1])).reshape(B, C)
        for i, block in enumerate(model.h):
            x = self._block(block, i, x)
        logits = _head(model, x)
        if self.greedy:
            self.feed(logits.argmax(axis=-1))
        self.where += 1                          # the next position, for the next step
        return logits

    def _block(self, block, i, x):
        """One pre-norm block on the rows x (B, C) of the position where[0]."""
        B, C = x.shape
        attn = block.self_attn
        H, D = attn.num_heads, attn.head_dim
        ck, cv = self.cache.k[i], self.cache.v[i]
        b = None if attn.in_proj_bias is None else attn.in_proj_bias.data
        qkv = rows_linear(block.norm1(x), attn.in_proj_weight.data, b)           # (B, 3C): q | k | v
        KD.append(qkv, ck, cv, self.where[:1], self.site)
        q = qkv[:, :C].reshape(B, H, 1, D)
        y = KD.decode(q, ck, cv, 1.0 / math.sqrt(D), n_keys=self.where[1:])      # (B, H, 1, D): (B, C) rows
        x = x + _dense(attn.out_proj, y.reshape(B, C))
        return x + _dense(block.linear2, _dense(block.linear1, block.norm2(x)))


def _dense(layer, x):
    """A Dense layer's map on rows x (B, in), nothing kept for a backward."""
    return rows_linear(x, layer.weight.data, None if layer.bias is None else layer.bias.data, layer.act)
