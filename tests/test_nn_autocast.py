"""Conv2d and LSTM under nn.autocast: 16-bit GEMMs from FP32 master weights, FP32 weight and bias
gradients; against float64 maths on the 16-bit-rounded operands, the float32 layer, and
torch.autocast("cpu", torch.bfloat16) where PyTorch casts at the same points."""
import ml_dtypes
import numpy as np
import pytest

import gpublas
import nn

torch = pytest.importorskip("torch")
F = torch.nn.functional

HALVES = pytest.mark.parametrize("dtype", [np.float16, gpublas.bfloat16], ids=["fp16", "bf16"])


def r(v, dtype):
    """v rounded to `dtype`, as float64."""
    return np.asarray(v).astype(dtype).astype(np.float64)


def t64(v):
    return torch.from_numpy(np.asarray(v, np.float64))


def close(got, want, tol):
    """|got - want| <= tol * (1 + max |want|): a bound relative to the data's scale."""
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= tol * (1 + np.max(np.abs(want))), np.max(np.abs(got - want))


@HALVES
@pytest.mark.parametrize("shape,stride,padding", [((3, 2, 7, 5), 1, 1), ((1, 3, 6, 6), 2, 0)])
def test_conv2d_under_autocast_computes_in_16_bits_with_fp32_gradients(dtype, shape, stride, padding, rng,
                                                                     sim_order):
    nn.manual_seed(5)
    conv = nn.Conv2d(shape[1], 4, 3, stride=stride, padding=padding, activation="relu")
    x_h = rng.standard_normal(shape).astype(np.float32)
    with nn.autocast(dtype):
        y = conv(gpublas.to_device(x_h))
    assert y.dtype == np.dtype(dtype) and conv.weight.data.dtype == np.float32
    dy_h = rng.standard_normal(y.shape).astype(np.float32)
    dx = conv.backward(gpublas.to_device(dy_h))  # an FP32 dy (from a loss) is cast to 16 bits
    assert dx.dtype == np.dtype(dtype) and conv.weight.grad.dtype == conv.bias.grad.dtype == np.float32
    eps = float(ml_dtypes.finfo(dtype).eps)
    # reference: float64 maths on the 16-bit x, W, b; the GEMM's output rounded once, then bias + relu
    x, w, b = (t64(r(v, dtype)) for v in (x_h, conv.weight.data.get(), conv.bias.data.get()))
    z = t64(r(F.conv2d(x, w, stride=stride, padding=padding).numpy(), dtype)) + b[None, :, None, None]
    close(y.get(), torch.relu(z).numpy(), 4 * eps)
    dz = t64(r(dy_h, dtype) * (y.get().astype(np.float64) > 0))
    dW = torch.nn.grad.conv2d_weight(x, w.shape, dz, stride=stride, padding=padding)
    np.testing.assert_allclose(conv.weight.grad.get(), dW.numpy(), rtol=1e-5, atol=1e-5)  # FP32 accumulation
    np.testing.assert_allclose(conv.bias.grad.get(), dz.sum((0, 2, 3)).numpy(), rtol=1e-5, atol=1e-5)
    dx_ref = torch.nn.grad.conv2d_input(x.shape, w, dz, stride=stride, padding=padding)
    close(dx.get(), dx_ref.numpy(), 8 * eps)  # dcols rounded to 16 bits, summed in FP32, rounded again
    assert conv(gpublas.to_device(x_h)).dtype == np.float32  # outside the block: float32 again


def test_conv2d_under_autocast_matches_torch_autocast_bf16(rng):
    nn.manual_seed(6)
    conv = nn.Conv2d(3, 5, 3, padding=1)
    x_h = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    dy_h = rng.standard_normal((2, 5, 9, 8)).astype(np.float32)
    with nn.autocast(gpublas.bfloat16):
        y = conv(gpublas.to_device(x_h))
    dx = conv.backward(gpublas.to_device(dy_h))
    tc = torch.nn.Conv2d(3, 5, 3, padding=1)
    with torch.no_grad():
        tc.weight.copy_(torch.from_numpy(conv.weight.data.get()))
        tc.bias.copy_(torch.from_numpy(conv.bias.data.get()))
    tx = torch.from_numpy(x_h).requires_grad_()
    with torch.autocast("cpu", torch.bfloat16):
        ty = tc(tx)
    assert ty.dtype == torch.bfloat16  # PyTorch casts x, W, b to bf16 and returns bf16, as nn does
    ty.backward(torch.from_numpy(dy_h).to(torch.bfloat16))
    eps = float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
    close(y.get(), ty.float().detach().numpy(), 2 * eps)
    close(dx.get(), tx.grad.numpy(), 4 * eps)
    # PyTorch rounds its weight gradient to bf16 before widening it to the FP32 .grad; nn keeps FP32
    close(conv.weight.grad.get(), tc.weight.grad.numpy(), 2 * eps)
    close(conv.bias.grad.get(), tc.bias.grad.numpy(), 2 * eps)


