"""BatchNorm1d / BatchNorm2d: forward against NumPy in train and eval mode, running statistics,
buffers in state_dict (PyTorch's names), finite-difference gradients, PyTorch parity where installed."""
import numpy as np
import pytest

import nn
from nn.reference import layers as ref
from reference import assert_close

SHAPES = [(nn.BatchNorm1d, (5, 3)), (nn.BatchNorm1d, (4, 3, 7)), (nn.BatchNorm2d, (3, 2, 5, 3)),
          (nn.BatchNorm2d, (1, 4, 2, 1))]
IDS = ["1d_NC", "1d_NCL", "2d", "2d_N1"]


def _affine(layer, rng):
    """Random weight and bias (the defaults 1 and 0 would hide mistakes in their use)."""
    C = layer.num_features
    state = layer.state_dict()
    state.update(weight=rng.uniform(0.5, 2, C), bias=rng.standard_normal(C))
    layer.load_state_dict(state)
    return state["weight"].astype(np.float64), state["bias"].astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls, shape", SHAPES, ids=IDS)
def test_batchnorm_train_forward_and_running_stats(rng, dtype, cls, shape):
    layer = cls(shape[1], dtype=dtype)
    gamma, beta = _affine(layer, rng)
    rm, rv = np.zeros(shape[1]), np.ones(shape[1])
    for step in range(2):
        x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
        want, mean, _, var_unbiased = ref.batchnorm_train(x, gamma, beta)
        assert_close(layer(x), want, dtype, k=x.size // shape[1], rtol=1e-4 if dtype == np.float32 else None)
        rm, rv = 0.9 * rm + 0.1 * mean, 0.9 * rv + 0.1 * var_unbiased
    sd = layer.state_dict()
    assert_close(sd["running_mean"], rm, dtype, k=x.size)
    assert_close(sd["running_var"], rv, dtype, k=x.size)
    assert sd["num_batches_tracked"].dtype == np.int64 and sd["num_batches_tracked"] == 2


@pytest.mark.parametrize("cls, shape", SHAPES, ids=IDS)
def test_batchnorm_eval_uses_running_stats(rng, cls, shape):
    C = shape[1]
    layer = cls(C, eps=1e-3, dtype=np.float64)
    gamma, beta = _affine(layer, rng)
    rm, rv = rng.standard_normal(C), rng.uniform(0.5, 3, C)
    layer.load_state_dict({**layer.state_dict(), "running_mean": rm, "running_var": rv})
    layer.eval()
    x = rng.standard_normal(shape)
    assert_close(layer(x), ref.batchnorm_eval(x, gamma, beta, rm, rv, eps=1e-3), np.float64)
    assert_close(layer.running_mean, rm, np.float64)                 # eval leaves the buffers alone
    assert layer.num_batches_tracked == 0


def test_batchnorm_momentum_none_is_the_cumulative_average(rng):
    layer = nn.BatchNorm1d(3, momentum=None, affine=False, dtype=np.float64)
    xs = [rng.standard_normal((6, 3)) + i for i in range(3)]
    for x in xs:
        layer(x)
    assert_close(layer.running_mean, np.mean([x.mean(0) for x in xs], axis=0), np.float64)
    assert_close(layer.running_var, np.mean([x.var(0, ddof=1) for x in xs], axis=0), np.float64)


def test_batchnorm_without_running_stats_uses_the_batch_in_eval(rng):
    layer = nn.BatchNorm2d(2, affine=False, track_running_stats=False, dtype=np.float64).eval()
    assert list(layer.state_dict()) == [] and layer.running_mean is None
    x = rng.standard_normal((2, 2, 3, 3))
    assert_close(layer(x), ref.batchnorm_train(x, None, None)[0], np.float64, k=18)


def test_batchnorm_state_dict_names_order_and_roundtrip(tmp_path, rng):
    model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Dense(12, 4),
                          nn.BatchNorm1d(4, affine=False))
    model(rng.standard_normal((2, 1, 4, 4)))
    sd = model.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var",
                        "1.num_batches_tracked", "4.weight", "4.bias", "5.running_mean", "5.running_var",
                        "5.num_batches_tracked"]
    assert sd["1.num_batches_tracked"].shape == () and sd["1.running_var"].shape == (3,)
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias", "4.weight",
                                                        "4.bias"]
    nn.save(model, tmp_path / "bn.npz")
    other = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Dense(12, 4),
                          nn.BatchNorm1d(4, affine=False))
    nn.load(other, tmp_path / "bn.npz")
    for k, v in other.state_dict().items():
        assert np.array_equal(v, sd[k]) and v.dtype == sd[k].dtype, k
    with pytest.raises(ValueError, match=r"'1.num_batches_tracked' holds float64 values; the int64 target takes"):
        other.load_state_dict({**sd, "1.num_batches_tracked": np.array(1.0)})


