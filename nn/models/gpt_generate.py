"""GPT.generate: sampling with a key/value cache, as llm.c's and transformers' inference do.

A prefill runs the prompt (its last block_size tokens) through every block once, keeping each block's K and V
in a preallocated (B, H, block_size, D) device cache; each new token then runs one position through the blocks:
its q, k, v from one (B, 3C) projection, k and v written into the cache at their position, attention of one
query against the cache's first t keys (nn/cuda/attention_decode.cu: split over the keys in chunks, as
flash-decoding, then combined; no mask needed: every cached key precedes it),
the MLP on one row per sequence, and the LM head on that last position only. The cost of a token grows with t
only through the attention's t D products per head.

Past block_size the context slides as nanoGPT's (the last block_size tokens at positions 0 .. block_size - 1):
every cached position moves, so each later token is a prefill of the window (the cost of use_cache=False).

Sampling is on the device: logits / temperature, top_k (gpublas.topk's k-th value as the threshold), top_p
(the smallest set of tokens whose probabilities, sorted, sum to top_p or more), then the Gumbel-max draw
argmax(logits + g), g = -log(-log(u)) with u from nn's generator (or `rng`).
"""
import math

import numpy as np

import gpublas

from .. import init
from .. import kernels as K
from ..kernels import attention_decode as KD
from ..layers.attention import scaled_dot_product_attention
from ..layers.multihead import _linear


class KVCache:
    """Each block's K and V: (B, H, block_size, D) device arrays, and how many positions they hold."""

    def __init__(self, model, B, dtype):
        H, D = model.n_head, model.n_embd // model.n_head
        self.k = [gpublas.empty((B, H, model.block_size, D), dtype) for _ in range(model.n_layer)]
        self.v = [gpublas.empty((B, H, model.block_size, D), dtype) for _ in range(model.n_layer)]
        self.B, self.dtype, self.length = B, np.dtype(dtype), 0

    def fits(self, B, dtype):
        return self.B == B and self.dtype == np.dtype(dtype)


def _block(block, cache_k, cache_v, x, p0):
    """One pre-norm block on x (B, Tn, C) at positions p0 .. p0 + Tn - 1, its K and V written into the cache:
    x + attn(norm1(x)), then + mlp(norm2(x)). A prefill (p0 = 0) is causal; one position attends to all p0 + 1."""
    B, Tn, C = x.shape
    attn = block.self_attn
    H, D = attn.num_heads, attn.head_dim
    h = block.norm1(x).reshape(B * Tn, C)
    b = None if attn.in_proj_bias is None else attn.in_proj_bias.data
    qkv = _linear(h, attn.in_proj_weight.data, b).reshape(B, Tn, 3, H, D)
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


def _run(model, cache, ids, p0):
    """Logits (B, V) of the last of the positions p0 .. p0 + Tn - 1 holding ids (B, Tn) (int32 on the device)."""
    B, Tn = ids.shape
    x = model.wte(ids) + model.wpe(positions(model.block_size)[p0:p0 + Tn])
    for i, block in enumerate(model.h):
        x = _block(block, cache.k[i], cache.v[i], x, p0)
    cache.length = p0 + Tn
    last = model.ln_f(gpublas.ascontiguousarray(x[:, -1])).reshape(B, model.n_embd)
    return K.gemm(last, model.wte.weight.data, trans_b=True)          # the tied head on the last position


def positions(T, _cache={}):
    """The position ids 0 .. T-1 as an int32 device array (made once per length and backend)."""
    key = (T, gpublas.backend())
    if key not in _cache:
        _cache[key] = gpublas.to_device(np.arange(T, dtype=np.int32))
    return _cache[key]


def sample(logits, temperature, top_k, top_p, rng):
    """Next tokens (B,) (int64, on the device) drawn from logits (B, V) (see the module's docstring)."""
    if top_k == 1:   # greedy: the largest logit whatever the temperature or the draw (no sort, no noise)
        return logits.argmax(axis=-1)
    logits = logits * (1.0 / temperature)
    V = logits.shape[-1]
    if top_k is not None and top_k < V:
        kth = gpublas.topk(logits, int(top_k))[0][:, -1:]                  # (B, 1): the k-th largest
        logits = gpublas.where(logits < kth, -np.inf, logits)
    if top_p is not None and top_p < 1.0:
        probs = gpublas.softmax(logits, axis=-1)
        desc = gpublas.topk(probs, V)[0]                                   # (B, V) sorted, largest first
        before = gpublas.cumsum(desc, axis=-1) - desc                      # the mass above each one
        kept = gpublas.where(before < top_p, desc, gpublas.full(desc.shape, np.inf, desc.dtype))
        floor = kept.min(axis=-1, keepdims=True)                           # the smallest kept probability
        logits = gpublas.where(probs < floor, -np.inf, logits)
    u = rng.uniform(np.finfo(np.float64).tiny, 1.0, logits.shape)
    g = gpublas.to_device((-np.log(-np.log(u))).astype(logits.dtype))
    return (logits + g).argmax(axis=-1)


def check(max_new_tokens, temperature, top_k, top_p):
    if int(max_new_tokens) < 0:
        raise ValueError(f"GPT.generate: max_new_tokens must be >= 0, got {max_new_tokens}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"GPT.generate: top_k must be a positive int or None, got {top_k}")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise ValueError(f"GPT.generate: top_p must be in (0, 1] or None, got {top_p}")
    if temperature <= 0:
        raise ValueError(f"GPT.generate: temperature must be positive, got {temperature}")


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True, rng=None):
    """idx (B, T) (or (T,)) extended by max_new_tokens sampled tokens; see GPT.generate."""
    check(max_new_tokens, temperature, top_k, top_p)
    rng = rng or init.generator()
    host = np.array(idx.get() if isinstance(idx, gpublas.DeviceArray) else idx, dtype=np.int64)
    flat = host.ndim == 1
    host = host[None] if flat else host
    if host.ndim != 2 or host.shape[1] < 1:
        raise ValueError(f"GPT.generate: expected token ids (B, T) or (T,) with T >= 1, got shape {host.shape}")
    training = model.training
    model.eval()
    out = [host]
    try:
        cache, nxt = None, None
        for _ in range(int(max_new_tokens)):
            seq = np.concatenate(out, axis=1) if len(out) > 1 else out[0]
            if not use_cache:
                logits = model(seq[:, -model.block_size:])[:, -1, :]
            elif cache is not None and cache.length < model.block_size:   # one position against the cache
                logits = _run(model, cache, nxt.astype(np.int32).reshape(-1, 1), cache.length)
            else:                                                           # prefill (or the window slid)
                window = seq[:, -model.block_size:]
                if cache is None or not cache.fits(window.shape[0], model.dtype):
                    cache = KVCache(model, window.shape[0], model.dtype)
                logits = _run(model, cache, gpublas.to_device(window.astype(np.int32)), 0)
            nxt = sample(logits, temperature, top_k, top_p, rng)           # (B,) on the device
            out.append(nxt.get().astype(np.int64)[:, None])
    finally:
        model.train(training)
    seq = np.concatenate(out, axis=1)
    return seq[0] if flat else seq
