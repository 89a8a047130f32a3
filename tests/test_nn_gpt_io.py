"""GPT-2's weights in and out of nn.models.GPT: transformers' directory both ways (logits within 1e-10 in float64
against GPT2LMHeadModel), llm.c's checkpoint both ways (header and parameter order as train_gpt2.py writes it),
and every bad file refused with a named error before anything is loaded."""
import json
import os

import numpy as np
import pytest

import nn
from nn.models import GPT, GPTLoadError

V, T, L, H, C = 50, 16, 2, 2, 32


@pytest.fixture
def gpt():
    nn.manual_seed(0)
    return GPT(V, T, L, H, C, dtype=np.float64).eval()


def _hf_model():
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=H, bos_token_id=0,
                                  eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).double().eval()
    with torch.no_grad():   # weights off float32's grid: float64 parity means something
        for p in model.parameters():
            p.add_(1e-3 * torch.randn_like(p))
    return model


def _logits(model, idx):
    import torch
    with torch.no_grad():
        return model(torch.tensor(idx)).logits.numpy()


def test_transformers_to_nn_and_back(tmp_path, rng):
    pytest.importorskip("safetensors")
    hf = _hf_model()
    hf.save_pretrained(tmp_path / "hf")
    ours = GPT.from_pretrained(str(tmp_path / "hf")).eval()
    assert ours.dtype == np.float64 and (ours.vocab_size, ours.block_size, ours.n_layer) == (V, T, L)
    idx = rng.integers(0, V, (2, 11))
    want = _logits(hf, idx)
    np.testing.assert_allclose(ours(idx).get(), want, rtol=0, atol=1e-10)
    ours.save_pretrained(str(tmp_path / "nn"))
    import transformers
    back = transformers.GPT2LMHeadModel.from_pretrained(str(tmp_path / "nn")).eval()
    np.testing.assert_allclose(_logits(back, idx), want, rtol=0, atol=1e-10)


def test_nn_to_transformers_and_pytorch_bin(tmp_path, gpt, rng):
    pytest.importorskip("safetensors")
    transformers = pytest.importorskip("transformers")
    idx = rng.integers(0, V, (2, 7))
    gpt.save_pretrained(str(tmp_path / "st"))
    hf = transformers.GPT2LMHeadModel.from_pretrained(str(tmp_path / "st")).eval()
    np.testing.assert_allclose(_logits(hf, idx), gpt(idx).get(), rtol=0, atol=1e-10)
    gpt.save_pretrained(str(tmp_path / "bin"), safe_serialization=False)
    assert os.listdir(tmp_path / "bin") == ["config.json", "pytorch_model.bin"] or \
        sorted(os.listdir(tmp_path / "bin")) == ["config.json", "pytorch_model.bin"]
    again = GPT.from_pretrained(str(tmp_path / "bin")).eval()
    np.testing.assert_array_equal(again(idx).get(), gpt(idx).get())


def test_llmc_round_trip_and_layout(tmp_path, gpt, rng):
    path = str(tmp_path / "gpt2.bin")
    gpt.save_llmc(path)
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[:1024], np.int32)
    assert list(header[:8]) == [20240326, 3, T, V, L, H, C, 128] and not header[8:].any()
    n = 128 * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    assert len(raw) == 1024 + 4 * n
    wte = np.frombuffer(raw[1024:1024 + 4 * 128 * C], np.float32).reshape(128, C)
    np.testing.assert_array_equal(wte[:V], gpt.wte.weight.data.get().astype(np.float32))
    assert not wte[V:].any()
    ln1w = np.frombuffer(raw, np.float32, L * C, 1024 + 4 * (128 + T) * C).reshape(L, C)
    np.testing.assert_array_equal(ln1w[1], gpt.h[1].norm1.weight.data.get().astype(np.float32))
    back = GPT.from_llmc(path, dtype=np.float64).eval()
    for (name, a), b in zip(gpt.state_dict().items(), back.state_dict().values()):
        np.testing.assert_array_equal(a.astype(np.float32), b, err_msg=name)
    gpt.save_llmc(path, dtype="bfloat16")
    assert np.frombuffer(open(path, "rb").read(8), np.int32)[1] == 5
    half = GPT.from_llmc(path).eval()
    idx = rng.integers(0, V, (1, 5))
    np.testing.assert_allclose(half(idx).get(), gpt(idx).get(), atol=0.05)


