"""What a PyTorch user tries right after the README (issue 34, nn's side): each case fails clearly or
behaves as PyTorch does."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpublas
import nn


class MLP(nn.Module):
    """A custom model with a forward and no backward: what a PyTorch user writes first."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Dense(4, 3), nn.Dense(3, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x))


def test_a_module_without_backward_says_nn_has_no_autograd():
    m = MLP()
    y = m(np.ones((2, 4), np.float32))
    with pytest.raises(NotImplementedError, match=r"MLP defines no backward\(\): nn has no autograd.*"
                                                  r"docs/custom-modules\.md"):
        m.backward(gpublas.ones_like(y))
    assert os.path.isfile(os.path.join(os.path.dirname(__file__), "..", "docs", "custom-modules.md"))


@pytest.mark.parametrize("make", [lambda p: nn.Adam(p), lambda p: nn.AdamW(p), lambda p: nn.SGD(p, lr=0.1)],
                         ids=["Adam", "AdamW", "SGD"])
def test_an_optimizer_without_parameters_is_refused_as_torch_does(make):
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        make([])
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        make(iter(nn.ReLU().parameters()))


def test_a_float_loss_inside_a_graph_says_to_pass_on_device():
    crit = nn.SoftmaxCrossEntropy()
    logits = gpublas.zeros((3, 4), np.float32)
    labels = gpublas.to_device(np.array([0, 1, 3], np.int32))
    crit(logits, labels, on_device=True)   # compiled outside the capture
    with pytest.raises(gpublas.GraphError, match="pass on_device=True"):
        with gpublas.graph():
            crit(logits, labels)
    with gpublas.graph() as g:
        total = crit(logits, labels, on_device=True)
    g.replay()
    assert abs(float(total.get()[0]) - np.log(4)) < 1e-6


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_save_gives_the_file_the_mode_the_umask_gives(tmp_path, umask):
    old = os.umask(umask)
    try:
        nn.save(nn.Sequential(nn.Dense(2, 2)), tmp_path / "m.npz")
        np.savez(tmp_path / "ref.npz", a=np.zeros(1))
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "m.npz").st_mode & 0o777 == 0o666 & ~umask
    assert os.stat(tmp_path / "m.npz").st_mode & 0o777 == os.stat(tmp_path / "ref.npz").st_mode & 0o777


def test_the_cpu_id_closes_proc_cpuinfo():
    """-W error::ResourceWarning: an unclosed /proc/cpuinfo (the sim's compile cache key) fails the run."""
    code = ("import gc, gpublas.backends.sim_build as b; b._cpu_id.cache_clear(); b._cpu_id(); b._cpu_name(); "
            "gc.collect()")
    p = subprocess.run([sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", code],
                       capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), ".."))
    assert p.returncode == 0 and "ResourceWarning" not in p.stderr, p.stderr
