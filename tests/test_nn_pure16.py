"""Pure 16-bit training, as PyTorch's model.to(torch.bfloat16): layers built in (or converted to)
bfloat16 / float16 keep 16-bit weights, gradients and activations. The loss computes 16-bit logits in
FP32 and its FP32 gradient is rounded to the logits' dtype at the layer boundary; GEMMs and bias
gradient sums accumulate in FP32 and round once; BatchNorm and the LSTM's cell state stay FP32; SGD
and Adam update 16-bit parameters in FP32 arithmetic with their state in the parameter's dtype.

References: float64 maths (nn.reference's layers and optimizers, which test_nn_layers, test_nn_lstm
and test_nn_optim check against finite differences and PyTorch) on the 16-bit-rounded operands, and
the FP32 layer under nn.autocast, which casts at the same points."""
import ml_dtypes
import numpy as np
import pytest

import gpublas
import nn
from nn.reference import layers as ref

HALVES = pytest.mark.parametrize("dtype", [gpublas.bfloat16, np.float16], ids=["bf16", "fp16"])


def eps(dtype):
    return float(ml_dtypes.finfo(dtype).eps)


def f64(a):
    return np.asarray(a.get() if hasattr(a, "get") else a).astype(np.float64)


def close(got, want, tol):
    """|got - want| <= tol * (1 + max |want|): a bound relative to the data's scale."""
    got = f64(got)
    assert got.shape == want.shape
    err = np.max(np.abs(got - want)) if got.size else 0.0
    assert err <= tol * (1 + np.max(np.abs(want))), err


def within_ulp(got, want, dtype):
    """Every element within one unit in the last place of `dtype` of the float64 `want`."""
    got = f64(got)
    assert np.all(np.abs(got - want) <= eps(dtype) * np.abs(want) + 1e-30), np.max(np.abs(got - want))


def xent_step(model, x, labels):
    """loss, then backward from the loss's FP32 gradient; returns (loss, dx)."""
    crit = nn.SoftmaxCrossEntropy()
    loss = crit(model(x), labels)
    return loss, model.backward(crit.backward())


@HALVES
def test_cnn_built_in_16_bits_steps_like_float64(dtype, rng):
    nn.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, dtype=dtype), nn.Tanh(), nn.Flatten(),
                          nn.Dense(4 * 5 * 5, 6, dtype=dtype))
    x_h = rng.standard_normal((7, 2, 5, 5)).astype(dtype)
    labels = rng.integers(0, 6, 7)
    state = {k: v.astype(np.float64) for k, v in model.state_dict().items()}
    opt = nn.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss, dx = xent_step(model, gpublas.to_device(x_h), labels)
    assert dx.dtype == dtype and all(p.dtype == dtype and p.grad.dtype == dtype for p in model.parameters())
    twin = [ref.NpConv2d(state["0.weight"], state["0.bias"], (1, 1), (1, 1)), ref.NpAct("tanh"), ref.NpFlatten(),
            ref.NpDense(state["3.weight"], state["3.bias"])]
    h = x_h.astype(np.float64)
    for layer in twin:
        h = layer.forward(h)
    ref_loss, d = ref.np_softmax_xent(h, labels)
    for layer in reversed(twin):
        d = layer.backward(d)
    assert abs(loss - ref_loss) <= 8 * eps(dtype) * (1 + ref_loss)
    close(dx, d, 8 * eps(dtype))
    grads = {"0.weight": twin[0].grads["weight"], "0.bias": twin[0].grads["bias"],
             "3.weight": twin[3].grads["weight"], "3.bias": twin[3].grads["bias"]}
    named = dict(model.named_parameters())
    for k, want in grads.items():
        close(named[k].grad, want, 8 * eps(dtype))
    opt.step()  # the first SGD step: p - lr g (the momentum buffer starts at g)
    for k, want in grads.items():
        close(named[k].data, state[k] - 0.1 * want, 2 * eps(dtype))


