"""nn.models.GPT as nanoGPT users call it: model(idx, targets) -> (logits, loss) and backward() from that loss,
dropout where nanoGPT's Block puts it, and generate with its KV cache (greedy: the same tokens as without it;
a 1-D prompt; past block_size the context slides)."""
import os
from pathlib import Path

import numpy as np
import pytest

import nn

ROOT = Path(__file__).resolve().parent.parent
F64 = np.float64
V, BS, L, H, C = 13, 8, 2, 2, 32


@pytest.fixture
def gpt():
    nn.manual_seed(0)
    return nn.models.GPT(V, BS, L, H, C, dtype=F64)


def test_targets_give_logits_and_loss(gpt, rng):
    idx, y = rng.integers(0, V, (2, 6)), rng.integers(0, V, (2, 6))
    y[0, :2] = -1                                  # ignored, as nanoGPT's ignore_index=-1
    logits, loss = gpt(idx, y)
    crit = nn.CrossEntropyLoss(ignore_index=-1)
    assert loss == pytest.approx(crit(logits, y), rel=1e-14)
    gpt.zero_grad()
    gpt.backward()
    grads = [p.grad.get().copy() for p in gpt.parameters()]
    gpt.zero_grad()
    gpt(idx)
    gpt.backward(crit.backward())
    for g, p in zip(grads, gpt.parameters()):
        np.testing.assert_array_equal(g, p.grad.get())
    assert gpt(idx).shape == (2, 6, V)
    with pytest.raises(RuntimeError, match="needs a forward with targets"):
        gpt.backward()


def test_dropout_is_nanogpts_block():
    """Dropout on the embeddings' sum, the attention probabilities and each residual branch's output; none
    between the GELU and the MLP's second Linear (nanoGPT's MLP has none there)."""
    model = nn.models.GPT(V, BS, 1, H, C, dropout=0.2)
    ps = {name: m.p if hasattr(m, "p") else m.dropout_p for name, m in model.named_modules()
          if type(m).__name__ in ("Dropout", "ScaledDotProductAttention", "UnfusedAttention")}
    assert ps == {"drop": 0.2, "h.0.self_attn.attn": 0.2, "h.0.self_attn.attn_unfused": 0.2, "h.0.dropout": 0.0,
                  "h.0.dropout1": 0.2, "h.0.dropout2": 0.2}


def _lively(model, rng):
    """Weights N(0, 0.5): greedy decoding then varies from token to token (the 0.02 init repeats one)."""
    for p in model.parameters():
        if p.data.ndim == 2:
            p.data.set(0.5 * rng.standard_normal(p.shape))
    return model


def test_cached_generation_is_uncached_generation(gpt, rng, monkeypatch):
    """Greedy: the same tokens with and without the cache, sliding past block_size (3 + 12 > 8); the cached
    run never calls forward on the whole context; a 1-D prompt gives a 1-D sequence; sampling with top_p and
    the same generator gives the same draw both ways."""
    _lively(gpt, rng)
    prompt = rng.integers(0, V, (2, 3))
    plain = gpt.generate(prompt, 12, top_k=1, use_cache=False)
    assert len(set(plain[0, 3:])) > 2
    calls = []
    monkeypatch.setattr(type(gpt), "forward", lambda self, *a, **k: calls.append(1))
    np.testing.assert_array_equal(gpt.generate(prompt, 12, top_k=1), plain)
    assert not calls
    monkeypatch.undo()
    one = gpt.generate(prompt[1], 5, top_p=0.8, rng=np.random.default_rng(1))
    assert one.shape == (8,)
    np.testing.assert_array_equal(one, gpt.generate(prompt[1], 5, top_p=0.8, use_cache=False,
                                                    rng=np.random.default_rng(1)))
    assert gpt.training