def test_batchnorm_double_converts_running_buffers():
    layer = nn.BatchNorm1d(3).double()
    assert layer.running_mean.dtype == np.float64 and layer.running_var.dtype == np.float64
    assert layer.num_batches_tracked.dtype == np.int64 and layer.weight.dtype == np.float64


GRAD_CASES = {
    "1d_NC": (lambda: nn.BatchNorm1d(3), (4, 3), True),
    "1d_NCL_noaffine": (lambda: nn.BatchNorm1d(2, affine=False), (3, 2, 4), True),
    "2d": (lambda: nn.BatchNorm2d(2), (2, 2, 3, 2), True),
    "2d_eval": (lambda: nn.BatchNorm2d(3), (2, 3, 2, 2), False),
    "2d_no_running_eval": (lambda: nn.BatchNorm2d(2, track_running_stats=False), (2, 2, 2, 3), False),
    "in_a_cnn": (lambda: nn.Sequential(nn.Conv2d(1, 2, 2), nn.BatchNorm2d(2), nn.Tanh(), nn.Flatten(),
                                       nn.Dense(8, 2)), (3, 1, 3, 3), True),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_batchnorm_gradcheck(name, rng):
    nn.manual_seed(0)
    make, shape, training = GRAD_CASES[name]
    layer = make().double().train(training)
    for m in layer.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) and m.affine:
            _affine(m, rng)
            if m.running_mean is not None:
                m.running_mean.set(rng.standard_normal(m.num_features))
    nn.gradcheck(layer, rng.standard_normal(shape) * 2 + 0.5)


def test_batchnorm_same_result_under_both_thread_orders(rng, sim_order):
    x = rng.standard_normal((7, 3, 5, 3)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    layer = nn.BatchNorm2d(3)
    y = layer(x).get()
    dx = layer.backward(dy).get()
    want_y, mean, var, _ = ref.batchnorm_train(x, None, None)
    assert_close(y, want_y, np.float32, k=105, rtol=1e-4)
    # dx of y = xhat: (dy - mean(dy) - xhat mean(dy xhat)) / sqrt(var + eps), per channel
    xhat = want_y
    md = dy.mean(axis=(0, 2, 3), keepdims=True)
    mdx = (dy * xhat).mean(axis=(0, 2, 3), keepdims=True)
    assert_close(dx, (dy - md - xhat * mdx) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-5), np.float32, k=105, rtol=1e-4)
    assert_close(layer.weight.grad, (dy * xhat).sum(axis=(0, 2, 3)), np.float32, k=105, rtol=1e-4)
    assert_close(layer.bias.grad, dy.sum(axis=(0, 2, 3)), np.float32, k=105)


def test_batchnorm_errors():
    with pytest.raises(ValueError, match=r"BatchNorm2d\(3.*expected input \(N, C, H, W\) with C = 3, got \(2, 3\)"):
        nn.BatchNorm2d(3)(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"expected input \(N, C\) or \(N, C, L\) with C = 3, got \(2, 4\)"):
        nn.BatchNorm1d(3)(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(np.zeros((1, 3)))
    nn.BatchNorm1d(3).eval()(np.zeros((1, 3)))                    # eval with running stats is fine
    with pytest.raises(RuntimeError, match="backward\\(\\) called before forward\\(\\)"):
        nn.BatchNorm1d(3).backward(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="momentum"):
        nn.BatchNorm1d(3, momentum=1.5)


@pytest.mark.parametrize("cls, shape", SHAPES[1:3], ids=IDS[1:3])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm_parity_with_pytorch(rng, cls, shape, affine):
    torch = pytest.importorskip("torch")
    C = shape[1]
    ours = cls(C, affine=affine, dtype=np.float64)
    theirs = getattr(torch.nn, cls.__name__)(C, affine=affine).double()
    if affine:
        _affine(ours, rng)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    for _ in range(2):
        x = rng.standard_normal(shape)
        dy = rng.standard_normal(shape)
        tx = torch.tensor(x, requires_grad=True)
        ty = theirs(tx)
        ty.backward(torch.tensor(dy))
        assert_close(ours(x), ty.detach().numpy(), np.float64, k=x.size)
        assert_close(ours.backward(dy), tx.grad.numpy(), np.float64, k=x.size)
    for k, v in theirs.state_dict().items():
        assert_close(ours.state_dict()[k], v.numpy(), np.float64, k=x.size)
    ours.eval(), theirs.eval()
    x = rng.standard_normal(shape)
    assert_close(ours(x), theirs(torch.tensor(x)).detach().numpy(), np.float64, k=x.size)
