"""Training a few steps lowers the loss; nn's kernels give identical results under two thread orders."""
import numpy as np

import gpublas
import nn


def _blobs(rng, n=48, classes=3, shape=(1, 6, 6)):
    y = rng.integers(0, classes, n).astype(np.int32)
    centers = rng.standard_normal((classes,) + shape).astype(np.float32)
    x = centers[y] + 0.3 * rng.standard_normal((n,) + shape).astype(np.float32)
    return x, y


def test_cnn_loss_goes_down(rng):
    nn.manual_seed(0)
    x, y = _blobs(rng)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Dropout(0.2), nn.Dense(36, 3))
    crit = nn.SoftmaxCrossEntropy()
    opt = nn.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(15):
        losses.append(crit(model(x), y))
        opt.zero_grad()
        model.backward(crit.backward())
        opt.step()
    assert losses[-1] < 0.5 * losses[0], losses


def test_mlp_regression_loss_goes_down(rng):
    nn.manual_seed(1)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    target = np.tanh(x @ rng.standard_normal((4, 2))).astype(np.float32)
    model = nn.Sequential(nn.Dense(4, 16), nn.Tanh(), nn.Dense(16, 2))
    crit, opt = nn.MSELoss(), nn.SGD(model.parameters(), lr=0.2, momentum=0.5)
    first = None
    for _ in range(30):
        loss = crit(model(x), target)
        first = loss if first is None else first
        opt.zero_grad()
        model.backward(crit.backward())
        opt.step()
    assert loss < 0.3 * first


def test_lstm_learns_a_short_sequence(rng):
    """Next-symbol prediction of a repeating pattern: the loss falls well below log(V)."""
    nn.manual_seed(2)
    V, H, T, N = 4, 12, 6, 4
    seq = np.array([0, 1, 2, 3, 2, 1] * 8)
    lstm, head = nn.LSTM(V, H), nn.Dense(H, V)
    crit = nn.SoftmaxCrossEntropy()
    opt = nn.SGD(lstm.parameters() + head.parameters(), lr=0.5, momentum=0.9)
    starts = np.arange(N) * 5
    idx = starts[None, :] + np.arange(T)[:, None]            # (T, N)
    x = np.eye(V, dtype=np.float32)[seq[idx]]
    y = seq[idx + 1].reshape(-1).astype(np.int32)
    losses = []
    for _ in range(40):
        out, _ = lstm(x)
        losses.append(crit(head(out.reshape(T * N, H)), y))
        opt.zero_grad()
        lstm.backward(head.backward(crit.backward()).reshape(T, N, H))
        nn.clip_grad_norm(opt.params, 5.0)
        opt.step()
    assert losses[0] > 1.0 and losses[-1] < 0.3, losses[::5]


def _run_everything(seed=0):
    """Forward and backward through every kernel family nn adds; returns all results on the host."""
    nn.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 2, 7, 6)).astype(np.float32)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, stride=(2, 1), padding=1, dilation=(1, 2)), nn.ReLU(),
                          nn.MaxPool2d(3, stride=2, padding=1), nn.AvgPool2d(2, stride=1), nn.Flatten(),
                          nn.Dropout(0.3), nn.Dense(4, 5, activation="tanh"), nn.Sigmoid())
    lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True)
    y = model(x)
    mse = nn.MSELoss()
    results = [y.get(), np.array([mse(y, rng.standard_normal(y.shape).astype(np.float32))])]
    results.append(model.backward(mse.backward()).get())
    out, (h, c) = lstm(rng.standard_normal((2, 5, 3)).astype(np.float32))
    crit = nn.SoftmaxCrossEntropy()
    results += [out.get(), h.get(), c.get(),
                np.array([crit(out.reshape(10, 4), rng.integers(0, 4, 10))])]
    results.append(lstm.backward(crit.backward().reshape(2, 5, 4)).get())
    params = model.parameters() + lstm.parameters()
    results.append(np.array([nn.clip_grad_norm(params, 0.5)]))
    nn.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01).step()
    results += [p.data.get() for p in params] + [p.grad.get() for p in params]
    return results


def test_identical_results_under_thread_orders(sim_order):
    """Each order of the fixture against a random thread order: bit-for-bit the same."""
    first = _run_everything()
    if gpublas.backend() != "sim":
        return
    gpublas.sim_thread_order("random")
    try:
        second = _run_everything()
    finally:
        gpublas.sim_thread_order(sim_order)
    for a, b in zip(first, second):
        assert np.array_equal(a, b, equal_nan=True)
