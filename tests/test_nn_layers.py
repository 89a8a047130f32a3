"""nn layers: forward against NumPy references, state_dict names and shapes, errors on bad input."""
import numpy as np
import pytest

import gpublas
import nn
from nn import kernels as K
from nn.reference import layers as ref
from reference import assert_close

DTYPES = [np.float32, np.float64]


@pytest.fixture(autouse=True)
def _seed():
    nn.manual_seed(0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_dense_forward(rng, dtype, bias):
    layer = nn.Dense(7, 5, bias=bias, dtype=dtype)
    x = rng.standard_normal((3, 7)).astype(dtype)
    w = layer.weight.data.get()
    want = x.astype(np.float64) @ w.T + (layer.bias.data.get() if bias else 0)
    assert_close(layer(x), want, dtype, k=7)


@pytest.mark.parametrize("act, fn", [("relu", lambda v: np.maximum(v, 0)), ("tanh", np.tanh),
                                     ("sigmoid", ref.sigmoid)])
def test_dense_fused_activation(rng, act, fn):
    layer = nn.Dense(4, 6, activation=act, dtype=np.float64)
    x = rng.standard_normal((5, 4))
    want = fn(x @ layer.weight.data.get().T + layer.bias.data.get())
    assert_close(layer(x), want, np.float64, k=4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cfg", [
    dict(cin=1, cout=2, k=3, stride=1, padding=0, dilation=1, hw=(5, 5)),
    dict(cin=3, cout=4, k=3, stride=1, padding=1, dilation=1, hw=(7, 6)),
    dict(cin=2, cout=5, k=(2, 3), stride=(2, 1), padding=(1, 2), dilation=1, hw=(7, 5)),
    dict(cin=2, cout=3, k=3, stride=2, padding=2, dilation=(2, 1), hw=(9, 8)),
])
def test_conv2d_forward_matches_direct_loop(rng, dtype, cfg):
    layer = nn.Conv2d(cfg["cin"], cfg["cout"], cfg["k"], stride=cfg["stride"], padding=cfg["padding"],
                      dilation=cfg["dilation"], dtype=dtype)
    x = rng.standard_normal((2, cfg["cin"]) + cfg["hw"]).astype(dtype)
    want = ref.conv2d(x.astype(np.float64), layer.weight.data.get().astype(np.float64), layer.bias.data.get(),
                      layer.stride, layer.padding, layer.dilation)
    y = layer(x)
    assert y.shape == want.shape
    assert_close(y, want, dtype, k=layer.weight.data.size)


@pytest.mark.parametrize("cls, mode", [(nn.MaxPool2d, "max"), (nn.AvgPool2d, "avg")])
@pytest.mark.parametrize("k, s, p, hw", [(2, None, 0, (6, 6)), (3, 2, 1, (7, 5)), ((2, 3), (1, 2), (1, 1), (5, 7))])
def test_pool_forward(rng, cls, mode, k, s, p, hw):
    layer = cls(k, stride=s, padding=p)
    x = rng.standard_normal((2, 3) + hw)
    want = ref.pool2d(x, layer.kernel_size, layer.stride, layer.padding, mode)
    assert_close(layer(x), want, np.float64, k=9)


def _pool_backward_loops(x, dy, k, s, pad, mode):
    """dx of pool2d by loops over the windows: max routes dy to the window's first maximum (padding is
    -inf, never the argmax), avg spreads dy / (kh*kw) over the window's input elements."""
    (kh, kw), (sh, sw), (ph, pw) = k, s, pad
    dx = np.zeros_like(x)
    for n, c, i, j in np.ndindex(dy.shape):
        rows = [(h, w) for h in range(i * sh - ph, i * sh - ph + kh) for w in range(j * sw - pw, j * sw - pw + kw)
                if 0 <= h < x.shape[2] and 0 <= w < x.shape[3]]
        if mode == "max":
            h, w = max(rows, key=lambda hw: (x[n, c][hw], -rows.index(hw)))
            dx[n, c, h, w] += dy[n, c, i, j]
        else:
            for h, w in rows:
                dx[n, c, h, w] += dy[n, c, i, j] / (kh * kw)
    return dx


