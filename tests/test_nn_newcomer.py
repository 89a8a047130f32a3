"""What a PyTorch user tries right after the README (issue 34, nn's side): each case fails clearly or
behaves as PyTorch does."""
import os
import re
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
    code = ("import gc, gpublas.runtime.backends.sim_build as b; b._cpu_id.cache_clear(); b._cpu_id(); b._cpu_name(); "
            "gc.collect()")
    p = subprocess.run([sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", code],
                       capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), ".."))
    assert p.returncode == 0 and "ResourceWarning" not in p.stderr, p.stderr


# -- device-side index checks (gpublas.runtime.device_checks) -------------------------------------------------
def test_embedding_with_a_bad_device_index_raises_at_the_next_sync():
    emb = nn.Embedding(10, 4)
    y = emb(gpublas.to_device(np.array([[1, 10], [3, -2]], np.int32)))   # no read-back: nothing raised yet
    with pytest.raises(IndexError, match=r"Embedding\(10, 4\): index 10 at position 1 .* outside \[0, 10\)"
                                         r".*reported at this host synchronization"):
        y.get()   # 10 and -2 at positions 1 and 3: the first is reported (under any thread order), once
    emb(gpublas.to_device(np.array([7, -3, 10], np.int32)))
    with pytest.raises(IndexError, match=r"index -3 at position 1 "):
        gpublas.synchronize()
    np.testing.assert_array_equal(emb(gpublas.to_device(np.array([2], np.int32))).get(), emb.weight.data.get()[2:3])


def test_a_bad_device_label_raises_index_error_naming_the_loss():
    crit = nn.SoftmaxCrossEntropy()
    logits = gpublas.to_device(np.zeros((4, 5), np.float32))
    with pytest.raises(IndexError, match=r"SoftmaxCrossEntropy\(\): label\[2\] = 5 is outside \[0, 5\)"):
        crit(logits, gpublas.to_device(np.array([0, 4, 5, 1], np.int32)))   # the loss as a float: a read-back
    assert abs(crit(logits, gpublas.to_device(np.array([0, 4, 3, 1], np.int32))) - np.log(5)) < 1e-6


def test_a_bad_index_in_a_graph_is_reported_at_the_sync_after_the_replay():
    emb, crit = nn.Embedding(6, 3), nn.CrossEntropyLoss()
    idx = gpublas.to_device(np.array([0, 5, 2], np.int32))
    labels = gpublas.to_device(np.array([0, 1, 2], np.int32))
    crit(emb(idx), labels, on_device=True)                   # compiled before the capture
    with gpublas.graph() as g:
        total = crit(emb(idx), labels, on_device=True)
    g.replay()
    assert np.isfinite(total.get()).all()
    idx.set(np.array([0, 6, 2], np.int32))
    labels.set(np.array([0, 1, 3], np.int32))
    g.replay()
    with pytest.raises(IndexError, match=r"Embedding\(6, 3\): index 6 at position 1"):  # the earlier launch's
        total.get()
    g.replay()
    with pytest.raises(IndexError, match=r"Embedding\(6, 3\): index 6 at position 1"):
        with gpublas.Stream() as s:
            s.synchronize()


# -- copy.deepcopy and pickle of Modules and optimizers (nn/portable.py) -------------------------------
def _net():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Dropout(0.5), nn.Dense(18, 3))


def _steps(model, opt, x, y, n):
    crit = nn.SoftmaxCrossEntropy()
    for _ in range(n):
        crit(model(x), y)
        opt.zero_grad()
        model.backward(crit.backward())
        opt.step()


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("make", [lambda p: nn.SGD(p, lr=0.1, momentum=0.9), lambda p: nn.Adam(p, lr=0.01)],
                         ids=["SGD", "Adam"])
