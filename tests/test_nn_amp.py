"""nn.amp.GradScaler against PyTorch's rules: scale, unscale (exact for a power-of-two scale), an
inf or NaN gradient skips the step and halves the scale, growth after growth_interval clean steps,
state_dict, disabled pass-through; and a scaled float32 training run equal to an unscaled one."""
import numpy as np
import pytest

import gpublas
import nn
from nn.amp import GradScaler


def _model(seed=0):
    nn.manual_seed(seed)
    return nn.Sequential(nn.Dense(6, 5), nn.ReLU(), nn.Dense(5, 3))


def _batch(rng):
    return gpublas.to_device(rng.standard_normal((7, 6)).astype(np.float32)), \
        gpublas.to_device(rng.integers(0, 3, 7).astype(np.int32))


def _train(scaler, steps=4, seed=0):
    rng = np.random.default_rng(seed)
    model, crit = _model(), nn.SoftmaxCrossEntropy()
    opt = nn.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        x, y = _batch(rng)
        crit(model(x), y)
        opt.zero_grad()
        model.backward(scaler.scale(crit.backward()))
        scaler.step(opt)
        scaler.update()
    return [p.data.get() for p in model.parameters()]


def test_scaled_training_equals_unscaled_training():
    # grads * 2^16 / 2^16 is exact in float32 (no overflow, no underflow here): the same weights
    for a, b in zip(_train(GradScaler()), _train(GradScaler(enabled=False))):
        np.testing.assert_array_equal(a, b)


def test_scale_and_unscale():
    s = GradScaler(init_scale=1024.0)
    g = gpublas.to_device(np.array([1.5, -2.0, 3.0], np.float32))
    np.testing.assert_array_equal(s.scale(g).get(), [1536.0, -2048.0, 3072.0])
    model = _model()
    opt = nn.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(1)
    grads = []
    for p in model.parameters():
        v = rng.standard_normal(p.grad.shape).astype(np.float32)
        p.grad[...] = v * 1024
        grads.append(v)
    s.unscale_(opt)
    for p, v in zip(model.parameters(), grads):
        np.testing.assert_array_equal(p.grad.get(), v)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_an_inf_or_nan_gradient_skips_the_step_and_halves_the_scale(bad):
    model = _model()
    opt = nn.SGD(model.parameters(), lr=0.1)
    before = [p.data.get() for p in model.parameters()]
    s = GradScaler(init_scale=256.0)
    for p in model.parameters():
        p.grad.fill(1.0)
    model.parameters()[2].grad[1, 3] = bad  # one element of one buffer
    assert s.step(opt) is None
    s.update()
    assert s.get_scale() == 128.0
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.data.get(), b)
    for p in model.parameters():  # a clean step then runs
        p.grad.fill(128.0)
    s.step(opt)
    s.update()
    after = [p.data.get() for p in model.parameters()]
    for p, b, a in zip(model.parameters(), before, after):
        np.testing.assert_allclose(a, b - np.float32(0.1), rtol=1e-6)


def test_growth_after_growth_interval_clean_steps():
    model = _model()
    opt = nn.SGD(model.parameters(), lr=0.0)
    s = GradScaler(init_scale=8.0, growth_interval=3)
    scales = []
    for step in range(8):
        for p in model.parameters():
            p.grad.fill(np.inf if step == 4 else 1.0)
        s.step(opt)
        s.update()
        scales.append(s.get_scale())
    # clean x3 -> 16; the 4th clean step counts 1; step 4 overflows -> 8 and restarts the count
    assert scales == [8.0, 8.0, 16.0, 16.0, 8.0, 8.0, 8.0, 16.0]
    state = s.state_dict()
    assert state == {"scale": 16.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                     "_growth_tracker": 0}
    t = GradScaler()
    t.load_state_dict(state)
    assert t.get_scale() == 16.0 and t.state_dict() == state
    torch = pytest.importorskip("torch")
    assert set(torch.amp.GradScaler("cpu").state_dict()) == set(state)  # PyTorch's keys