def _lstm_pair(rng, num_layers=2, T=5, N=3, I=4, H=6):
    nn.manual_seed(7)
    lstm = nn.LSTM(I, H, num_layers)
    x_h = rng.standard_normal((T, N, I)).astype(np.float32)
    d_h = rng.standard_normal((T, N, H)).astype(np.float32)
    return lstm, x_h, d_h


def _lstm_run(lstm, x_h, d_h, dtype):
    """out, h_n, c_n, dx and the weight gradients of one forward and backward (autocast to dtype, or
    none with dtype None)."""
    lstm.zero_grad()
    with nn.autocast(dtype or np.float16, enabled=dtype is not None):
        out, (h_n, c_n) = lstm(gpublas.to_device(x_h))
    dx = lstm.backward(gpublas.to_device(d_h))
    return [out.get(), h_n.get(), c_n.get(), dx.get()] + [p.grad.get() for p in lstm.parameters()]


@HALVES
def test_lstm_under_autocast_runs_its_gemms_in_16_bits_and_its_cells_in_fp32(dtype, rng, sim_order):
    lstm, x_h, d_h = _lstm_pair(rng)
    got = _lstm_run(lstm, x_h, d_h, dtype)
    out, h_n, c_n, dx = got[:4]
    assert out.dtype == np.dtype(dtype) and h_n.dtype == c_n.dtype == dx.dtype == np.float32
    assert all(g.dtype == np.float32 for g in got[4:])
    eps = float(ml_dtypes.finfo(dtype).eps)
    # reference: float64 cells whose GEMM operands (x, each h_{t-1}, the weights) are rounded to dtype
    ws = [tuple(p.data.get().astype(np.float64) for p in lstm.parameters()[4 * k:4 * k + 4]) for k in range(2)]
    inp = x_h
    for k, (w_ih, w_hh, b_ih, b_hh) in enumerate(ws):
        h, c, ys = np.zeros((3, 6)), np.zeros((3, 6)), []
        for t in range(5):
            *_, c, _, h = lstm_cell(r(inp[t], dtype), r(h, dtype), c, r(w_ih, dtype), r(w_hh, dtype), b_ih, b_hh)
            ys.append(h)
        close(h_n[k], h, eps)    # h_n, c_n in FP32: only a 16-bit rounding of an h_t that flips differs
        close(c_n[k], c, eps)
        inp = np.stack(ys)
    close(out, inp, 2 * eps)
    # against the float32 layer: outputs and gradients within the 16-bit dtype's precision
    want = _lstm_run(lstm, x_h, d_h, None)
    assert want[0].dtype == np.float32
    for g, w in zip(got, want):
        close(g, w, eps)  # measured up to 0.11 eps (relative to 1 + the largest value)


def lstm_cell(*args):
    from nn.reference import lstm_cell as cell
    return cell(*args)


def test_lstm_under_autocast_matches_torch_autocast_bf16(rng):
    lstm, x_h, d_h = _lstm_pair(rng)
    got = _lstm_run(lstm, x_h, d_h, gpublas.bfloat16)
    tl = torch.nn.LSTM(4, 6, 2)
    with torch.no_grad():
        for (name, tp), p in zip(tl.named_parameters(), lstm.parameters()):
            tp.copy_(torch.from_numpy(p.data.get()))
    tx = torch.from_numpy(x_h).requires_grad_()
    with torch.autocast("cpu", torch.bfloat16):
        out, (h_n, c_n) = tl(tx)
    assert out.dtype == torch.bfloat16  # PyTorch's CPU LSTM runs wholly in bf16, its state too
    out.backward(torch.from_numpy(d_h).to(torch.bfloat16))
    want = [out, h_n, c_n, tx.grad] + [p.grad for _, p in tl.named_parameters()]
    eps = float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
    for g, w in zip(got, want):
        close(g, w.float().detach().numpy(), 2 * eps)  # measured up to 0.52 eps: PyTorch rounds more
