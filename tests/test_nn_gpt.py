"""nn.models.GPT: the loss and every parameter gradient against a PyTorch twin (benchmarks.train_torch's, the
same state_dict) and against the NumPy twin of the train benchmark (nn/reference/gpt.py), the tied head's
summed gradient, nanoGPT's init and weight-decay groups, generation, bad input, and the example end to end."""
import numpy as np
import pytest

import gpublas
import nn
from nn.reference import layers as ref
from nn.reference.gpt import NpGPT

F64 = np.float64
V, BS, L, H, C = 11, 8, 2, 2, 32   # head dim 16: the fused attention


@pytest.fixture
def gpt():
    nn.manual_seed(0)
    return nn.models.GPT(V, BS, L, H, C, dtype=F64)


def _step(model, idx, y):
    model.zero_grad()
    crit = nn.CrossEntropyLoss()
    loss = crit(model(idx), y)
    model.backward(crit.backward())
    return loss


def test_loss_and_every_gradient_are_torchs(gpt, rng):
    torch = pytest.importorskip("torch")
    from benchmarks.train_torch import torch_gpt
    theirs = torch_gpt(gpt)
    assert list(theirs.state_dict()) == list(gpt.state_dict())
    idx, y = rng.integers(0, V, (3, 7)), rng.integers(0, V, (3, 7))
    loss = _step(gpt, idx, y)
    want = torch.nn.functional.cross_entropy(theirs(torch.tensor(idx)).reshape(-1, V), torch.tensor(y).reshape(-1))
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    grads = dict(theirs.named_parameters())
    for name, p in gpt.named_parameters():
        g = grads[name].grad.numpy()
        np.testing.assert_allclose(p.grad.get(), g, rtol=1e-9, atol=1e-12 * np.abs(g).max(), err_msg=name)


def test_numpy_twin_gives_the_same_gradients(gpt, rng):
    idx, y = rng.integers(0, V, (2, BS)), rng.integers(0, V, (2, BS))
    loss = _step(gpt, idx, y)
    twin = NpGPT(gpt.state_dict(), L, H)
    ref_loss, d = ref.np_softmax_xent(twin.forward(idx), y.reshape(-1))
    twin.backward(d)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-12)
    assert set(twin.grads) == {n for n, _ in gpt.named_parameters()}
    for name, p in gpt.named_parameters():
        np.testing.assert_allclose(p.grad.get(), twin.grads[name], rtol=1e-9, atol=1e-13, err_msg=name)


def test_tied_head_sums_both_gradients(gpt, rng):
    idx = rng.integers(0, V, (1, 3))
    gpt.zero_grad()
    logits = gpt(idx)
    gpt.backward(gpublas.to_device(np.ones(logits.shape)))
    x = gpt.x.get()  # ln_f's output: the head's part is ones^T x
    emb = gpt.wte.weight.grad.get() - np.ones((3, V)).T @ x
    assert not emb[np.setdiff1d(np.arange(V), idx)].any() and emb[idx[0]].any()


def test_init_and_weight_decay_groups(gpt):
    sd = gpt.state_dict()
    assert np.std(sd["wte.weight"]) == pytest.approx(0.02, rel=0.15)
    assert np.std(sd["h.0.linear2.weight"]) == pytest.approx(0.02 / np.sqrt(2 * L), rel=0.15)
    assert not sd["h.1.self_attn.in_proj_bias"].any() and (sd["ln_f.weight"] == 1).all()
    opt = gpt.configure_optimizers(weight_decay=0.5, learning_rate=0.1)
    gpt.zero_grad()
    opt.step()  # zero gradients: only the decay moves the weights, and only the 2-D ones
    for name, p in gpt.named_parameters():
        np.testing.assert_allclose(p.data.get(), sd[name] * (0.95 if sd[name].ndim == 2 else 1.0), rtol=1e-12,
                                   err_msg=name)