def test_disabled_scaler_passes_through():
    s = GradScaler(enabled=False)
    g = gpublas.zeros(3)
    assert s.scale(g) is g and s.get_scale() == 1.0 and s.state_dict() == {}


@pytest.mark.parametrize("dtype", [np.float16, gpublas.bfloat16], ids=["fp16", "bf16"])
def test_dense_under_autocast_computes_in_16_bits_with_fp32_gradients(dtype, rng):
    nn.manual_seed(3)
    layer = nn.Dense(24, 7, activation="tanh")
    x_h = rng.standard_normal((5, 24)).astype(np.float32)
    dy_h = rng.standard_normal((5, 7)).astype(np.float32)
    with nn.autocast(dtype):
        y = layer(gpublas.to_device(x_h))
    assert y.dtype == np.dtype(dtype) and layer.weight.data.dtype == np.float32
    dx = layer.backward(gpublas.to_device(dy_h))  # an FP32 dy (from a loss) is cast to the layer's 16 bits
    assert dx.dtype == np.dtype(dtype) and layer.weight.grad.dtype == np.float32
    # reference: float64 maths on the 16-bit-rounded x, W, b and dy
    r = lambda v: np.asarray(v).astype(dtype).astype(np.float64)  # noqa: E731
    w, b = r(layer.weight.data.get()), r(layer.bias.data.get())
    y_ref = np.tanh(r(r(x_h) @ w.T) + b)  # the GEMM's result rounded to 16 bits, then bias + tanh
    eps = float(ml_dtypes_finfo(dtype).eps)
    np.testing.assert_allclose(y.get().astype(np.float64), y_ref, rtol=4 * eps, atol=4 * eps)
    dz = r(r(dy_h) * (1 - y.get().astype(np.float64) ** 2))
    np.testing.assert_allclose(layer.weight.grad.get(), dz.T @ r(x_h), rtol=1e-5, atol=1e-5)  # FP32 accumulation
    np.testing.assert_allclose(layer.bias.grad.get(), dz.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx.get().astype(np.float64), dz @ w, rtol=4 * eps, atol=4 * eps)
    y32 = layer(gpublas.to_device(x_h))  # outside the block: float32 again
    assert y32.dtype == np.float32


def ml_dtypes_finfo(dtype):
    import ml_dtypes
    return ml_dtypes.finfo(dtype)


def _mixed_run(low):
    rng = np.random.default_rng(0)
    nn.manual_seed(0)
    model = nn.Sequential(nn.Dense(8, 16), nn.ReLU(), nn.Dense(16, 3))
    crit, opt = nn.SoftmaxCrossEntropy(), nn.SGD(model.parameters(), lr=0.2)
    scaler = GradScaler(init_scale=1024.0, enabled=low == np.float16)
    x_h = rng.standard_normal((60, 8)).astype(np.float32)
    y_h = (x_h[:, 0] > 0).astype(np.int32) + (x_h[:, 1] > 0.5).astype(np.int32)
    x, y = gpublas.to_device(x_h), gpublas.to_device(y_h)
    losses = []
    for _ in range(30):
        with nn.autocast(low or np.float16, enabled=low is not None):
            losses.append(crit(model(x), y))
        opt.zero_grad()
        model.backward(scaler.scale(crit.backward()))
        scaler.step(opt)
        scaler.update()
    assert all(p.data.dtype == np.float32 for p in model.parameters())
    return losses


def test_mixed_precision_training_follows_fp32():
    fp32 = _mixed_run(None)
    for low in (np.float16, gpublas.bfloat16):  # fp16 with loss scaling, bf16 without
        losses = _mixed_run(low)
        assert losses[-1] < 0.7 * losses[0]
        np.testing.assert_allclose(losses, fp32, atol=0.03)  # the FP32 run's loss curve, to 16-bit precision
