"""nn against PyTorch: the same float64 data and the same weights (copied through state_dict, whose
names are PyTorch's) give the same forward output, input gradient and parameter gradients, for Dense
(Linear), Conv2d, MaxPool2d, AvgPool2d, Dropout, the activations, LSTM, the losses and a Sequential
model. Embedding, BatchNorm and the optimizers have theirs beside their other tests."""
import numpy as np
import pytest

import nn
from reference import assert_close, copy_weights

torch = pytest.importorskip("torch")
F64 = np.float64
pytestmark = pytest.mark.usefixtures("torch_seeded")


def run_both(ours, theirs, x, dy, k, params=None):
    """Forward and backward through both; compares outputs, input gradients and every parameter's
    gradient by name (PyTorch's parameters from `params`, by default `theirs`)."""
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    ty.backward(torch.tensor(dy))
    assert_close(ours(x), ty.detach().numpy(), F64, k=k)
    assert_close(ours.backward(dy), tx.grad.numpy(), F64, k=k)
    grads = dict((params or theirs).named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, grads[name].grad.numpy(), F64, k=k)
    return ty


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", [None, "relu", "tanh", "sigmoid"])
def test_dense_is_linear(rng, bias, act):
    ours = nn.Dense(7, 5, bias=bias, activation=act, dtype=F64)
    linear = torch.nn.Linear(7, 5, bias=bias).double()
    copy_weights(ours, linear)
    theirs = linear if act is None else torch.nn.Sequential(
        linear, {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid}[act]())
    run_both(ours, theirs, rng.standard_normal((3, 7)), rng.standard_normal((3, 5)), k=7, params=linear)


@pytest.mark.parametrize("cfg", [
    dict(cin=1, cout=2, k=3, stride=1, padding=0, dilation=1, hw=(5, 5)),
    dict(cin=3, cout=4, k=3, stride=2, padding=1, dilation=1, hw=(7, 6)),
    dict(cin=2, cout=5, k=(2, 3), stride=(2, 1), padding=(1, 2), dilation=1, hw=(7, 5)),
    dict(cin=2, cout=3, k=3, stride=2, padding=2, dilation=(2, 1), hw=(9, 8)),
    dict(cin=3, cout=2, k=(3, 2), stride=(1, 3), padding=(0, 1), dilation=2, hw=(8, 11)),
])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(rng, cfg, bias):
    kw = dict(stride=cfg["stride"], padding=cfg["padding"], dilation=cfg["dilation"], bias=bias)
    ours = nn.Conv2d(cfg["cin"], cfg["cout"], cfg["k"], dtype=F64, **kw)
    theirs = torch.nn.Conv2d(cfg["cin"], cfg["cout"], cfg["k"], **kw).double()
    copy_weights(ours, theirs)
    x = rng.standard_normal((2, cfg["cin"]) + cfg["hw"])
    dy = rng.standard_normal(tuple(theirs(torch.tensor(x)).shape))
    run_both(ours, theirs, x, dy, k=ours.weight.data.size)


@pytest.mark.parametrize("act", ["relu", "tanh", "sigmoid"])
def test_conv2d_fused_activation(rng, act):
    ours = nn.Conv2d(2, 3, 3, padding=1, activation=act, dtype=F64)
    conv = torch.nn.Conv2d(2, 3, 3, padding=1).double()
    copy_weights(ours, conv)
    theirs = torch.nn.Sequential(conv, {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh,
                                        "sigmoid": torch.nn.Sigmoid}[act]())
    run_both(ours, theirs, rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 3, 5, 4)), k=18, params=conv)


@pytest.mark.parametrize("cls", ["MaxPool2d", "AvgPool2d"])
@pytest.mark.parametrize("k, s, p, hw", [(2, None, 0, (6, 6)), (3, 2, 1, (7, 5)), ((2, 3), (1, 2), (1, 1), (5, 7)),
                                         (3, 1, 1, (4, 4)), ((3, 1), (2, 3), (1, 0), (9, 10))])
def test_pooling(rng, cls, k, s, p, hw):
    ours = getattr(nn, cls)(k, stride=s, padding=p)
    theirs = getattr(torch.nn, cls)(k, stride=s, padding=p)   # AvgPool2d: count_include_pad=True, as ours
    x = rng.standard_normal((2, 3) + hw)
    dy = rng.standard_normal(tuple(theirs(torch.tensor(x)).shape))
    run_both(ours, theirs, x, dy, k=9)


def test_maxpool_padding_is_minus_infinity(rng):
    # an all-negative input: PyTorch pads max pooling with -inf, so no window's maximum is a padded 0
    ours, theirs = nn.MaxPool2d(3, stride=2, padding=1), torch.nn.MaxPool2d(3, stride=2, padding=1)
    x = -np.abs(rng.standard_normal((1, 2, 5, 5))) - 1
    run_both(ours, theirs, x, rng.standard_normal((1, 2, 3, 3)), k=1)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.9])
def test_dropout_eval_is_identity(rng, p):
    ours, theirs = nn.Dropout(p).eval(), torch.nn.Dropout(p).eval()
    x, dy = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    run_both(ours, theirs, x, dy, k=1)


