"""SGD against PyTorch's update rule written in NumPy; schedules; gradient clipping."""
import math

import numpy as np
import pytest

import gpublas
import nn
import nn_reference as ref
from reference import assert_close


def _param(values):
    p = nn.Parameter(values)
    return p


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [dict(), dict(momentum=0.9), dict(momentum=0.9, nesterov=True),
                                dict(momentum=0.8, weight_decay=0.01), dict(weight_decay=0.1),
                                dict(momentum=0.5, dampening=0.3)], ids=str)
def test_sgd_matches_pytorch_rule(rng, dtype, kw):
    p0 = rng.standard_normal((3, 7)).astype(dtype)
    grads = [rng.standard_normal((3, 7)).astype(dtype) for _ in range(4)]
    p = _param(p0)
    opt = nn.SGD([p], lr=0.1, **kw)
    for g in grads:
        opt.zero_grad()
        p.grad.set(g)
        opt.step()
    assert_close(p.data, ref.sgd(p0, grads, 0.1, **kw), dtype, k=8)


def test_sgd_rejects_bad_arguments():
    p = _param(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="nesterov"):
        nn.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="lr"):
        nn.SGD([p], lr=-1)
    with pytest.raises(TypeError, match="not an nn.Parameter"):
        nn.SGD([np.zeros(3)], lr=0.1)


def test_step_lr_and_cosine_lr():
    p = _param(np.zeros(2, np.float32))
    opt = nn.SGD([p], lr=1.0)
    sched = nn.StepLR(opt, step_size=2, gamma=0.5)
    assert [sched.step() for _ in range(5)] == [1.0, 0.5, 0.5, 0.25, 0.25]
    opt = nn.SGD([p], lr=2.0)
    cos = nn.CosineLR(opt, T_max=4)
    lrs = [cos.step() for _ in range(4)]
    assert lrs == pytest.approx([2 * (1 + math.cos(math.pi * e / 4)) / 2 for e in range(1, 5)])
    assert opt.lr == pytest.approx(0.0)


def test_clip_grad_norm(rng):
    a, b = _param(np.zeros((3, 4), np.float32)), _param(np.zeros(5, np.float64))
    ga, gb = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5)
    a.grad.set(ga)
    b.grad.set(gb)
    total = math.sqrt(float((ga.astype(np.float64) ** 2).sum() + (gb ** 2).sum()))
    assert nn.clip_grad_norm([a, b], max_norm=100.0) == pytest.approx(total, rel=1e-6)
    assert_close(a.grad, ga, np.float32)                     # under the limit: untouched
    assert nn.clip_grad_norm([a, b], max_norm=1.0) == pytest.approx(total, rel=1e-6)
    new = math.sqrt(float((a.grad.get().astype(np.float64) ** 2).sum() + (b.grad.get() ** 2).sum()))
    assert new == pytest.approx(1.0, rel=1e-5)


def test_zero_grad_clears_and_backward_accumulates(rng):
    layer = nn.Dense(3, 2, dtype=np.float64)
    x, dy = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    layer(x)
    layer.backward(dy)
    layer(x)
    layer.backward(dy)
    assert_close(layer.weight.grad, 2 * dy.T @ x, np.float64, k=4)
    assert_close(layer.bias.grad, 2 * dy.sum(0), np.float64, k=4)
    layer.zero_grad()
    assert not layer.weight.grad.get().any()
    assert isinstance(layer.weight.grad, gpublas.DeviceArray)
