"""GPT.generate: sampling with a key/value cache, as llm.c's and transformers' inference do.

A prefill runs the prompt (its last block_size tokens) through every block once, keeping each block's K and V
in a preallocated device cache; each new token then runs one position through the blocks against the cache
(nn/models/gpt_decode.py), the LM head on that last position only: the cost of a token grows with the context
only through the attention's products. The decode step reads its position from device memory, so with
use_graph (the default) it is captured once with gpublas.graph() and replayed per token (a CUDA graph on a
GPU): the same kernels on the same arrays as the eager step, so the same tokens, for one host call a token.

Past block_size the context slides as nanoGPT's (the last block_size tokens at positions 0 .. block_size - 1):
every cached position moves, so each later token is a prefill of the window (the cost of use_cache=False).

Sampling is on the device: logits / temperature, top_k (gpublas.topk's k-th value as the threshold), top_p
(the smallest set of tokens whose probabilities, sorted, sum to top_p or more), then the Gumbel-max draw
argmax(logits + g), g = -log(-log(u)) with u from nn's generator (or `rng`). Greedy decoding (top_k=1) is the
argmax, which the decode step takes itself (inside the graph).
"""
import numpy as np

import gpublas

from .. import init
from .gpt_decode import Decoder, KVCache, positions, run


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


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, use_cache=True, rng=None,
             use_graph=True):
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
    greedy = top_k == 1
    try:
        state = None
        for _ in range(int(max_new_tokens)):
            seq = np.concatenate(out, axis=1) if len(out) > 1 else out[0]
            stepped = False
            if not use_cache:
                logits = model(seq[:, -model.block_size:])[:, -1, :]
            elif state is not None and state.position < model.block_size:   # one position against the cache
                logits, stepped = state.step(), True
            else:                                                           # prefill (or the window slid)
                window = seq[:, -model.block_size:]
                if state is None or not state.fits(window.shape[0], model.dtype, greedy):
                    state = _state(model, window.shape[0], greedy, use_graph)
                logits = state.prefill(window)
            if stepped and state.greedy:                                    # the step took the argmax itself
                out.append(state.next_tokens()[:, None])
                continue
            nxt = sample(logits, temperature, top_k, top_p, rng)           # (B,) on the device
            if state is not None:
                state.feed(nxt)
            out.append(nxt.get().astype(np.int64)[:, None])
    finally:
        model.train(training)
    seq = np.concatenate(out, axis=1)
    return seq[0] if flat else seq


def _state(model, B, greedy, use_graph):
    """The decode state: a Decoder (the position on the device, graphed with use_graph), or for heads the decode
    kernels do not take a _HostDecoder (each position given on the host, as the prefill)."""
    if Decoder.takes(model):
        return Decoder(model, B, model.dtype, greedy=greedy, graph=use_graph)
    return _HostDecoder(model, B)


class _HostDecoder:
    """Decoding with the position given by the host (run on one position), for heads past the decode kernels'."""
    greedy = False

    def __init__(self, model, B):
        self.model, self.cache, self.tokens = model, KVCache(model, B, model.dtype), None

    @property
    def position(self):
        return self.cache.length

    def fits(self, B, dtype, greedy):
        return self.cache.fits(B, dtype)

    def prefill(self, ids):
        return run(self.model, self.cache, gpublas.to_device(np.ascontiguousarray(ids, dtype=np.int32)), 0)

    def feed(self, tokens):
        self.tokens = tokens.astype(np.int32).reshape(-1, 1)

    def step(self):
        return run(self.model, self.cache, self.tokens, self.cache.length)