def test_dropout_train_scales_the_kept_elements_as_pytorch(rng):
    # the masks differ (each draws its own), but both keep x / (1 - p) or write 0, and route dy the same way
    ours = nn.Dropout(0.25)
    x = rng.standard_normal((64, 32)) + 5
    y = ours(x).get()
    kept = y != 0
    assert_close(y[kept], x[kept] / 0.75, F64)
    ty = torch.nn.Dropout(0.25)(torch.tensor(x)).numpy()
    assert_close(ty[ty != 0], x[ty != 0] / 0.75, F64)
    dy = rng.standard_normal(x.shape)
    assert_close(ours.backward(dy), np.where(kept, dy / 0.75, 0), F64)
    assert 0.65 < kept.mean() < 0.85


@pytest.mark.parametrize("name", ["ReLU", "Tanh", "Sigmoid"])
def test_activations(rng, name):
    x, dy = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    run_both(getattr(nn, name)(), getattr(torch.nn, name)(), x, dy, k=1)


@pytest.mark.parametrize("layers, batch_first, bias", [(1, False, True), (2, False, True), (2, True, False),
                                                       (3, True, True)])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("T, N, I, H", [(5, 3, 4, 6), (1, 1, 1, 1)])
def test_lstm(rng, layers, batch_first, bias, with_state, T, N, I, H):
    ours = nn.LSTM(I, H, num_layers=layers, batch_first=batch_first, bias=bias, dtype=F64)
    theirs = torch.nn.LSTM(I, H, num_layers=layers, batch_first=batch_first, bias=bias).double()
    copy_weights(ours, theirs)   # weight_ih_l0 (4H, I) ... in PyTorch's gate order i, f, g, o
    x = rng.standard_normal((N, T, I) if batch_first else (T, N, I))
    h0, c0 = rng.standard_normal((layers, N, H)), rng.standard_normal((layers, N, H))
    d_out = rng.standard_normal((N, T, H) if batch_first else (T, N, H))
    d_hn, d_cn = rng.standard_normal((layers, N, H)), rng.standard_normal((layers, N, H))

    tx = torch.tensor(x, requires_grad=True)
    th0, tc0 = torch.tensor(h0, requires_grad=True), torch.tensor(c0, requires_grad=True)
    tout, (thn, tcn) = theirs(tx, (th0, tc0)) if with_state else theirs(tx)
    torch.autograd.backward([tout, thn, tcn], [torch.tensor(d_out), torch.tensor(d_hn), torch.tensor(d_cn)])

    out, (hn, cn) = ours(x, (h0, c0)) if with_state else ours(x)
    k = T * (I + H)
    for got, want in ((out, tout), (hn, thn), (cn, tcn)):
        assert_close(got, want.detach().numpy(), F64, k=k)
    assert_close(ours.backward(d_out, d_hn, d_cn), tx.grad.numpy(), F64, k=k)
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, grads[name].grad.numpy(), F64, k=k)
    if with_state:
        assert_close(ours.dh0, th0.grad.numpy(), F64, k=k)
        assert_close(ours.dc0, tc0.grad.numpy(), F64, k=k)


@pytest.mark.parametrize("n, c", [(1, 1), (1, 5), (7, 3), (32, 10)])
def test_softmax_cross_entropy(rng, n, c):
    logits = rng.standard_normal((n, c)) * 3
    labels = rng.integers(0, c, n)
    crit = nn.SoftmaxCrossEntropy()
    loss = crit(logits, labels)
    tl = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(tl, torch.tensor(labels))
    tloss.backward()
    assert_close(np.float64(loss), tloss.item(), F64, k=c)
    assert_close(crit.backward(), tl.grad.numpy(), F64, k=c)
    tl.grad = None
    (2.5 * torch.nn.functional.cross_entropy(tl, torch.tensor(labels))).backward()
    assert_close(crit.backward(2.5), tl.grad.numpy(), F64, k=c)          # backward(dloss) scales


def test_mse_loss(rng):
    pred, target = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    crit = nn.MSELoss()
    loss = crit(pred, target)
    tp = torch.tensor(pred, requires_grad=True)
    tloss = torch.nn.functional.mse_loss(tp, torch.tensor(target))
    tloss.backward()
    assert_close(np.float64(loss), tloss.item(), F64, k=30)
    assert_close(crit.backward(), tp.grad.numpy(), F64, k=30)


def test_sequential_cnn_state_dict_and_training_step(rng):
    # a whole model: the state_dict moves as is, and one step of loss, backward and SGD matches PyTorch's
    ours = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, dtype=F64), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Dense(4 * 3 * 3, 5, dtype=F64))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                 torch.nn.Flatten(), torch.nn.Linear(36, 5)).double()
    copy_weights(ours, theirs)
    x, labels = rng.standard_normal((8, 1, 6, 6)), rng.integers(0, 5, 8)
    opt, topt = nn.SGD(ours.parameters(), lr=0.1, momentum=0.9), torch.optim.SGD(theirs.parameters(), lr=0.1,
                                                                                momentum=0.9)
    crit = nn.SoftmaxCrossEntropy()
    for _ in range(2):
        loss = crit(ours(x), labels)
        opt.zero_grad()
        ours.backward(crit.backward())
        opt.step()
        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(labels))
        tloss.backward()
        topt.step()
        assert_close(np.float64(loss), tloss.item(), F64, k=36)
    for name, v in theirs.state_dict().items():
        assert_close(ours.state_dict()[name], v.numpy(), F64, k=36)