def test_a_model_and_its_optimizer_copied_together_train_as_the_originals(rng, how, make):
    import copy
    import pickle
    nn.manual_seed(0)
    model = _net()
    opt = make(model.parameters())
    x = gpublas.to_device(rng.standard_normal((4, 1, 8, 8)).astype(np.float32))
    y = gpublas.to_device(np.array([0, 2, 1, 2], np.int32))
    _steps(model, opt, x, y, 1)
    model2, opt2 = copy.deepcopy((model, opt)) if how == "deepcopy" else pickle.loads(pickle.dumps((model, opt)))
    assert opt2.params == model2.parameters() and opt2.flat.intact()   # the copy's optimizer drives the copy
    assert opt2.steps == 1 and opt2.lr == opt.lr
    _steps(model, opt, x, y, 2)
    _steps(model2, opt2, x, y, 2)
    for (k, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        np.testing.assert_array_equal(a, b, err_msg=k)
    model2[6].weight.data.fill(0)   # the copies share nothing with the originals
    assert np.abs(model[6].weight.data.get()).sum() > 0


def test_deepcopy_of_a_model_keeps_views_of_one_allocation_together(rng):
    import copy
    nn.manual_seed(1)
    lstm = nn.LSTM(3, 4)
    x = gpublas.to_device(rng.standard_normal((5, 2, 3)).astype(np.float32))
    lstm(x)
    twin = copy.deepcopy(lstm)
    for m in (lstm, twin):
        out, _ = m(x)
        m.zero_grad()
        m.backward(gpublas.ones_like(out))
    for (k, p), q in zip(lstm.named_parameters(), twin.parameters()):
        np.testing.assert_array_equal(p.grad.get(), q.grad.get(), err_msg=k)


@pytest.mark.parametrize("make", [lambda: nn.Conv2d(2, 3, 3, padding=1), lambda: nn.MaxPool2d(2),
                                  lambda: nn.AvgPool2d(3, stride=2, padding=1)], ids=["Conv2d", "MaxPool2d", "AvgPool2d"])
def test_2d_layers_take_unbatched_input_as_torch(rng, make):
    torch = pytest.importorskip("torch")
    nn.manual_seed(0)
    layer = make()
    x = rng.standard_normal((2, 5, 7)).astype(np.float32)
    t = {"Conv2d": lambda: torch.nn.Conv2d(2, 3, 3, padding=1), "MaxPool2d": lambda: torch.nn.MaxPool2d(2),
         "AvgPool2d": lambda: torch.nn.AvgPool2d(3, stride=2, padding=1)}[type(layer).__name__]()
    if layer.parameters():
        t.load_state_dict({k: torch.from_numpy(v) for k, v in layer.state_dict().items()})
    tx = torch.from_numpy(x).requires_grad_()
    ty = t(tx)
    y = layer(gpublas.to_device(x))
    assert y.shape == tuple(ty.shape) and len(y.shape) == 3
    np.testing.assert_allclose(y.get(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    ty.backward(torch.from_numpy(dy))
    dx = layer.backward(gpublas.to_device(dy))
    assert dx.shape == x.shape
    np.testing.assert_allclose(dx.get(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (k, p), (_, tp) in zip(layer.named_parameters(), t.named_parameters()):
        np.testing.assert_allclose(p.grad.get(), tp.grad.numpy(), rtol=1e-5, atol=1e-5, err_msg=k)
    batched = layer(gpublas.to_device(x[None]))   # and batched input still batched
    assert batched.shape == (1,) + y.shape


@pytest.mark.parametrize("name", ["digits", "lstm", "mnist", "gpt"])
def test_the_examples_help_gives_every_options_meaning_and_default(name, capsys):
    import importlib
    main = importlib.import_module(f"nn.examples.{name}").main
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--quiet" in text and "--seed" in text
    for opt in re.findall(r"(--[a-z-]+) [A-Z_]+ ", text):   # an option with a value: its meaning, then text
        assert re.search(re.escape(opt) + r" [A-Z_]+ [A-Za-z{]", text), (opt, text)
    for opt in ("--seed", "--batch-size"):   # each option's text and its default
        assert re.search(re.escape(opt) + r" [A-Z_]+ [a-z][^-]*\(default: \d+\)", text), (opt, text)


def test_digits_quiet_prints_only_the_summary_line(capsys):
    from nn.examples import digits
    assert digits.main(["--epochs", "1", "--quiet", "--width", "4"]) == 0
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == 1 and out.startswith("digits: test accuracy"), out
    assert "epoch" not in err and "step" not in err, err
