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


@pytest.mark.parametrize("bad", [np.array(["1.5", "2"] * 12).reshape(3, 8), np.ones((3, 8), np.complex64),
                                 np.ones((3, 8), bool), np.full((3, 8), np.datetime64("2026-01-01"))],
                         ids=["strings", "complex", "bool", "datetime"])
def test_load_refuses_non_numeric_arrays_naming_the_key(tmp_path, bad):
    model = _model(0)
    before = model.state_dict()
    path = tmp_path / "bad.npz"
    np.savez(path, **{**before, "3.weight": bad})
    with pytest.raises(ValueError, match=r"'3.weight' holds .* not real numbers"):
        nn.load(_model(0), path)
    with pytest.raises(ValueError, match=r"'3.weight' holds .* not real numbers"):
        model.load_state_dict({**before, "3.weight": bad})
    for k, v in model.state_dict().items():       # nothing was half-loaded
        assert np.array_equal(v, before[k]), k


def test_load_refuses_object_arrays_naming_the_key(tmp_path):
    path = tmp_path / "obj.npz"
    np.savez(path, **{**_model(0).state_dict(), "0.bias": np.array([1.0, None], dtype=object)})
    with pytest.raises(ValueError, match=r"array '0.bias' cannot be loaded"):
        nn.load(_model(0), path)


def test_load_takes_floats_and_exact_integers_only():
    model = nn.Sequential(nn.Dense(2, 2))
    sd = model.state_dict()
    model.load_state_dict({**sd, "0.bias": np.array([3, -4], np.int64)})          # exact in float32
    assert model.state_dict()["0.bias"].tolist() == [3.0, -4.0]
    model.load_state_dict({**sd, "0.weight": sd["0.weight"].astype(np.float64)})  # rounded, as PyTorch
    with pytest.raises(ValueError, match=r"'0.bias' holds int64 values that float32 cannot represent exactly"):
        model.load_state_dict({**sd, "0.bias": np.array([2 ** 24 + 1, 0], np.int64)})
    with pytest.raises(ValueError, match=r"'0.bias' holds float64 values beyond the range of float32"):
        model.load_state_dict({**sd, "0.bias": np.array([1e300, 0.0])})


def test_save_removes_stale_temporaries_of_dead_savers(tmp_path):
    """A save killed with kill -9 leaves .<target>.tmp-<pid>-<random>; the next save of that target
    removes it when <pid> is dead, and leaves a live process's temporary and other files alone."""
    import subprocess
    import sys
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()                                        # a pid that has exited (and been reaped)
    path = tmp_path / "ckpt.npz"
    stale = tmp_path / f".ckpt.npz.tmp-{dead.pid}-abc123"
    stale.write_bytes(b"PK\x03\x04 a half-written checkpoint")
    live = tmp_path / f".ckpt.npz.tmp-{os.getppid()}-xyz_9"     # our parent is alive
    other = [tmp_path / f".other.npz.tmp-{dead.pid}-abc123", tmp_path / f".ckpt.npz.tmp-{dead.pid}-abc.bak",
             tmp_path / "ckpt.npz.tmp-1-x"]
    for f in [live] + other:
        f.write_bytes(b"keep")
    nn.save(_model(0), path)
    assert not stale.exists()
    assert live.exists() and all(f.exists() for f in other)
    assert sorted(os.listdir(tmp_path)) == sorted(["ckpt.npz", live.name] + [f.name for f in other])
