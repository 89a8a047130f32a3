"""nn.save / nn.load: round trip, and an interrupted save leaves the last good checkpoint intact."""
import os

import numpy as np
import pytest

import nn
import nn.checkpoint


def _model(seed):
    nn.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Dense(8, 3))


def test_save_load_roundtrip(tmp_path):
    a, b = _model(0), _model(1)
    path = tmp_path / "model.npz"
    nn.save(a, path)
    nn.load(b, path)
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        assert np.array_equal(va, vb), k
    assert sorted(os.listdir(tmp_path)) == ["model.npz"]


def test_interrupted_save_keeps_last_good_checkpoint(tmp_path, monkeypatch):
    good, other = _model(0), _model(1)
    path = tmp_path / "ckpt.npz"
    nn.save(good, path)
    before = path.read_bytes()

    def failing_savez(f, **arrays):
        f.write(b"PK\x03\x04 half a zip file")    # some bytes reach the disk, then the "crash"
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(nn.checkpoint.np, "savez", failing_savez)
    with pytest.raises(OSError, match="simulated"):
        nn.save(other, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]      # no temporary file left behind
    restored = _model(2)
    nn.load(restored, path)
    assert np.array_equal(restored.state_dict()["3.weight"], good.state_dict()["3.weight"])


def test_load_mismatched_checkpoint_names_the_problem(tmp_path):
    path = tmp_path / "m.npz"
    nn.save(nn.Sequential(nn.Dense(4, 3)), path)
    with pytest.raises(ValueError, match=r"'0.weight' expects shape \(3, 5\), got \(3, 4\)"):
        nn.load(nn.Sequential(nn.Dense(5, 3)), path)
    with pytest.raises(KeyError, match="missing"):
        nn.load(nn.Sequential(nn.Dense(4, 3), nn.Dense(3, 3)), path)