@HALVES
def test_lstm_built_in_16_bits_keeps_fp32_cells_and_steps_like_float64(dtype, rng):
    T, N, I, H = 4, 3, 3, 5
    nn.manual_seed(4)
    lstm, head = nn.LSTM(I, H, dtype=dtype), nn.Dense(H, 4, dtype=dtype)
    x_h = rng.standard_normal((T, N, I)).astype(dtype)
    labels = rng.integers(0, 4, N)
    out, (h_n, c_n) = lstm(gpublas.to_device(x_h))
    assert out.dtype == h_n.dtype == c_n.dtype == dtype
    assert lstm._work[0].cbuf.dtype == np.float32  # the cell state: FP32 (rounded once into c_n)
    crit = nn.SoftmaxCrossEntropy()
    loss = crit(head(h_n[0]), labels)
    dh = head.backward(crit.backward())
    dx = lstm.backward(gpublas.zeros(out.shape, dtype), d_hn=dh.reshape(1, N, H))
    assert dx.dtype == lstm.dh0.dtype == dtype
    w = {f"lstm.{k}": v.astype(np.float64) for k, v in lstm.state_dict().items()}
    twin = ref.NpLSTM(w)
    dense = ref.NpDense(*(v.astype(np.float64) for v in head.state_dict().values()))
    h_ref = twin.forward(x_h.astype(np.float64))
    _, c_ref = ref.lstm(x_h.astype(np.float64), [tuple(w[k] for k in ref.NpLSTM.KEYS)],
                        np.zeros((1, N, H)), np.zeros((1, N, H)))[1:]
    close(h_n[0], h_ref, 8 * eps(dtype))
    close(c_n, c_ref, 8 * eps(dtype))
    ref_loss, d = ref.np_softmax_xent(dense.forward(h_ref), labels)
    assert abs(loss - ref_loss) <= 8 * eps(dtype) * (1 + ref_loss)
    close(dx, twin.backward(dense.backward(d)), 16 * eps(dtype))
    for k, want in twin.grads.items():
        close(getattr(lstm, k.split(".")[1]).grad, want, 16 * eps(dtype))


@pytest.mark.parametrize("layer", ["dense", "conv"])
def test_bf16_layer_is_the_fp32_layer_under_autocast(layer, rng):
    """A bfloat16 layer casts where autocast casts an FP32 layer holding the same (bf16) weights: the same
    output and input gradient, bit for bit, and its gradients are the FP32 ones rounded once."""
    bf = gpublas.bfloat16
    nn.manual_seed(6)
    make = (lambda d: nn.Dense(9, 5, activation="relu", dtype=d)) if layer == "dense" else \
        (lambda d: nn.Conv2d(3, 4, 3, padding=1, activation="tanh", dtype=d))
    low, full = make(bf), make(np.float32)
    full.load_state_dict(low.state_dict())
    x = gpublas.to_device(rng.standard_normal((6, 9) if layer == "dense" else (2, 3, 5, 4)).astype(bf))
    y = low(x)
    with nn.autocast(bf):
        y32 = full(x)
    assert y.dtype == y32.dtype == bf
    np.testing.assert_array_equal(y.get().view(np.uint16), y32.get().view(np.uint16))
    dy = gpublas.to_device(rng.standard_normal(y.shape).astype(np.float32))  # a loss's FP32 gradient
    dx, dx32 = low.backward(dy), full.backward(dy)
    np.testing.assert_array_equal(dx.get().view(np.uint16), dx32.get().view(np.uint16))
    np.testing.assert_array_equal(low.bias.grad.get().view(np.uint16), full.bias.grad.get().astype(bf).view(np.uint16))
    within_ulp(low.weight.grad, f64(full.weight.grad), bf)


def sgd16(p, grads, dtype, lr, momentum=0.0, nesterov=False, weight_decay=0.0):
    """PyTorch's SGD in float64 with the parameter and momentum buffer rounded to `dtype` when stored."""
    rnd = lambda v: np.asarray(v).astype(dtype).astype(np.float64)  # noqa: E731
    p, buf = p.astype(np.float64), None
    for g in grads:
        g = g.astype(np.float64) + weight_decay * p
        if momentum:
            buf = rnd(g if buf is None else momentum * buf + g)
            g = g + momentum * buf if nesterov else buf
        p = rnd(p - lr * g)
    return p


def adam16(p, grads, dtype, lr, betas=(0.9, 0.999), eps_=1e-8, weight_decay=0.0, decoupled=False):
    """PyTorch's Adam / AdamW in float64 with the parameter and both moments rounded to `dtype` when stored."""
    rnd = lambda v: np.asarray(v).astype(dtype).astype(np.float64)  # noqa: E731
    (b1, b2), p = betas, p.astype(np.float64)
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m, v = rnd(b1 * m + (1 - b1) * g), rnd(b2 * v + (1 - b2) * g * g)
        p = rnd(p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps_))
    return p


