"""A training step that stays on the device: the learning rate, Adam's step count, dropout's counter and
gradient clipping live in device memory, the loss can stay there, and a whole step (zero_grad, forward,
loss, backward, clip_grad_norm, optimizer step) reads nothing back and allocates nothing new after its
first run, so it can be captured in a graph. Eager results are those of the host-side rules."""
import math

import numpy as np
import pytest

import gpublas
import nn
from nn import kernels as K
from nn.reference import layers as ref
from reference import assert_close


def _transfers(p):
    """Host copies seen by profile p (memsets and device-to-device copies are device work)."""
    return {e.name: e.count for e in p.key_averages() if e.name in ("[memcpy HtoD]", "[memcpy DtoH]")}


# -- the learning rate and the step count -----------------------------------------------------------
def test_lr_lives_in_device_memory_and_schedules_write_it():
    p = nn.Parameter(np.zeros(3, np.float32))
    opt = nn.SGD([p], lr=0.5, momentum=0.9)
    assert opt.state.get()[0] == 0.5 and opt.lr == 0.5
    sched = nn.StepLR(opt, step_size=1, gamma=0.1)
    sched.step()
    assert opt.lr == pytest.approx(0.05) and opt.state.get()[0] == opt.lr


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("make", [lambda ps: nn.SGD(ps, lr=0.3, momentum=0.9, nesterov=True),
                                  lambda ps: nn.SGD(ps, lr=0.3, momentum=0.5, dampening=0.2),
                                  lambda ps: nn.Adam(ps, lr=0.3, amsgrad=True),
                                  lambda ps: nn.AdamW(ps, lr=0.3)], ids=["nesterov", "dampening", "adam", "adamw"])
def test_a_changing_lr_matches_the_host_rule_step_by_step(rng, dtype, make):
    """Each step with its own lr (set between steps, as a schedule does) against the NumPy rule run with
    that lr: the device reads the value of the moment, and t counts the steps on the device."""
    p0 = rng.standard_normal((4, 5)).astype(dtype)
    grads = [rng.standard_normal((4, 5)).astype(dtype) for _ in range(4)]
    lrs = [0.3, 0.1, 0.7, 0.02]
    p = nn.Parameter(p0)
    opt = make([p])
    for g, lr in zip(grads, lrs):
        opt.lr = lr
        p.grad.set(g)
        opt.step()
    want = _host_rule(opt, p0, grads, lrs)
    assert_close(p.data, want, dtype, k=8)
    assert opt.steps == 4


def _host_rule(opt, p0, grads, lrs):
    """The NumPy reference, one step at a time with each step's lr (its state carried by hand)."""
    w = p0.astype(np.float64)
    if isinstance(opt, nn.SGD):
        buf = None
        for g, lr in zip(grads, lrs):
            g = g + opt.weight_decay * w
            buf = g if buf is None else opt.momentum * buf + (1 - opt.dampening) * g
            w = w - lr * (g + opt.momentum * buf if opt.nesterov else buf)
        return w
    (b1, b2), m, v, vmax = opt.betas, 0 * w, 0 * w, 0 * w
    for t, (g, lr) in enumerate(zip(grads, lrs), 1):
        if opt.decoupled:
            w = w * (1 - lr * opt.weight_decay)
        else:
            g = g + opt.weight_decay * w
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v) if opt.amsgrad else v
        w = w - lr / (1 - b1 ** t) * m / (np.sqrt(vmax) / math.sqrt(1 - b2 ** t) + opt.eps)
    return w


def test_every_optimizer_counts_its_steps_on_the_device():
    for opt in (nn.SGD([nn.Parameter(np.zeros(2))], lr=0.1), nn.Adam([nn.Parameter(np.zeros(2))])):
        for _ in range(3):
            opt.step()
        assert opt.steps == 3


def test_sgd_first_step_is_decided_on_the_device():
    """t == 1 sets buf = g, whatever the buffer held: garbage in a fresh buffer is never read."""
    p = nn.Parameter(np.zeros(4))
    opt = nn.SGD([p], lr=1.0, momentum=0.9)
    opt.buffers[0].fill(np.nan)
    p.grad.fill(1.0)
    opt.step()
    assert_close(p.data, -np.ones(4), np.float64)
    opt.step()
    assert_close(p.data, -np.ones(4) * (1 + 1.9), np.float64)


# -- dropout's counter ------------------------------------------------------------------------------
def _splitmix_mask(seed, offset, n, p):
    """dropout.cu's mask in NumPy: splitmix64(offset + i keyed by seed), top 24 bits against p."""
    with np.errstate(over="ignore"):
        z = (np.arange(n, dtype=np.uint64) + np.uint64(offset)) * np.uint64(0x9E3779B97F4A7C15) \
            + np.uint64(seed) * np.uint64(0xD1B54A32D192ED03) + np.uint64(0x632BE59BD9B4E019)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return u >= np.float32(p)


