"""GPT decoding with the position in device memory (nn/models/gpt_decode.py): the decode step replayed as a graph
gives the eager step's tokens and logits bit for bit, greedy and sampled, for one and two sequences, sliding past
block_size; the decode kernels read the position and the key count from the device; the one-row projections
(gemv) against NumPy."""
import numpy as np
import pytest

import gpublas
import nn
from nn.models import gpt_decode as GD

V, BS, L, H, C = 13, 8, 2, 2, 32


def _lively(model, rng):
    """Weights N(0, 0.5): greedy decoding then varies from token to token (the 0.02 init repeats one)."""
    for p in model.parameters():
        if p.data.ndim == 2:
            p.data.set((0.5 * rng.standard_normal(p.shape)).astype(p.dtype))
    return model


@pytest.fixture(params=[np.float64, np.float32], ids=["f64", "f32"])
def gpt(request, rng):
    nn.manual_seed(0)
    return _lively(nn.models.GPT(V, BS, L, H, C, dtype=request.param), rng)


@pytest.mark.parametrize("B", [1, 2])
def test_graphed_greedy_is_eager_greedy(gpt, rng, monkeypatch, B):
    """Greedy: the replayed step gives the eager step's tokens, and those are the uncached model's, sliding past
    block_size (3 + 12 > 8); the step's launches are issued twice per window (eager, then captured), not per token."""
    prompt = rng.integers(0, V, (B, 3))
    plain = gpt.generate(prompt, 12, top_k=1, use_cache=False)
    assert len(set(plain[0, 3:])) > 2
    eager = gpt.generate(prompt, 12, top_k=1, use_graph=False)
    calls = []
    step = GD.Decoder._step
    monkeypatch.setattr(GD.Decoder, "_step", lambda self: calls.append(self.position) or step(self))
    graphed = gpt.generate(prompt, 12, top_k=1)
    np.testing.assert_array_equal(eager, plain)
    np.testing.assert_array_equal(graphed, eager)
    assert calls == [3, 4]   # the prefill of 3; positions 3 (eager), 4 (captured), 5 .. 7 replayed; then prefills
    assert gpublas.memory_stats()["bytes_graphs"] == 0   # the graph went with generate's decoder


def test_graphed_sampling_draws_as_eager(gpt, rng):
    """temperature, top_k and top_p (on the host's side of the step) with one generator: the same draws with the
    graph, without it, and without the cache."""
    prompt = rng.integers(0, V, (2, 2))
    runs = [gpt.generate(prompt, 7, temperature=0.7, top_k=5, top_p=0.9, rng=np.random.default_rng(3), **kw)
            for kw in ({}, {"use_graph": False}, {"use_cache": False})]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[1], runs[2])


def test_a_replay_serves_every_position(gpt, rng):
    """One captured step replayed at positions 2 .. 7: the eager decoder's logits bit for bit, and the model's own
    last-position logits (the whole window through forward) to rounding."""
    ids = rng.integers(0, V, (1, BS))
    decoders = [GD.Decoder(gpt.eval(), 1, gpt.dtype, graph=g) for g in (False, True)]
    for d in decoders:
        d.prefill(ids[:, :2])
    tol = 1e-12 if gpt.dtype == np.float64 else 2e-5
    for p in range(2, BS):
        got = []
        for d in decoders:
            d.feed(gpublas.to_device(ids[:, p]))
            got.append(d.step().get())
        np.testing.assert_array_equal(got[1], got[0])
        want = gpt(ids[:, :p + 1]).get()[:, -1]
        np.testing.assert_allclose(got[0], want, rtol=tol, atol=tol)
    assert decoders[1].graph is not None and decoders[0].graph is None
    with pytest.raises(ValueError, match="prefill the window"):
        decoders[1].step()