@HALVES
@pytest.mark.parametrize("kind, kw", [("sgd", dict(momentum=0.9)), ("sgd", dict(momentum=0.9, nesterov=True,
                                                                                   weight_decay=0.01)),
                                      ("adam", dict(weight_decay=0.01)), ("adamw", dict(weight_decay=0.1))], ids=str)
def test_optimizers_update_16bit_parameters_with_state_in_their_dtype(dtype, kind, kw, rng):
    p0 = rng.standard_normal((5, 7)).astype(dtype)
    grads = [rng.standard_normal((5, 7)).astype(dtype) for _ in range(3)]
    p = nn.Parameter(p0)
    lr = 0.05 if kind == "sgd" else 0.01
    opt = nn.SGD([p], lr=lr, **kw) if kind == "sgd" else (nn.Adam if kind == "adam" else nn.AdamW)([p], lr=lr, **kw)
    for g in grads:
        opt.zero_grad()
        p.grad.set(g)
        opt.step()
    assert p.data.dtype == dtype
    if kind == "sgd":
        assert opt.buffers[0].dtype == dtype
        want = sgd16(p0, grads, dtype, lr, **kw)
    else:
        assert opt.exp_avg[0].dtype == opt.exp_avg_sq[0].dtype == dtype
        want = adam16(p0, grads, dtype, lr, weight_decay=kw["weight_decay"], decoupled=kind == "adamw")
    within_ulp(p.data, want, dtype)
    assert np.any(f64(p.data) != p0.astype(np.float64))


def test_clip_grad_norm_of_bf16_gradients_sums_in_fp32(rng):
    bf = gpublas.bfloat16
    ps = [nn.Parameter(np.zeros(s, bf)) for s in ((4, 3), (7,))] + [nn.Parameter(np.zeros(5, np.float32))]
    gs = [(rng.standard_normal(p.shape) * 3).astype(p.dtype) for p in ps]
    for p, g in zip(ps, gs):
        p.grad.set(g)
    want = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in gs))
    total = nn.clip_grad_norm(ps, max_norm=1.0)
    assert abs(total - want) <= 1e-5 * want
    for p, g in zip(ps, gs):
        within_ulp(p.grad, g.astype(np.float64) * (1.0 / (want + 1e-6)), p.dtype)


def blobs(rng, n=48, features=8, classes=3):
    centers = rng.standard_normal((classes, features)) * 2
    y = rng.integers(0, classes, n)
    return (centers[y] + rng.standard_normal((n, features))).astype(np.float32), y


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_model_converted_to_bf16_trains(optimizer, rng):
    bf = gpublas.bfloat16
    x, y = blobs(rng)
    losses = {}
    for dtype in (np.float32, bf):
        nn.manual_seed(1)
        model = nn.Sequential(nn.Dense(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.1), nn.Dense(16, 3))
        model.to(dtype)
        if dtype == bf:  # BatchNorm keeps FP32 statistics and parameters, the rest is bf16
            assert model[0].weight.dtype == model[4].bias.dtype == bf and model[3].dtype == bf
            assert model[1].weight.dtype == model[1].running_var.dtype == np.float32
        opt = nn.SGD(model.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd" else \
            nn.Adam(model.parameters(), lr=0.02)
        crit, xd = nn.SoftmaxCrossEntropy(), gpublas.to_device(x.astype(dtype))
        curve = []
        for _ in range(25):
            opt.zero_grad()
            curve.append(crit(model(xd), y))
            model.backward(crit.backward())
            opt.step()
        losses[np.dtype(dtype)] = curve
    fp32, bf16 = losses[np.dtype(np.float32)], losses[np.dtype(bf)]
    assert abs(bf16[0] - fp32[0]) <= 0.02 * fp32[0]      # the same start, to bf16's precision
    assert bf16[-1] < 0.3 * bf16[0]                      # it trains
    assert bf16[-1] <= fp32[-1] + 0.05                   # about as well as FP32


def test_lstm_converted_to_bf16_trains_and_to_checks_dtypes(rng):
    bf = gpublas.bfloat16
    T, N, I, H = 5, 12, 4, 8
    x = rng.standard_normal((T, N, I)).astype(np.float32)
    labels = (x[:, :, 0].sum(0) > 0).astype(np.int32)   # the sign of the sum of one input channel
    nn.manual_seed(2)
    lstm, head = nn.LSTM(I, H).bfloat16(), nn.Dense(H, 2).bfloat16()
    assert lstm.weight_hh_l0.dtype == head.weight.dtype == bf
    opt = nn.Adam(lstm.parameters() + head.parameters(), lr=0.03)
    crit, xd = nn.SoftmaxCrossEntropy(), gpublas.to_device(x.astype(bf))
    curve = []
    for _ in range(30):
        opt.zero_grad()
        out, (h_n, _) = lstm(xd)
        curve.append(crit(head(h_n[0]), labels))
        dh = head.backward(crit.backward())
        lstm.backward(gpublas.zeros(out.shape, bf), d_hn=dh.reshape(1, N, H))
        opt.step()
    assert curve[-1] < 0.5 * curve[0]
    assert nn.Dense(2, 2).half().weight.dtype == np.float16
    with pytest.raises(TypeError, match="int32"):
        nn.Dense(2, 2).to(np.int32)


def test_bf16_state_dict_and_checkpoint_round_trip(tmp_path):
    bf = gpublas.bfloat16
    nn.manual_seed(7)
    a = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)).to(bf)
    nn.manual_seed(8)
    b = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)).to(bf)
    nn.save(a, tmp_path / "a.npz")        # bfloat16 written as float32 (exact); loaded back rounded, exactly
    nn.load(b, tmp_path / "a.npz")
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        assert va.dtype == vb.dtype and np.array_equal(va.astype(np.float64), vb.astype(np.float64)), k
    assert b.state_dict()["0.weight"].dtype == bf and b.state_dict()["1.running_mean"].dtype == np.float32


