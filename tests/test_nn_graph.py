"""Whole nn training steps captured once with gpublas.graph and replayed equal eager steps bit for bit:
a CNN with dropout (new masks every replay) and Adam, an LSTM with gradient clipping, momentum SGD and a
cosine schedule (the learning rate changes between replays), over several replays with new batch
contents; and the examples' --graph runs print what their eager runs print."""
import re

import numpy as np
import pytest

import gpublas
import nn
from nn.examples import digits, lstm as lstm_example

from test_nn_device_step import _cnn, _cnn_step, _lstm, _lstm_step


def _train(build, captured, steps=5):
    """Losses, weights and device counters after `steps` steps on fresh batches, eager or replayed."""
    step, model, opt, x, y = build(np.random.default_rng(1))
    crit = nn.SoftmaxCrossEntropy()
    sched = nn.CosineLR(opt, T_max=steps)
    batches = np.random.default_rng(2)
    graph, losses = None, []
    for i in range(steps):
        x.set(batches.standard_normal(x.shape).astype(np.float32))
        y.set(batches.integers(0, 3, y.shape).astype(np.int32))
        if not captured or i == 0:          # the first step eagerly: kernels compiled, the pool warm
            loss = step(model, crit, opt, x, y)
        else:
            if graph is None:
                with gpublas.graph() as graph:
                    loss = step(model, crit, opt, x, y)
            graph.replay()
        losses.append(loss.get()[0])
        sched.step()
    modules = model if isinstance(model, tuple) else (model,)
    weights = [p.data.get() for m in modules for p in m.parameters()]
    offsets = [m.offset for mod in modules for m in mod.modules() if isinstance(m, nn.Dropout)]
    return np.array(losses), weights, offsets, opt.steps


@pytest.mark.parametrize("build", [_cnn, _lstm], ids=["cnn-dropout-adam", "lstm-clip-sgd-cosine"])
def test_replayed_steps_equal_eager_steps(build, sim_order):
    eager, replayed = _train(build, False), _train(build, True)
    assert np.array_equal(eager[0], replayed[0])
    assert all(np.array_equal(a, b) for a, b in zip(eager[1], replayed[1]))
    assert eager[2:] == replayed[2:]
    assert replayed[3] == 5


def _output(main, argv, capsys):
    """What the example printed, less its timings and the word 'graphed'."""
    assert main(argv) == 0
    return [re.sub(r", [0-9.]+ s", "", line.replace(", graphed", "")) for line in capsys.readouterr().out.splitlines()]


PRECISIONS = pytest.mark.parametrize("precision", ["fp32", "bf16"])  # fp16's GradScaler refuses --graph


@PRECISIONS
def test_lstm_example_graph_prints_what_eager_prints(capsys, precision):
    argv = ["--steps", "6", "--seq-len", "5", "--batch-size", "4", "--hidden", "8", "--quiet", "--precision", precision]
    eager = _output(lstm_example.main, argv, capsys)
    graphed = _output(lstm_example.main, argv + ["--graph"], capsys)
    assert eager == graphed and any("loss" in line for line in eager)


@PRECISIONS
def test_digits_example_graph_prints_what_eager_prints(capsys, precision):
    pytest.importorskip("sklearn")
    argv = ["--epochs", "2", "--width", "4", "--batch-size", "200", "--quiet", "--precision", precision]
    eager = _output(digits.main, argv, capsys)
    graphed = _output(digits.main, argv + ["--graph"], capsys)
    assert eager == graphed and any("test accuracy" in line for line in eager)


def test_batchnorm_steps_replay_and_the_cumulative_average_refuses_capture(rng):
    x = gpublas.to_device(rng.standard_normal((6, 3, 4, 4)).astype(np.float32))
    runs = []
    for captured in (False, True):
        nn.manual_seed(3)
        bn = nn.BatchNorm2d(3)
        bn(x)                                    # compiled, the pool warm
        if captured:
            with gpublas.graph() as g:
                bn(x)
            for _ in range(3):
                g.replay()
        else:
            for _ in range(3):
                bn(x)
        runs.append((bn.running_mean.get(), bn.running_var.get()))
    assert all(np.array_equal(a, b) for a, b in zip(*runs))
    cumulative = nn.BatchNorm2d(3, momentum=None)
    cumulative(x)
    with pytest.raises(gpublas.GraphError, match="momentum=None"):
        with gpublas.graph():
            cumulative(x)
