"""SGD, Adam and AdamW against PyTorch's update rules written in NumPy (and PyTorch itself where installed);
schedules; gradient clipping."""
import math

import numpy as np
import pytest

import gpublas
import nn
from nn.reference import layers as ref
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


ADAM_CASES = [(nn.Adam, dict()), (nn.Adam, dict(weight_decay=0.1)), (nn.Adam, dict(amsgrad=True, betas=(0.8, 0.9))),
              (nn.AdamW, dict()), (nn.AdamW, dict(weight_decay=0.3, amsgrad=True, eps=1e-3))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls, kw", ADAM_CASES, ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_adam_matches_pytorch_rule(rng, dtype, cls, kw):
    p0 = rng.standard_normal((5, 3)).astype(dtype)
    # gradients that shrink, so that amsgrad's running max differs from v
    grads = [(rng.standard_normal((5, 3)) * s).astype(dtype) for s in (2.0, 1.0, 0.1, 0.05)]
    p = _param(p0)
    opt = cls([p], lr=0.05, **kw)
    for g in grads:
        opt.zero_grad()
        p.grad.set(g)
        opt.step()
    want = ref.adam(p0, grads, 0.05, decoupled=cls is nn.AdamW, **{"weight_decay": 0.01 * (cls is nn.AdamW), **kw})
    assert_close(p.data, want, dtype, k=8)


def test_adam_first_step_is_lr_times_sign():
    """After bias correction the first step is m / sqrt(v) = g / |g|: every element moves by lr."""
    p0 = np.array([1.0, -2.0, 3.0, 0.5, 7.0])
    g = np.array([1e-3, -5.0, 30.0, -1e-2, 2.0])
    p = _param(p0)
    opt = nn.Adam([p], lr=0.01, eps=0.0)
    p.grad.set(g)
    opt.step()
    assert_close(p.data, p0 - 0.01 * np.sign(g), np.float64)
    assert opt.steps == 1


def test_adamw_decay_is_decoupled_from_the_gradient():
    """With a zero gradient, AdamW only shrinks p by (1 - lr wd); Adam's L2 decay becomes a full-size step."""
    p0 = np.array([2.0, -4.0])
    a, b = _param(p0), _param(p0)
    nn.AdamW([a], lr=0.1, weight_decay=0.5).step()
    nn.Adam([b], lr=0.1, weight_decay=0.5).step()
    assert_close(a.data, p0 * (1 - 0.1 * 0.5), np.float64)
    assert_close(b.data, p0 - 0.1 * np.sign(p0), np.float64, atol=1e-7)


def test_adam_follows_schedule_and_clipping(rng):
    p0 = rng.standard_normal(6)
    grads = [rng.standard_normal(6) * 10 for _ in range(4)]
    p = _param(p0)
    opt = nn.Adam([p], lr=0.2, weight_decay=0.01)
    sched = nn.StepLR(opt, step_size=2, gamma=0.5)
    lrs, clipped = [], []
    for g in grads:
        lrs.append(opt.lr)
        p.grad.set(g)
        nn.clip_grad_norm([p], max_norm=1.0)
        clipped.append(p.grad.get())
        opt.step()
        sched.step()
    assert lrs == [0.2, 0.2, 0.1, 0.1]
    assert np.linalg.norm(clipped[0]) == pytest.approx(1.0, rel=1e-5)
    assert_close(p.data, ref.adam(p0, clipped, None, weight_decay=0.01, lrs=lrs), np.float64, k=8)


def test_adam_rejects_bad_arguments():
    p = _param(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"betas must be in \[0, 1\)"):
        nn.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="lr, eps and weight_decay"):
        nn.AdamW([p], lr=-0.1)
    with pytest.raises(TypeError, match="not an nn.Parameter"):
        nn.Adam([np.zeros(3)])


@pytest.mark.parametrize("cls, kw", ADAM_CASES, ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_adam_parity_with_pytorch(rng, cls, kw):
    torch = pytest.importorskip("torch")
    p0 = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) * s for s in (1.0, 3.0, 0.2)]
    p = _param(p0)
    tp = torch.nn.Parameter(torch.tensor(p0))
    opt, topt = cls([p], lr=0.03, **kw), getattr(torch.optim, cls.__name__)([tp], lr=0.03, **kw)
    for g in grads:
        p.grad.set(g)
        opt.step()
        tp.grad = torch.tensor(g)
        topt.step()
    assert_close(p.data, tp.detach().numpy(), np.float64, k=8)