def test_bf16_embedding_sums_its_gradient_in_fp32(rng):
    """About 120 lookups of each of 3 rows: a bf16 table's gradient is the FP32 sum rounded once (a sum
    kept in bf16 rounds at every add)."""
    bf = gpublas.bfloat16
    nn.manual_seed(1)
    e16, e32 = nn.Embedding(5, 6, dtype=bf), nn.Embedding(5, 6)
    idx = rng.integers(0, 3, (40, 9))
    e16(idx), e32(idx)
    dy = rng.standard_normal((40, 9, 6)).astype(bf)
    e16.backward(gpublas.to_device(dy))
    e32.backward(gpublas.to_device(dy.astype(np.float32)))
    np.testing.assert_array_equal(e16.weight.grad.get().view(np.uint16), e32.weight.grad.get().astype(bf).view(np.uint16))


def test_bf16_gradient_is_the_slope_of_the_bf16_models_loss(rng):
    """Central finite differences of the loss the bf16 model computes, at the weights with the largest
    gradients, with steps of about 2^-3 (the bf16 weights w + s and w - s as rounded, the slope taken
    over their actual distance): the analytic bf16 gradient is the slope to within the step's
    curvature and the forward's 16-bit noise (10 %)."""
    bf = gpublas.bfloat16
    nn.manual_seed(11)
    model = nn.Sequential(nn.Dense(5, 7, dtype=bf), nn.Tanh(), nn.Dense(7, 3, dtype=bf))
    x = gpublas.to_device(rng.standard_normal((9, 5)).astype(bf))
    labels = rng.integers(0, 3, 9)
    crit = nn.SoftmaxCrossEntropy()
    crit(model(x), labels)
    model.backward(crit.backward())
    h = 2.0 ** -3
    for p in model.parameters():
        grad, w0 = f64(p.grad).ravel(), p.data.get()
        for i in np.argsort(-np.abs(grad))[:3]:
            losses, at = [], []
            for s in (h, -h):
                w = w0.copy().ravel()
                w[i] = bf(float(w[i]) + s)
                at.append(float(w[i]))
                p.data.set(w.reshape(w0.shape))
                losses.append(crit(model(x), labels))
            p.data.set(w0)
            slope = (losses[0] - losses[1]) / (at[0] - at[1])
            assert abs(slope - grad[i]) <= 0.1 * abs(grad[i]) + 2e-3, (p, i, slope, grad[i])


def test_grad_scaler_refuses_float16_gradients_as_pytorch():
    model = nn.Dense(3, 2).half()
    opt, scaler = nn.SGD(model.parameters(), lr=0.1), nn.amp.GradScaler()
    with pytest.raises(ValueError, match="float16 gradients"):
        scaler.step(opt)
    bf = nn.Dense(3, 2).bfloat16()   # bfloat16 gradients are taken (PyTorch's rule), though they need no scaling
    opt, w0 = nn.SGD(bf.parameters(), lr=0.1), bf.weight.data.get()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 16                         # zero gradients: finite, no backoff
    np.testing.assert_array_equal(bf.weight.data.get(), w0)         # and a step that changes nothing
