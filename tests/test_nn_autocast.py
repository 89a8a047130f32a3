"""Dense, Conv2d and LSTM under nn.autocast: 16-bit GEMMs from FP32 master weights, FP32 weight and bias
gradients; against float64 maths on the 16-bit-rounded operands, the float32 layer, and
torch.autocast("cpu", torch.bfloat16) where PyTorch casts at the same points. Dense's and Conv2d's
16-bit outputs (and Conv2d's input gradient) are the float64 result rounded once: bit for bit where the
FP32 sums are exact, else within half an ulp plus the FP32 sums' error."""
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


def ulp(v, dtype):
    """The spacing of `dtype`'s values at |v| (subnormal spacing below the smallest normal)."""
    fi = ml_dtypes.finfo(dtype)
    e = np.floor(np.log2(np.maximum(np.abs(v), float(fi.smallest_normal))))
    return 2.0 ** (e - fi.nmant)


def within_half_ulp(got, want, dtype, slack):
    """got (16-bit) is want (float64) rounded once to dtype: |got - want| <= half an ulp of dtype at want,
    plus `slack` (the FP32 accumulation's error bound). A value rounded twice is off by up to half an ulp
    more (of the first rounding's, larger, ulp where a bias cancels the product)."""
    err = np.abs(np.asarray(got, np.float64) - want)
    bound = 0.5 * ulp(want, dtype) + slack
    assert np.all(err <= bound), (np.max(err / bound), np.argmax(err / bound))


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
    # reference: float64 maths on the 16-bit x, W, b, relu(x * W + b) rounded once
    x, w, b = (t64(r(v, dtype)) for v in (x_h, conv.weight.data.get(), conv.bias.data.get()))
    z = F.conv2d(x, w, b, stride=stride, padding=padding)
    slack = 2.0 ** -22 * F.conv2d(x.abs(), w.abs(), b.abs(), stride=stride, padding=padding).numpy()
    within_half_ulp(y.get(), torch.relu(z).numpy(), dtype, slack)
    dz = t64(r(dy_h, dtype) * (y.get().astype(np.float64) > 0))
    dW = torch.nn.grad.conv2d_weight(x, w.shape, dz, stride=stride, padding=padding)
    np.testing.assert_allclose(conv.weight.grad.get(), dW.numpy(), rtol=1e-5, atol=1e-5)  # FP32 accumulation
    np.testing.assert_allclose(conv.bias.grad.get(), dz.sum((0, 2, 3)).numpy(), rtol=1e-5, atol=1e-5)
    dx_ref = torch.nn.grad.conv2d_input(x.shape, w, dz, stride=stride, padding=padding)
    # dcols = W^T dY in FP32, summed over the taps in FP32 and rounded once, as PyTorch's conv backward does
    dx_slack = 2.0 ** -22 * torch.nn.grad.conv2d_input(x.shape, w.abs(), dz.abs(), stride=stride, padding=padding)
    within_half_ulp(dx.get(), dx_ref.numpy(), dtype, dx_slack.numpy())
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


def _grid_layer(kind, dtype, rng, pure):
    """(layer, x, the layer's input, x W^T or conv(x, W) in torch, the bias's broadcast shape, the
    activation) on a grid where FP32 sums are exact: x in quarters and W in 64ths (integers below 64),
    the bias in 16ths: all 16-bit-representable. The GEMM's exact sums have up to 17 significant bits,
    more than bf16's 8 and fp16's 11, so rounding them to 16 bits before the bias add (the old nn)
    changes some results, while sum + b is exact in FP32 and rounded once."""
    if kind == "dense":
        layer, xs = nn.Dense(27, 6, activation="relu"), (16, 27)
        prod, bshape, act = F.linear, (1, -1), torch.relu
    else:
        layer, xs = nn.Conv2d(3, 5, 3, padding=1), (2, 3, 5, 6)
        prod, bshape, act = (lambda x, w: F.conv2d(x, w, padding=1)), (1, -1, 1, 1), (lambda z: z)
    layer.weight.data[...] = rng.integers(-63, 64, layer.weight.shape).astype(np.float32) / 64
    layer.bias.data[...] = rng.integers(-255, 256, layer.bias.shape).astype(np.float32) / 16
    x = rng.integers(-63, 64, xs).astype(np.float32) / 4
    if pure:
        layer.to(dtype)
    return layer, x, gpublas.to_device(x.astype(dtype) if pure else x), prod, bshape, act


@HALVES
@pytest.mark.parametrize("pure", [False, True], ids=["autocast", "pure16"])
@pytest.mark.parametrize("kind", ["dense", "conv2d"])
def test_dense_and_conv2d_round_once_as_torch_autocast(kind, pure, dtype, rng):
    """y = round16(act(x W^T + b)) bit for bit: the float64 result rounded once, which is PyTorch's on the
    CPU here (oneDNN adds the bias in FP32; its sums are exact on this grid too); the old nn's double
    rounding, round16(act(round16(x W^T) + b)), differs from it on these inputs."""
    layer, x_h, x, prod, bshape, act = _grid_layer(kind, dtype, rng, pure)
    with nn.autocast(dtype, enabled=not pure):
        y = layer(x).get()
    assert y.dtype == np.dtype(dtype)
    w, b = (t64(p.data.get().astype(np.float64)) for p in (layer.weight, layer.bias))
    z = prod(t64(x_h), w)
    once = act(z + b.reshape(bshape)).numpy().astype(dtype)
    twice = act(t64(r(z.numpy(), dtype)) + b.reshape(bshape)).numpy().astype(dtype)
    assert np.count_nonzero(once != twice) >= 2  # the inputs tell one rounding from two (2-61 of 96-300)
    np.testing.assert_array_equal(y.view(np.uint16), once.view(np.uint16))
    if not pure:
        tl = torch.nn.Linear(27, 6) if kind == "dense" else torch.nn.Conv2d(3, 5, 3, padding=1)
        with torch.no_grad():
            tl.weight.copy_(torch.from_numpy(layer.weight.data.get()))
            tl.bias.copy_(torch.from_numpy(layer.bias.data.get()))
        with torch.autocast("cpu", torch.bfloat16 if dtype == gpublas.bfloat16 else torch.float16):
            ty = act(tl(torch.from_numpy(x_h)))
        np.testing.assert_array_equal(y.astype(np.float32), ty.float().detach().numpy())


@HALVES
def test_dense_with_tanh_under_autocast_is_rounded_once_within_half_an_ulp(dtype, rng, sim_order):
    nn.manual_seed(3)
    dense = nn.Dense(37, 13, activation="tanh")
    x_h = rng.standard_normal((11, 37)).astype(np.float32)
    with nn.autocast(dtype):
        y = dense(gpublas.to_device(x_h)).get()
    x, w, b = (r(v, dtype) for v in (x_h, dense.weight.data.get(), dense.bias.data.get()))
    slack = 2.0 ** -22 * (np.abs(x) @ np.abs(w).T + np.abs(b) + 1)  # FP32 sums and tanhf
    within_half_ulp(y, np.tanh(x @ w.T + b), dtype, slack)


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
    from nn.reference.layers import lstm_cell as cell
    return cell(*args)


@pytest.mark.torch_bf16
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