def test_heads_past_the_decode_kernel_decode_on_the_host(rng):
    """A head dim past DEC_MAX_D: each position given by the host (the prefill's path), the same greedy tokens."""
    from nn.kernels import attention_decode as KD
    nn.manual_seed(0)
    E = 2 * (KD.MAX_D + 1)
    gpt = _lively(nn.models.GPT(V, BS, 1, 2, E, dtype=np.float64), rng)
    assert not GD.Decoder.takes(gpt)
    prompt = rng.integers(0, V, (1, 2))
    np.testing.assert_array_equal(gpt.generate(prompt, 8, top_k=1), gpt.generate(prompt, 8, top_k=1, use_cache=False))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("form", [{}, {"DEC_GPU_FORM": 1}], ids=["native", "gpu_form"])
@pytest.mark.parametrize("B, H, T, D, n", [(2, 3, 300, 8, 1), (1, 2, 300, 20, 257), (1, 1, 5, 3, 5)])
def test_decode_kernel_reads_the_key_count(rng, dtype, form, B, H, T, D, n):
    """attention_decode.cu over a cache of capacity T attending the first n keys, n read from the device (the blocks
    past them leave), in the launch's native form and the GPU's (DEC_GPU_FORM, on the simulator too)."""
    from nn.kernels import attention_decode as KD
    cache = gpublas.to_device(rng.standard_normal((2, B, H, T, D)).astype(dtype))
    q = gpublas.to_device(rng.standard_normal((B, H, 1, D)).astype(dtype))
    k, v = cache[0].get()[:, :, :n], cache[1].get()[:, :, :n]
    s = 0.3 * q.get() @ k.transpose(0, 1, 3, 2)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    got = KD.decode(q, cache[0], cache[1], 0.3, n_keys=gpublas.to_device(np.array([n], np.int32)), **form).get()
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == np.float64 else dict(rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(got, want, **tol)
    if not form:
        np.testing.assert_allclose(KD.decode(q, cache[0][:, :, :n], cache[1][:, :, :n], 0.3).get(), want, **tol)


def test_cache_append_writes_at_the_device_position(rng):
    """kv_cache_append: the k and v thirds of each qkv row at position p (read from the device), nothing else;
    a position outside the cache writes nothing and raises IndexError at the next synchronization."""
    from gpublas.runtime import device_checks
    from nn.kernels import attention_decode as KD
    B, Hh, T, D = 2, 3, 6, 4
    ck, cv = gpublas.zeros((B, Hh, T, D), np.float64), gpublas.zeros((B, Hh, T, D), np.float64)
    qkv = rng.standard_normal((B, 3 * Hh * D))
    pos = gpublas.to_device(np.array([4], np.int32))
    KD.append(gpublas.to_device(qkv), ck, cv, pos)
    want_k, want_v = np.zeros((B, Hh, T, D)), np.zeros((B, Hh, T, D))
    want_k[:, :, 4] = qkv[:, Hh * D:2 * Hh * D].reshape(B, Hh, D)
    want_v[:, :, 4] = qkv[:, 2 * Hh * D:].reshape(B, Hh, D)
    np.testing.assert_array_equal(ck.get(), want_k)
    np.testing.assert_array_equal(cv.get(), want_v)
    pos.set(np.array([T], np.int32))
    site = device_checks.site("decode position {value} outside [0, {limit})")
    with pytest.raises(IndexError, match="decode position 6 outside"):
        KD.append(gpublas.to_device(qkv), ck, cv, pos, site)
        gpublas.synchronize()
        ck.get()
    np.testing.assert_array_equal(ck.get(), want_k)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("M", [1, 3])
def test_rows_linear_is_the_dense_map(rng, dtype, M):
    """rows_linear (gemv for one row, the GEMM otherwise) with bias and GELU (tanh) against NumPy."""
    from nn import kernels as K
    x, w, b = rng.standard_normal((M, 7)), rng.standard_normal((11, 7)), rng.standard_normal(11)
    z = x @ w.T + b
    want = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    got = GD.rows_linear(*(gpublas.to_device(a.astype(dtype)) for a in (x, w, b)), K.ACT["gelu_tanh"]).get()
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(GD.rows_linear(gpublas.to_device(x.astype(dtype)), gpublas.to_device(w.astype(dtype))).get(),
                               x @ w.T, rtol=tol, atol=tol)
