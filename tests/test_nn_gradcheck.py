"""Every layer's and loss's backward against central finite differences in float64 (tiny shapes)."""
import numpy as np
import pytest

import nn

LAYERS = {
    "dense": (lambda: nn.Dense(5, 4), (3, 5)),
    "dense_nobias_relu": (lambda: nn.Dense(5, 4, bias=False, activation="relu"), (3, 5)),
    "dense_tanh": (lambda: nn.Dense(5, 3, activation="tanh"), (2, 5)),
    "conv": (lambda: nn.Conv2d(2, 3, 3, padding=1), (2, 2, 4, 5)),
    "conv_strided_dilated": (lambda: nn.Conv2d(2, 2, (2, 3), stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
                             (1, 2, 5, 4)),
    "conv_sigmoid_nobias": (lambda: nn.Conv2d(1, 2, 2, bias=False, activation="sigmoid"), (2, 1, 3, 3)),
    "maxpool": (lambda: nn.MaxPool2d(2), (2, 2, 4, 4)),
    "maxpool_overlap_pad": (lambda: nn.MaxPool2d(3, stride=2, padding=1), (1, 2, 5, 6)),
    "avgpool": (lambda: nn.AvgPool2d(3, stride=2, padding=1), (1, 2, 5, 6)),
    "relu": (nn.ReLU, (3, 4)),
    "tanh": (nn.Tanh, (3, 4)),
    "sigmoid": (nn.Sigmoid, (3, 4)),
    "flatten": (nn.Flatten, (2, 2, 3)),
    "dropout": (lambda: nn.Dropout(0.4), (4, 5)),
    "lstm": (lambda: nn.LSTM(3, 4), (3, 2, 3)),
    "lstm_nobias": (lambda: nn.LSTM(2, 3, bias=False), (2, 1, 2)),
    "lstm_2layer_batch_first": (lambda: nn.LSTM(2, 3, num_layers=2, batch_first=True), (2, 3, 2)),
    "sequential_cnn": (lambda: nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                             nn.Flatten(), nn.Dense(8, 3)), (2, 1, 4, 4)),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_gradcheck_layer(name):
    nn.manual_seed(1)
    make, shape = LAYERS[name]
    layer = make().double()
    x = np.random.default_rng(2).standard_normal(shape)
    nn.gradcheck(layer, x)


def test_gradcheck_softmax_cross_entropy():
    x = np.random.default_rng(3).standard_normal((4, 5)) * 3
    nn.gradcheck(nn.SoftmaxCrossEntropy(), x, np.array([0, 4, 2, 2]))


def test_gradcheck_mse():
    rng = np.random.default_rng(4)
    nn.gradcheck(nn.MSELoss(), rng.standard_normal((3, 4)), rng.standard_normal((3, 4)))


def test_gradcheck_lstm_state_and_final_state_gradients():
    """With an initial state and gradients flowing into h_n, c_n too."""
    nn.manual_seed(2)
    rng = np.random.default_rng(5)
    lstm = nn.LSTM(2, 3, num_layers=2).double()
    x = rng.standard_normal((3, 2, 2))
    h0, c0 = rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 2, 3))
    rd, rh, rc = rng.standard_normal((3, 2, 3)), rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 2, 3))

    def scalar(xv, h0v, c0v):
        out, (hn, cn) = lstm(xv, (h0v, c0v))
        return float(np.sum(rd * out.get()) + np.sum(rh * hn.get()) + np.sum(rc * cn.get()))

    scalar(x, h0, c0)
    lstm.zero_grad()
    dx = lstm.backward(rd, rh, rc).get()
    eps = 1e-6
    for value, analytic in ((x, dx), (h0, lstm.dh0.get()), (c0, lstm.dc0.get())):
        num = np.empty_like(value)
        for i in np.ndindex(value.shape):
            orig = value[i]
            value[i] = orig + eps
            up = scalar(x, h0, c0)
            value[i] = orig - eps
            down = scalar(x, h0, c0)
            value[i] = orig
            num[i] = (up - down) / (2 * eps)
        np.testing.assert_allclose(analytic, num, rtol=1e-5, atol=1e-7)


def test_gradcheck_reports_a_wrong_backward():
    class Broken(nn.Tanh):
        def backward(self, dy):
            return super().backward(dy) if False else dy  # forgets the derivative

    with pytest.raises(nn.GradcheckError, match="d/dinput"):
        nn.gradcheck(Broken(), np.random.default_rng(0).standard_normal((2, 3)))