def _hf_dir(tmp_path, gpt, name="d"):
    path = str(tmp_path / name)
    gpt.save_pretrained(path)
    return path


def _rewrite(path, change):
    from safetensors.numpy import load_file, save_file
    file = os.path.join(path, "model.safetensors")
    tensors = load_file(file)
    change(tensors)
    save_file(tensors, file, metadata={"format": "pt"})


def test_bad_transformers_files_are_named(tmp_path, gpt):
    pytest.importorskip("safetensors")
    cases = {
        "missing": (lambda t: t.pop("transformer.h.1.mlp.c_fc.bias"), r"missing tensor 'h.1.mlp.c_fc.bias'"),
        "extra": (lambda t: t.update({"transformer.h.2.ln_1.weight": np.ones(C)}), r"unexpected tensor.*'h.2.ln_1"),
        "shape": (lambda t: t.update({"transformer.wpe.weight": np.zeros((T + 1, C))}),
                  r"tensor 'wpe.weight' has shape \(17, 32\); config.json .* says \(16, 32\)"),
        "head": (lambda t: t.update({"lm_head.weight": np.zeros((V, C))}), r"'lm_head.weight' differs from"),
    }
    for name, (change, message) in cases.items():
        path = _hf_dir(tmp_path, gpt, name)
        _rewrite(path, change)
        with pytest.raises(GPTLoadError, match=message):
            GPT.from_pretrained(path)
    path = _hf_dir(tmp_path, gpt, "truncated")
    file = os.path.join(path, "model.safetensors")
    data = open(file, "rb").read()
    open(file, "wb").write(data[:len(data) // 2])
    with pytest.raises(GPTLoadError, match="model.safetensors: unreadable .* truncated"):
        GPT.from_pretrained(path)
    path = _hf_dir(tmp_path, gpt, "config")
    cfg = json.load(open(os.path.join(path, "config.json")))
    json.dump({**cfg, "n_layer": 3}, open(os.path.join(path, "config.json"), "w"))
    with pytest.raises(GPTLoadError, match=r"missing tensor 'h.2.ln_1.weight' \(config.json: 3 layers\)"):
        GPT.from_pretrained(path)
    json.dump({**cfg, "activation_function": "relu"}, open(os.path.join(path, "config.json"), "w"))
    with pytest.raises(GPTLoadError, match="activation_function = 'relu'"):
        GPT.from_pretrained(path)
    with pytest.raises(GPTLoadError, match="no config.json"):
        GPT.from_pretrained(str(tmp_path))


def test_bad_llmc_files_are_named(tmp_path, gpt):
    path = str(tmp_path / "m.bin")
    gpt.save_llmc(path)
    raw = open(path, "rb").read()
    bad = {"magic": (np.int32(7).tobytes() + raw[4:], "bad magic 7"),
           "version": (raw[:4] + np.int32(2).tobytes() + raw[8:], "checkpoint version 2"),
           "truncated": (raw[:1024 + 4 * (128 + T) * C + 100], r"ends inside tensor 'ln1w' \(2, 32\)"),
           "extra": (raw + b"\0" * 8, "8 bytes past the last tensor"),
           "header": (raw[:100], "shorter than llm.c's 1024-byte header")}
    for name, (data, message) in bad.items():
        open(path, "wb").write(data)
        with pytest.raises(GPTLoadError, match=message):
            GPT.from_llmc(path)
