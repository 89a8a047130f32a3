"""nn's kernels on 16-bit activations: each computes in float32 and rounds once on store, so a layer
on float16/bfloat16 data gives exactly its float32 result on the widened data, rounded once (forward
and backward); bias gradients from 16-bit dy are float32 sums."""
import ml_dtypes
import numpy as np
import pytest

import gpublas
import nn
from nn import kernels as K

HALVES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


def same(got, ref):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got.view(np.uint16), ref.view(np.uint16))


def both(dtype, host):
    """(16-bit device array, float32 device array of the same values)."""
    h = host.astype(dtype)
    return gpublas.to_device(h), gpublas.to_device(h.astype(np.float32))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("layer", [nn.ReLU, nn.Tanh, nn.Sigmoid, lambda: nn.MaxPool2d(3, 2, 1),
                                   lambda: nn.AvgPool2d(2), lambda: nn.MaxPool2d(2)],
                         ids=["relu", "tanh", "sigmoid", "maxpool3s2p1", "avgpool2", "maxpool2"])
def test_layers_are_the_float32_layer_rounded_once(dtype, layer, rng, sim_order):
    x16, x32 = both(dtype, rng.standard_normal((2, 3, 7, 9)) * 3)
    f16, f32 = layer(), layer()
    y16, y32 = f16(x16), f32(x32)
    assert y16.dtype == dtype
    same(y16.get(), y32.get().astype(dtype))
    dy16, _ = both(dtype, rng.standard_normal(y16.shape))
    dx16 = f16.backward(dy16)
    # the float32 layer given the same (rounded) dy and, for activations, the same rounded output
    if isinstance(f32, (nn.ReLU, nn.Tanh, nn.Sigmoid)):
        dx32 = K.act_backward(gpublas.to_device(y16.get().astype(np.float32)), dy16.astype(np.float32),
                              gpublas.empty(y16.shape), K.act_code(type(f32).__name__.lower()))
    else:
        dx32 = f32.backward(dy16.astype(np.float32))
    assert dx16.dtype == dtype
    same(dx16.get(), dx32.get().astype(dtype))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("shape, channels, inner", [((5, 4), 4, 1), ((3, 4, 6, 5), 4, 30), ((2, 3, 2, 2), 3, 4)])
def test_bias_act_and_float32_bias_gradients(dtype, shape, channels, inner, rng):
    x16, x32 = both(dtype, rng.standard_normal(shape))
    b16, b32 = both(dtype, rng.standard_normal(channels))
    act = K.act_code("tanh")
    # x is a GEMM's FP32 output (not 16-bit-representable): bias and activation added to it in float32,
    # then rounded once to 16 bits
    z = gpublas.to_device(rng.standard_normal(shape).astype(np.float32))
    y16 = K.bias_act_forward(z, b16, gpublas.empty(shape, dtype), channels, inner, act)
    y32 = K.bias_act_forward(z, b32, gpublas.empty(shape), channels, inner, act)
    same(y16.get(), y32.get().astype(dtype))
    y16 = K.bias_act_forward(z, None, gpublas.empty(shape, dtype), channels, inner, act)  # no bias: act(z)
    same(y16.get(), K.bias_act_forward(z, None, gpublas.empty(shape), channels, inner, act).get().astype(dtype))
    with pytest.raises(TypeError, match="float32 for"):  # a 16-bit input would have been rounded already
        K.bias_act_forward(x16, b16, gpublas.empty(shape, dtype), channels, inner, act)
    db16, db32 = gpublas.full(channels, 0.5), gpublas.full(channels, 0.5)
    K.bias_grad_sum(x16, db16, channels, inner)  # float32 db from 16-bit dy: summed in float32
    K.bias_grad_sum(x32, db32, channels, inner)
    np.testing.assert_array_equal(db16.get(), db32.get())
    # a 16-bit db (a pure 16-bit layer's): db + the FP32 sums, added in float32 and rounded once
    dbh = gpublas.full(channels, 0.5, dtype)
    K.bias_grad_sum(x16, dbh, channels, inner)
    same(dbh.get(), db32.get().astype(dtype))
    with pytest.raises(TypeError, match="float32"):
        K.bias_grad_sum(x16, gpublas.zeros(channels, np.float64), channels, inner)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5, 7)])
def test_batchnorm_on_16bit_data_keeps_float32_statistics(dtype, shape, rng):
    x16, x32 = both(dtype, rng.standard_normal(shape) * 2 + 1)
    make = nn.BatchNorm1d if len(shape) == 2 else nn.BatchNorm2d
    nn.manual_seed(0)
    bn16, bn32 = make(4), make(4)
    for bn in (bn16, bn32):
        bn.weight.data[...] = np.array([0.5, 1.5, -1.0, 2.0], np.float32)
        bn.bias.data[...] = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
    y16, y32 = bn16(x16), bn32(x32)
    assert y16.dtype == dtype and bn16.running_mean.dtype == np.float32
    same(y16.get(), y32.get().astype(dtype))  # float32 statistics of the same values, one rounding
    np.testing.assert_array_equal(bn16.running_var.get(), bn32.running_var.get())
    dy16, _ = both(dtype, rng.standard_normal(shape))
    dx16, dx32 = bn16.backward(dy16), bn32.backward(dy16.astype(np.float32))
    same(dx16.get(), dx32.get().astype(dtype))
    np.testing.assert_array_equal(bn16.weight.grad.get(), bn32.weight.grad.get())  # float32 gradients
    bn16.eval(), bn32.eval()
    same(bn16(x16).get(), bn32(x32).get().astype(dtype))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_dropout_on_16bit_data(dtype, rng):
    x16, x32 = both(dtype, rng.standard_normal((40, 50)))
    nn.manual_seed(5)
    d16 = nn.Dropout(0.3)
    nn.manual_seed(5)
    d32 = nn.Dropout(0.3)
    y16, y32 = d16(x16), d32(x32)  # the same seed and counter: the same mask
    same(y16.get(), y32.get().astype(dtype))
    dy16, _ = both(dtype, rng.standard_normal((40, 50)))
    same(d16.backward(dy16).get(), d32.backward(dy16.astype(np.float32)).get().astype(dtype))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_losses_take_16bit_outputs_in_float32(dtype, rng):
    x16, x32 = both(dtype, rng.standard_normal((9, 5)) * 3)
    labels = rng.integers(0, 5, 9)
    for make, target in ((nn.SoftmaxCrossEntropy, labels), (nn.MSELoss, rng.standard_normal((9, 5)))):
        c16, c32 = make(), make()
        target32 = target.astype(np.float32) if target.dtype.kind == "f" else target
        assert c16(x16, target32) == c32(x32, target32)
        g16, g32 = c16.backward(), c32.backward()
        assert g16.dtype == np.float32
        np.testing.assert_array_equal(g16.get(), g32.get())