def test_dropout_counter_advances_on_the_device_with_no_transfer():
    nn.manual_seed(3)
    d = nn.Dropout(0.3)
    x = gpublas.to_device(np.ones((5, 7), np.float32))
    d(x)  # compiled and warm
    with gpublas.profile() as prof:
        masks = [d(x).get() != 0 for _ in range(3)]  # the get()s are this test's, not the layer's
    assert _transfers(prof) == {"[memcpy DtoH]": 3}
    assert d.offset == 4 * 35
    for k, m in enumerate(masks, 1):
        assert np.array_equal(m.ravel(), _splitmix_mask(d.seed, 35 * k, 35, 0.3))
    d.offset = 35  # rewinding replays the draws (gradcheck relies on it)
    assert np.array_equal(d(x).get() != 0, masks[0])


# -- clipping ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n32, n64", [(1, 0), (0, 1), (7, 0), (8, 3), (9, 0), (128, 0), (129, 5), (300, 0),
                                      (0, 1000), (2053, 17)])
def test_clip_coefficient_sums_slots_as_numpy_does(rng, n32, n64):
    """The one-thread kernel's total is bit for bit the host formula it replaced:
    sqrt(sum of the float32 slots as float64 + sum of the float64 slots), NumPy's pairwise sums."""
    s32 = rng.uniform(0, 10, n32).astype(np.float32)
    s64 = rng.uniform(0, 10, n64)
    clip = gpublas.empty((2,), np.float64)
    for max_norm in (1.0, 1e6):
        K.clip_coef(gpublas.to_device(s32) if n32 else None, gpublas.to_device(s64) if n64 else None, max_norm, clip)
        total = math.sqrt(sum(float(s.astype(np.float64).sum()) for s in (s32, s64) if s.size))
        got = clip.get()
        assert got[0] == total
        assert got[1] == (max_norm / (total + 1e-6) if total > max_norm else 1.0)


def test_clip_grad_norm_on_device_matches_the_float(rng):
    ga, gb = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5)
    results = []
    for on_device in (False, True):
        a, b = nn.Parameter(np.zeros((3, 4), np.float32)), nn.Parameter(np.zeros(5))
        a.grad.set(ga)
        b.grad.set(gb)
        total = nn.clip_grad_norm([a, b], 1.0, on_device=on_device)
        if on_device:
            assert isinstance(total, gpublas.DeviceArray) and total.dtype == np.float64 and total.shape == (1,)
            total = float(total.get()[0])
        results.append((total, a.grad.get(), b.grad.get()))
    (t0, a0, b0), (t1, a1, b1) = results
    assert t0 == t1 and np.array_equal(a0, a1) and np.array_equal(b0, b1)
    scale = 1.0 / (t0 + 1e-6)
    assert np.array_equal(a0, ga * np.float32(scale)) and np.array_equal(b0, gb * scale)


def test_clip_grad_norm_leaves_nan_gradients_unscaled():
    a = nn.Parameter(np.zeros(3))
    a.grad.set(np.array([np.nan, 1.0, 2.0]))
    assert math.isnan(nn.clip_grad_norm([a], 1.0))
    np.testing.assert_array_equal(a.grad.get(), [np.nan, 1.0, 2.0])


# -- the loss ---------------------------------------------------------------------------------------
def test_loss_on_device_is_the_float_and_device_labels_are_not_read(rng):
    logits = gpublas.to_device(rng.standard_normal((6, 4)).astype(np.float32))
    labels = gpublas.to_device(rng.integers(0, 4, 6).astype(np.int32))
    crit = nn.SoftmaxCrossEntropy()
    want = crit(logits, labels)
    with gpublas.profile() as prof:
        got = crit(logits, labels, on_device=True)
    assert _transfers(prof) == {}
    assert got.shape == (1,) and float(got.get()[0]) == want
    assert want == pytest.approx(ref.np_softmax_xent(logits.get().astype(np.float64), labels.get())[0], rel=1e-5)
    bad = gpublas.to_device(np.array([0, 1, 4, 0, 0, 0], np.int32))  # not read back: found by the kernel
    with gpublas.profile() as prof:
        crit(logits, bad, on_device=True)
    assert _transfers(prof) == {}
    with pytest.raises(IndexError, match=r"label\[2\] = 4 is outside \[0, 4\)"):   # at the next synchronization
        gpublas.synchronize()
    mse = nn.MSELoss()
    target = gpublas.to_device(rng.standard_normal((6, 4)).astype(np.float32))
    assert float(mse(logits, target, on_device=True).get()[0]) == mse(logits, target)