@pytest.mark.parametrize("cls, mode", [(nn.MaxPool2d, "max"), (nn.AvgPool2d, "avg")])
@pytest.mark.parametrize("k, s, p, hw", [(2, None, 0, (7, 5)),            # windows tile; a row and a column past them
                                         (2, 3, 0, (8, 7)),               # gaps between the windows
                                         ((2, 1), (2, 3), (1, 0), (5, 8)),  # padding, cells wider than windows
                                         (3, 3, 1, (1, 4)),               # one row, padded on both sides
                                         (3, 2, 1, (7, 5))],              # overlapping: the gather
                         ids=["tile", "gaps", "pad", "one-row", "overlap"])
def test_pool_backward_writes_every_input_element(rng, cls, mode, k, s, p, hw):
    # non-overlapping windows write dx by stride cells, overlapping ones gather: both must write every
    # element of dx (the simulator's fresh memory is NaN), the window's share or 0
    layer = cls(k, stride=s, padding=p)
    x = rng.standard_normal((2, 3) + hw)
    y = layer(x)
    dy = rng.standard_normal(y.shape)
    want = _pool_backward_loops(x, dy, layer.kernel_size, layer.stride, layer.padding, mode)
    assert_close(layer.backward(dy), want, np.float64)


def test_maxpool_backward_routes_to_argmax():
    x = np.array([[[[1., 5., 2., 0.], [3., 4., 8., 7.]]]])   # (1, 1, 2, 4), windows 2x2
    layer = nn.MaxPool2d(2)
    assert_close(layer(x), [[[[5., 8.]]]], np.float64)
    dx = layer.backward(np.array([[[[10., 20.]]]])).get()
    assert_close(dx, [[[[0., 10., 0., 0.], [0., 0., 20., 0.]]]], np.float64)


@pytest.mark.parametrize("layer, fn", [(nn.ReLU, lambda v: np.maximum(v, 0)), (nn.Tanh, np.tanh),
                                       (nn.Sigmoid, ref.sigmoid)])
def test_activation_forward(rng, layer, fn):
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    assert_close(layer()(x), fn(x.astype(np.float64)), np.float32)


def test_flatten_roundtrip(rng):
    x = rng.standard_normal((2, 3, 4, 5))
    f = nn.Flatten()
    y = f(x)
    assert y.shape == (2, 60)
    assert_close(f.backward(y), x, np.float64)


def test_state_dict_names_and_shapes():
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dense(36, 10))
    sd = model.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "4.weight", "4.bias"]
    assert [v.shape for v in sd.values()] == [(4, 1, 3, 3), (4,), (10, 36), (10,)]
    lstm = nn.LSTM(3, 5, num_layers=2)
    assert {k: v.shape for k, v in lstm.state_dict().items()} == {
        "weight_ih_l0": (20, 3), "weight_hh_l0": (20, 5), "bias_ih_l0": (20,), "bias_hh_l0": (20,),
        "weight_ih_l1": (20, 5), "weight_hh_l1": (20, 5), "bias_ih_l1": (20,), "bias_hh_l1": (20,)}


def test_load_state_dict_roundtrip_and_init_bounds():
    a = nn.Sequential(nn.Dense(50, 8), nn.Tanh(), nn.Dense(8, 2))
    w = a.state_dict()["0.weight"]
    assert np.abs(w).max() <= 1 / np.sqrt(50) and np.abs(w).max() > 0.5 / np.sqrt(50)
    b = nn.Sequential(nn.Dense(50, 8), nn.Tanh(), nn.Dense(8, 2))
    b.load_state_dict(a.state_dict())
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and np.array_equal(va, vb)


def test_manual_seed_repeats_init():
    nn.manual_seed(5)
    w1 = nn.Dense(4, 3).weight.data.get()
    nn.manual_seed(5)
    w2 = nn.Dense(4, 3).weight.data.get()
    assert np.array_equal(w1, w2)


