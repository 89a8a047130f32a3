"""Whole training steps in 16 bits against PyTorch on the CPU, where PyTorch casts at the same points:
the digits CNN under nn.autocast vs torch.autocast("cpu", dtype) (bf16, and fp16 with a GradScaler on
both sides; its FP32Dense head vs PyTorch's autocast(enabled=False) subregion), and a pure-bf16 MLP (nn's model.to(bfloat16) vs torch's). Layer-level parity (Conv2d, LSTM)
is in test_nn_autocast.py."""
import ml_dtypes
import numpy as np
import pytest

import gpublas
import nn
from nn.examples import digits

torch = pytest.importorskip("torch")

LR, MOMENTUM = 0.05, 0.9


def eps(dtype):
    return float(ml_dtypes.finfo(dtype).eps)


def close(got, want, tol):
    """|got - want| <= tol * (1 + max |want|): a bound relative to the data's scale."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    err = np.max(np.abs(got - want))
    assert err <= tol * (1 + np.max(np.abs(want))), err


def ulps(got, want, dtype):
    """The largest |got - want| in units of dtype's spacing at want (0: the same bits)."""
    fi = ml_dtypes.finfo(dtype)
    want = np.asarray(want, np.float64)
    e = np.floor(np.log2(np.maximum(np.abs(want), float(fi.smallest_normal))))
    return np.max(np.abs(np.asarray(got, np.float64) - want) / 2.0 ** (e - fi.nmant))


def torch_cnn(model):
    """digits.model's layers in torch.nn with the same weights."""
    t = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Identity(), torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    t.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()})
    return t


@pytest.mark.parametrize("dtype", [gpublas.bfloat16, np.float16], ids=["bf16", "fp16"])
def test_digits_cnn_steps_under_autocast_match_torch_autocast(dtype, rng):
    tdtype = torch.bfloat16 if dtype == gpublas.bfloat16 else torch.float16
    nn.manual_seed(0)
    model = digits.model(dropout=0.0)
    tmodel = torch_cnn(model)
    x = rng.uniform(0, 1, (12, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, 12)
    crit, opt = nn.SoftmaxCrossEntropy(), nn.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    scaler = nn.amp.GradScaler(enabled=dtype == np.float16)
    topt = torch.optim.SGD(tmodel.parameters(), lr=LR, momentum=MOMENTUM)
    tscaler = torch.amp.GradScaler("cpu", enabled=dtype == np.float16)
    tx, ty = torch.from_numpy(x), torch.from_numpy(labels)
    for step in range(2):
        opt.zero_grad()
        with nn.autocast(dtype):
            logits = model(gpublas.to_device(x))
        loss = crit(logits, labels)              # FP32 from the 16-bit logits
        model.backward(scaler.scale(crit.backward()))
        scaler.unscale_(opt)
        topt.zero_grad()
        with torch.autocast("cpu", tdtype):
            h = tmodel[:-1](tx)
            with torch.autocast("cpu", enabled=False):   # digits' FP32Dense head: FP32 logits
                tlogits = tmodel[-1](h.float())
            tloss = torch.nn.functional.cross_entropy(tlogits, ty)   # autocast: computed in FP32
        assert h.dtype == tdtype and logits.dtype == np.float32 and tlogits.dtype == torch.float32 == tloss.dtype
        tscaler.scale(tloss).backward()
        tscaler.unscale_(topt)
        assert abs(loss - tloss.item()) <= 2 * eps(dtype) * (1 + loss)
        close(logits.get(), tlogits.detach().numpy(), 4 * eps(dtype))
        for (name, p), tp in zip(model.named_parameters(), tmodel.parameters()):
            assert p.grad.dtype == np.float32
            close(p.grad.get(), tp.grad.numpy(), 8 * eps(dtype))   # PyTorch rounds dW to 16 bits first
        scaler.step(opt)
        scaler.update()
        tscaler.step(topt)
        tscaler.update()
        assert scaler.get_scale() == (tscaler.get_scale() if dtype == np.float16 else 1.0)
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        close(p.data.get(), tp.detach().numpy(), 4 * eps(dtype) * LR)


def test_pure_bf16_mlp_steps_like_torch_model_to_bfloat16(rng):
    bf = gpublas.bfloat16
    nn.manual_seed(9)
    model = nn.Sequential(nn.Dense(10, 24), nn.Tanh(), nn.Dense(24, 5)).to(bf)
    tmodel = torch.nn.Sequential(torch.nn.Linear(10, 24), torch.nn.Tanh(), torch.nn.Linear(24, 5))
    tmodel.load_state_dict({k: torch.from_numpy(v.astype(np.float32)) for k, v in model.state_dict().items()})
    tmodel.to(torch.bfloat16)
    x = rng.standard_normal((16, 10)).astype(bf)
    labels = rng.integers(0, 5, 16)
    crit, opt = nn.SoftmaxCrossEntropy(), nn.SGD(model.parameters(), lr=0.1)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1)
    logits = model(gpublas.to_device(x))
    loss = crit(logits, labels)
    model.backward(crit.backward())
    tx = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    tlogits = tmodel(tx)
    tloss = torch.nn.functional.cross_entropy(tlogits, torch.from_numpy(labels))
    tloss.backward()
    # both round x W^T + b to bf16 once from FP32 sums: at most a flip where the sums' orders differ
    assert ulps(logits.get(), tlogits.detach().float().numpy(), bf) <= 1   # measured 0
    assert logits.dtype == bf and tlogits.dtype == torch.bfloat16
    # PyTorch's loss of bf16 logits is bf16 (computed in FP32 inside, then rounded); nn's stays FP32
    assert abs(loss - tloss.item()) <= eps(bf) * loss
    close(logits.get(), tlogits.float().detach().numpy(), 2 * eps(bf))
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        assert p.grad.dtype == bf and tp.grad.dtype == torch.bfloat16
        close(p.grad.get(), tp.grad.float().numpy(), 4 * eps(bf))
    opt.step()
    topt.step()
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        close(p.data.get(), tp.detach().float().numpy(), 2 * eps(bf))