def test_generate_and_bad_input(gpt, rng):
    out = gpt.generate(np.array([[1, 2]]), 9, rng=np.random.default_rng(0))
    assert out.shape == (1, 11) and (out[:, :2] == [[1, 2]]).all() and out.max() < V
    again = gpt.generate(np.array([[1, 2]]), 9, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(out, again)
    greedy = [gpt.generate(np.array([[1, 2]]), 5, top_k=1, rng=np.random.default_rng(s)) for s in (1, 2)]
    np.testing.assert_array_equal(*greedy)  # top_k=1 leaves one token: no draw matters
    logits = gpt(greedy[0][:, :-1]).get()[0]
    assert (greedy[0][0, 2:] == logits.argmax(-1)[1:]).all()
    with pytest.raises(ValueError, match=r"sequence length 9 is past the position table \(block_size 8\)"):
        gpt(np.zeros((1, 9), int))
    with pytest.raises(ValueError, match=r"embed_dim \(8\) must be divisible by num_heads \(3\)"):
        nn.models.GPT(V, BS, 1, 3, 8)


def test_example_trains_saves_and_samples(tmp_path, capsys):
    from nn.examples import gpt as example
    path = str(tmp_path / "gpt.npz")
    small = ["--n-layer", "1", "--n-embd", "16", "--block-size", "16", "--batch-size", "4"]
    assert example.main(small + ["--steps", "4", "--eval-every", "2", "--save", path]) == 0
    out = capsys.readouterr().out
    assert "step    2  train loss" in out and "sample:" in out
    line = out.strip().splitlines()[-1]
    assert line.startswith("gpt: val loss ") and "after 4 steps" in line
    assert example.main(small + ["--load", path, "--sample", "20"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()[-1]) > 0
    assert example.main(small + ["--steps", "4", "--eval-every", "2", "--graph", "--quiet"]) == 0
    quiet = capsys.readouterr().out.strip().splitlines()
    assert len(quiet) == 1, quiet   # --quiet: the summary line only
    graphed = quiet[0]
    assert graphed.split(",")[0] == line.split(",")[0]  # the replayed steps' val loss: the eager one's


def test_autocast_bf16_step(gpt, rng):
    gpt = nn.models.GPT(V, BS, L, H, 16)
    idx, y = rng.integers(0, V, (2, BS)), rng.integers(0, V, (2, BS))
    want = _step(gpt, idx, y)
    with nn.autocast(gpublas.bfloat16):
        logits = gpt(idx)
    crit = nn.CrossEntropyLoss()
    loss = crit(logits, y)
    gpt.zero_grad()
    gpt.backward(crit.backward())
    assert loss == pytest.approx(want, rel=2 ** -6)
    assert all(np.isfinite(p.grad.get()).all() and p.grad.dtype == np.float32 for p in gpt.parameters())


def test_example_bf16_runs_the_fused_16_bit_attention(monkeypatch, capsys):
    """--precision bf16: the attention's q, k, v come in bfloat16 from the autocast projections and go through
    the fused tensor-core kernels (attention_half.cu), forward and backward; the unfused path never runs."""
    from nn.kernels import attention as KA
    from nn.examples import gpt as example
    from nn.layers.attention_unfused import UnfusedAttention
    seen = []
    for name in ("forward", "backward"):
        def spy(q, *args, _f=getattr(KA, name), _n=name, **kw):
            seen.append((_n, np.dtype(q.dtype).name))
            return _f(q, *args, **kw)
        monkeypatch.setattr(KA, name, spy)
    monkeypatch.setattr(UnfusedAttention, "forward", lambda *a: pytest.fail("the unfused attention ran"))
    small = ["--quiet", "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "16", "--batch-size",
             "2", "--steps", "2", "--precision", "bf16"]
    assert example.main(small) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith(", bf16")
    assert ("forward", "bfloat16") in seen and ("backward", "bfloat16") in seen