def test_device_indices_are_not_read_back_and_bad_ones_give_nan_rows_and_an_index_error(rng):
    layer = nn.Embedding(5, 3)
    good = gpublas.to_device(np.array([[0, 4], [2, 2]], np.int32))
    with gpublas.profile() as prof:
        y = layer(good)
    assert _transfers(prof) == {}
    assert np.array_equal(y.get(), layer.weight.data.get()[[[0, 4], [2, 2]]])
    y = layer(gpublas.to_device(np.array([1, 5, -1], np.int32)))
    with pytest.raises(IndexError, match=r"index 5 at position 1"):
        y.get()
    y = y.get()   # reported once: the rows of the bad indices are NaN
    assert np.array_equal(y[0], layer.weight.data.get()[1]) and np.isnan(y[1:]).all()
    layer.backward(np.ones((3, 3), np.float32))      # the bad rows add to no row
    assert np.array_equal(layer.weight.grad.get(), np.eye(5, dtype=np.float32)[[1]].T @ np.ones((1, 3), np.float32))


def test_loss_track_sums_and_smooths_as_host_floats(rng):
    values = rng.standard_normal(20).astype(np.float32) * 3
    acc, smooth = gpublas.zeros((1,), np.float64), gpublas.zeros((1,), np.float64)
    total, host_smooth = 0.0, None
    for i, v in enumerate(values):
        loss = gpublas.to_device(np.array([v]))
        K.loss_track(loss, acc, 1.0, 32.0)
        K.loss_track(loss, smooth, *((0.0, 1.0) if i == 0 else (0.9, 0.1)))
        total += float(v) * 32
        host_smooth = float(v) if host_smooth is None else 0.9 * host_smooth + 0.1 * float(v)
    assert acc.get()[0] == total and smooth.get()[0] == host_smooth


# -- whole steps --------------------------------------------------------------------------------------
def _cnn_step(model, crit, opt, x, y):
    opt.zero_grad()
    loss = crit(model(x), y, on_device=True)
    model.backward(crit.backward())
    opt.step()
    return loss


def _lstm_step(parts, crit, opt, x, y):
    lstm, head = parts
    opt.zero_grad()
    out, _ = lstm(x)
    T, N, H = out.shape
    loss = crit(head(out.reshape(T * N, H)), y, on_device=True)
    lstm.backward(head.backward(crit.backward()).reshape(T, N, H))
    nn.clip_grad_norm(opt.params, 0.5, on_device=True)
    opt.step()
    return loss


def _cnn(rng):
    nn.manual_seed(5)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Dropout(0.3), nn.Dense(36, 3))
    x = gpublas.to_device(rng.standard_normal((8, 1, 6, 6)).astype(np.float32))
    y = gpublas.to_device(rng.integers(0, 3, 8).astype(np.int32))
    return _cnn_step, model, nn.Adam(model.parameters(), lr=0.01), x, y


def _lstm(rng):
    nn.manual_seed(6)
    parts = (nn.LSTM(3, 5), nn.Dense(5, 4))
    x = gpublas.to_device(rng.standard_normal((4, 3, 3)).astype(np.float32))
    y = gpublas.to_device(rng.integers(0, 4, 12).astype(np.int32))
    return _lstm_step, parts, nn.SGD(parts[0].parameters() + parts[1].parameters(), lr=2.0, momentum=0.9), x, y


@pytest.mark.parametrize("build", [_cnn, _lstm], ids=["cnn-dropout-adam", "lstm-clip-cosine"])
def test_a_whole_step_reads_nothing_back_and_allocates_nothing_new(rng, build):
    step, model, opt, x, y = build(rng)
    crit = nn.SoftmaxCrossEntropy()
    sched = nn.CosineLR(opt, T_max=10)
    losses = gpublas.empty((4,), np.float32)
    for _ in range(2):                               # compiles, and fills the pool for two steps' caches
        step(model, crit, opt, x, y)
        sched.step()
    before = gpublas.memory_stats()["device_allocations"]
    with gpublas.profile() as prof:
        for i in range(4):
            losses[i:i + 1].copy_from(step(model, crit, opt, x, y))
            sched.step()                             # host to device, between steps: not counted below
    assert _transfers(prof) == {"[memcpy HtoD]": 4}
    assert gpublas.memory_stats()["device_allocations"] == before
    values = losses.get()
    assert np.isfinite(values).all() and values[-1] < values[0]
