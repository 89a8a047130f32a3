"""Flat parameter groups (nn/flat_params.py): an optimizer moves its parameters into one buffer per dtype
for the weights and one for the gradients, so zero_grad and each update are one launch per group, with
the same results as one launch per parameter; replaced arrays (Module.to) fall back to per parameter."""
import numpy as np
import pytest

import gpublas
import nn
from nn.reference import layers as ref
from reference import assert_close


def _kernel_counts(p):
    return {e.name: e.count for e in p.key_averages()}


def _params(rng, dtypes=(np.float32, np.float64, np.float32)):
    return [nn.Parameter(rng.standard_normal(shape).astype(dtype))
            for shape, dtype in zip([(3, 4), (5,), (2, 3, 2)], dtypes)]


def test_parameters_become_views_of_one_buffer_per_dtype_with_their_values(rng):
    params = _params(rng)
    before = [(p.data.get(), p.grad.get()) for p in params]
    opt = nn.SGD(params, lr=0.1, momentum=0.9)
    assert len(opt.flat.groups) == 2 and opt.flat.intact()
    for p, (d, g) in zip(params, before):
        assert np.array_equal(p.data.get(), d) and np.array_equal(p.grad.get(), g)
        assert p.data.c_contiguous and p.data.base is not None
    f32 = opt.flat.groups[0][0]
    assert f32.size == 12 + 12 and gpublas.may_share_memory(params[0].data, f32)


@pytest.mark.parametrize("make", [lambda ps: nn.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                                  lambda ps: nn.Adam(ps, lr=0.05, amsgrad=True)], ids=["sgd", "adam"])
def test_one_launch_per_group_and_the_per_parameter_rule(rng, make):
    params = _params(rng)
    p0 = [p.data.get() for p in params]
    grads = [[rng.standard_normal(p.shape).astype(p.dtype) for p in params] for _ in range(3)]
    opt = make(params)
    opt.zero_grad()
    opt.step()   # compiled; a zero gradient
    with gpublas.profile() as prof:
        opt.zero_grad()
        opt.step()
    counts = _kernel_counts(prof)
    update = "sgd_update" if isinstance(opt, nn.SGD) else "adam_update"
    assert counts[update] == 2 and counts["[memset]"] == 2     # two dtypes: two groups
    # the same steps with the groups switched off (one launch per parameter, on the same state views)
    twins = [nn.Parameter(a) for a in p0]
    other = make(twins)
    other.flat.groups = []
    assert not other.flat.intact()
    for p, a in zip(params, p0):
        p.data.set(a)
    opt.state.set(np.array([opt.lr, 0.0, 0.0, 0.0]))          # back to step 0
    for step in grads:
        for opt_, ps in ((opt, params), (other, twins)):
            opt_.zero_grad()
            for p, g in zip(ps, step):
                p.grad.set(g)
            opt_.step()
    for p, q in zip(params, twins):
        assert np.array_equal(p.data.get(), q.data.get())


def test_a_replaced_array_falls_back_to_per_parameter_updates(rng):
    params = _params(rng, (np.float32,) * 3)
    p0 = [p.data.get() for p in params]
    g = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    opt = nn.SGD(params, lr=0.1, momentum=0.9)
    params[1].data = gpublas.to_device(params[1].data.get())    # as Module.to does
    assert not opt.flat.intact()
    for _ in range(2):
        opt.zero_grad()
        for p, gi in zip(params, g):
            p.grad.set(gi)
        opt.step()
    for p, a, gi in zip(params, p0, g):
        assert_close(p.data, ref.sgd(a, [gi, gi], 0.1, momentum=0.9), np.float32, k=8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_grad_norm_of_a_flat_group_is_one_reduction_and_one_scaling(rng, dtype):
    """A flat group's gradients (back to back in one buffer) are clipped as one vector: one dot, one
    clip_scale; total as NumPy's norm, each gradient scaled by the coefficient of that total."""
    params = _params(rng, (dtype,) * 3)
    opt = nn.SGD(params, lr=0.1)
    grads = [rng.standard_normal(p.shape).astype(dtype) for p in params]
    for p, g in zip(params, grads):
        p.grad.set(g)
    want = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
    with gpublas.profile() as prof:
        total = nn.clip_grad_norm(opt.params, 1.0, on_device=True)
    counts = _kernel_counts(prof)
    assert counts["dot_partial"] == 1 and counts["clip_scale"] == 1
    total = float(total.get()[0])
    assert total == pytest.approx(want, rel=1e-6) and total > 1.0
    for p, g in zip(params, grads):
        assert np.array_equal(p.grad.get(), g * (np.dtype(dtype).type(1.0 / (total + 1e-6))))
    # a list that is not the group's layout (reordered, or a gap) keeps one reduction per parameter
    with gpublas.profile() as prof:
        nn.clip_grad_norm(opt.params[::-1], 1e9)
        nn.clip_grad_norm(opt.params[::2], 1e9)
    assert _kernel_counts(prof)["dot_partial"] == 3 + 2