@pytest.mark.torch_bf16
def test_pure_bf16_conv2d_and_lstm_match_torch_in_bfloat16(rng):
    """Layers built in bf16 against PyTorch's layers .to(torch.bfloat16): outputs, input and weight
    gradients, within 4 eps (measured at most 0.35 eps; PyTorch's bf16 LSTM keeps its cell state in bf16,
    nn's is FP32). The convolution's output and input gradient are rounded once from FP32 on both sides:
    within an ulp (measured: the same bits; 8 ulps apart when nn rounded the GEMM's output first)."""
    bf = gpublas.bfloat16
    nn.manual_seed(12)
    conv, lstm = nn.Conv2d(3, 4, 3, stride=2, padding=1, dtype=bf), nn.LSTM(5, 6, dtype=bf)
    tconv, tlstm = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), torch.nn.LSTM(5, 6)
    for m, t in ((conv, tconv), (lstm, tlstm)):
        t.load_state_dict({k: torch.from_numpy(v.astype(np.float32)) for k, v in m.state_dict().items()})
        t.to(torch.bfloat16)
    for m, t, shape in ((conv, tconv, (2, 3, 7, 6)), (lstm, tlstm, (4, 3, 5))):
        x = rng.standard_normal(shape).astype(bf)
        y = m(gpublas.to_device(x))
        y = y[0] if isinstance(y, tuple) else y
        tx = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).requires_grad_()
        ty = t(tx)
        ty = ty[0] if isinstance(ty, tuple) else ty
        dy = rng.standard_normal(y.shape).astype(bf)
        dx = m.backward(gpublas.to_device(dy))
        ty.backward(torch.from_numpy(dy.astype(np.float32)).to(torch.bfloat16))
        assert y.dtype == dx.dtype == bf and ty.dtype == torch.bfloat16
        close(y.get(), ty.detach().float().numpy(), 4 * eps(bf))
        close(dx.get(), tx.grad.float().numpy(), 4 * eps(bf))
        if m is conv:
            assert ulps(y.get(), ty.detach().float().numpy(), bf) <= 1
            assert ulps(dx.get(), tx.grad.float().numpy(), bf) <= 1
        for p, tp in zip(m.parameters(), t.parameters()):
            assert p.grad.dtype == bf
            close(p.grad.get(), tp.grad.float().numpy(), 4 * eps(bf))