def test_top_p_keeps_the_smallest_set_reaching_p():
    from nn.models.gpt_generate import sample
    import gpublas
    logits = gpublas.to_device(np.log(np.array([[0.5, 0.3, 0.15, 0.05]])))
    for p, allowed in ((0.4, {0}), (0.6, {0, 1}), (0.79, {0, 1}), (0.81, {0, 1, 2})):
        got = {int(sample(logits, 1.0, None, p, np.random.default_rng(s)).get()[0]) for s in range(40)}
        assert got == allowed, p
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\]"):
        nn.models.GPT(V, BS, 1, H, C).generate(np.array([1]), 1, top_p=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("B, H, T, D", [(2, 3, 5, 8), (1, 2, 300, 20), (1, 1, 1, 3)])
def test_decode_kernel_against_numpy(rng, dtype, B, H, T, D):
    """attention_decode.cu on views of a larger cache (strided over t), chunks of keys combined."""
    import gpublas
    from nn.kernels import attention_decode as KD
    cache = gpublas.to_device(rng.standard_normal((2, B, H, T + 7, D)).astype(dtype))
    k, v = cache[0][:, :, :T], cache[1][:, :, :T]
    q = gpublas.to_device(rng.standard_normal((B, H, 1, D)).astype(dtype))
    s = 0.3 * q.get() @ k.get().transpose(0, 1, 3, 2)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.get()
    np.testing.assert_allclose(KD.decode(q, k, v, 0.3).get(), want, rtol=1e-12 if dtype == np.float64 else 2e-5,
                               atol=1e-14 if dtype == np.float64 else 1e-6)


def test_example_ranks_draw_different_windows():
    """--distributed: one global batch a step, each rank its own slice (the ranks' windows differ, and together
    they are the batch one process draws)."""
    from nn.examples.gpt import windows
    data = np.arange(1000)
    whole = windows(np.random.default_rng(3), data, 8, 6)[0]
    parts = [windows(np.random.default_rng(3), data, 8, 6, rank, 2)[0] for rank in (0, 1)]
    assert not np.array_equal(parts[0], parts[1])
    np.testing.assert_array_equal(np.concatenate(parts), whole)


SMALL = ["--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size", "2"]


@pytest.mark.parametrize("flag", ["--steps", "--eval-every"])
def test_example_refuses_zero(flag, capsys):
    from nn.examples import gpt as example
    with pytest.raises(SystemExit):
        example.main(SMALL + [flag, "0"])
    assert f"argument {flag}: invalid positive value: '0'" in capsys.readouterr().err


@pytest.mark.parametrize("tokenizer", [False, True])
def test_example_fine_tunes_a_gpt2_directory(tmp_path, capsys, monkeypatch, tokenizer):
    """--init DIR (characters, or the tokenizer.json there) trains, --export DIR writes a directory that loads
    back; the sample reports its tokens/s; a cold kernel cache prints the 'compiling' line."""
    pytest.importorskip("safetensors")
    from nn.examples import gpt as example
    vocab = 120
    if tokenizer:
        tokenizers = pytest.importorskip("tokenizers")
        tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="?"))
        tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel()
        tok.decoder = tokenizers.decoders.ByteLevel()
        trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, special_tokens=["?"])
        tok.train_from_iterator([example.corpus_text()[0][:20000]], trainer)
        vocab = tok.get_vocab_size()
    nn.manual_seed(0)
    init, out = str(tmp_path / "init"), str(tmp_path / "out")
    nn.models.GPT(vocab, 16, 1, 2, 32).save_pretrained(init)
    if tokenizer:
        tok.save(init + "/tokenizer.json")
    monkeypatch.setattr(nn, "prefetch", lambda *a: 3)
    assert example.main(["--init", init, "--export", out, "--steps", "2", "--batch-size", "2"]) == 0
    io = capsys.readouterr()
    assert "gpt: compiling 3 kernel modules" in io.err and "tokens/s (KV cache)" in io.err
    assert ("tokens of" if tokenizer else "characters of") in io.out
    again = nn.models.GPT.from_pretrained(out)
    assert again.vocab_size == vocab and (tmp_path / "out" / "tokenizer.json").exists() == tokenizer


def test_distributed_example_trains_as_one_process_on_the_global_batch(tmp_path):
    """mpiexec -n 2 ... --distributed: the ranks' windows differ (slices of one global batch), so two ranks train
    the weights one process trains on the whole batch (float32 sums in another order)."""
    import subprocess
    import sys
    from test_distributed import mpi_ready, mpiexec
    why = mpi_ready()
    if why:
        pytest.skip(why)
    args = ["-m", "nn.examples.gpt", "--quiet", "--steps", "3", "--batch-size", "4"] + SMALL[:-2]
    one, two = str(tmp_path / "one.npz"), str(tmp_path / "two.npz")
    subprocess.run([sys.executable, *args, "--save", one], check=True, capture_output=True,
                   env=dict(os.environ, GPUBLAS_BACKEND="sim"), cwd=ROOT)
    run = mpiexec(2, *args, "--distributed", "--save", two)
    assert run.returncode == 0, run.stderr
    with np.load(one) as a, np.load(two) as b:
        for k in a.files:
            np.testing.assert_allclose(b[k], a[k], rtol=0, atol=1e-5, err_msg=k)