def test_load_state_dict_errors():
    model = nn.Sequential(nn.Dense(4, 3))
    good = model.state_dict()
    with pytest.raises(KeyError, match=r"missing \['0.bias'\]"):
        model.load_state_dict({"0.weight": good["0.weight"]})
    with pytest.raises(KeyError, match=r"unexpected \['1.weight'\]"):
        model.load_state_dict({**good, "1.weight": good["0.weight"]})
    with pytest.raises(ValueError, match=r"'0.weight' expects shape \(3, 4\), got \(4, 3\)"):
        model.load_state_dict({**good, "0.weight": good["0.weight"].T})


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match=r"Dense\(in_features=4.*expected input \(..., 4\), got \(2, 5\)"):
        nn.Dense(4, 3)(np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"Conv2d\(3, .*expected input \(N, 3, H, W\) or unbatched \(3, H, W\), "
                                         r"got \(1, 2, 5, 5\)"):
        nn.Conv2d(3, 2, 3)(np.zeros((1, 2, 5, 5)))
    with pytest.raises(ValueError, match=r"expected input \(N, 3, H, W\) or unbatched \(3, H, W\), got \(5, 5\)"):
        nn.Conv2d(3, 2, 3)(np.zeros((5, 5)))   # (C, H, W) is PyTorch's unbatched input (test_nn_newcomer.py)
    with pytest.raises(ValueError, match=r"MaxPool2d.*expected input \(N, C, H, W\)"):
        nn.MaxPool2d(2)(np.zeros((4, 4)))
    with pytest.raises(ValueError, match=r"labels must be in \[0, 3\); label\[1\] = 3"):
        nn.SoftmaxCrossEntropy()(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match=r"labels must be in \[0, 3\); label\[0\] = -1"):
        nn.SoftmaxCrossEntropy()(np.zeros((2, 3)), np.array([-1, 0]))
    with pytest.raises(ValueError, match=r"expected labels \(2,\)"):
        nn.SoftmaxCrossEntropy()(np.zeros((2, 3)), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"target shape"):
        nn.MSELoss()(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(TypeError, match=r"input dtype float64 does not match the layer's float32"):
        nn.Dense(2, 2)(gpublas.zeros((1, 2), np.float64))


@pytest.mark.parametrize("layer", [nn.Dense(3, 2), nn.Conv2d(1, 1, 2), nn.MaxPool2d(2), nn.AvgPool2d(2),
                                   nn.ReLU(), nn.Flatten(), nn.Dropout(0.5), nn.LSTM(2, 3),
                                   nn.SoftmaxCrossEntropy(), nn.MSELoss()], ids=lambda m: type(m).__name__)
def test_backward_before_forward_raises(layer):
    with pytest.raises(RuntimeError, match="backward\\(\\) called before forward\\(\\)"):
        layer.backward() if getattr(layer, "is_loss", False) else layer.backward(np.zeros((1, 2)))


def test_backward_checks_dy_shape(rng):
    layer = nn.Dense(3, 2)
    layer(rng.standard_normal((4, 3)))
    with pytest.raises(ValueError, match=r"backward expects dy of shape \(4, 2\)"):
        layer.backward(np.zeros((4, 3)))


@pytest.mark.parametrize("outer,channels,inner", [(5, 3, 1), (32, 16, 16), (3, 4, 64), (2, 3, 5000), (1, 1, 1)])
def test_bias_grad_sum_every_pass_order(rng, outer, channels, inner):
    # inner 1: one column pass; short rows: over outer first, then the channels' rows; long: rows first
    dy = rng.standard_normal((outer, channels, inner)).astype(np.float32)
    db = gpublas.to_device(np.full(channels, 0.5, np.float32))
    K.bias_grad_sum(gpublas.to_device(dy), db, channels, inner)  # adds into db
    np.testing.assert_allclose(db.get(), 0.5 + dy.astype(np.float64).sum(axis=(0, 2)), rtol=1e-5, atol=1e-4)
    # accumulate=False writes the sum alone (the old values are not read), and adding it is the same bits
    s = gpublas.to_device(np.full(channels, np.nan, np.float32))
    K.bias_grad_sum(gpublas.to_device(dy), s, channels, inner, accumulate=False)
    np.testing.assert_array_equal(0.5 + s.get(), db.get())
