"""Embedding: the gather forward, the deterministic scatter-add backward (bit-exact against a sequential
sum in index order, under both sim thread orders), padding_idx, gradcheck, errors, PyTorch parity."""
import numpy as np
import pytest

import gpublas
import nn
from nn import kernels as K
from reference import assert_close


def _sequential_grad(dy, idx, V, padding_idx=None):
    """dweight[r] = dy[i] summed over idx[i] == r in increasing i, in dy's precision (the kernel's order)."""
    dw = np.zeros((V, dy.shape[-1]), dy.dtype)
    for i, r in enumerate(idx.ravel()):
        if r != padding_idx:
            dw[r] += dy.reshape(-1, dy.shape[-1])[i]
    return dw


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("V, D, shape", [(5, 3, (7,)), (11, 130, (3, 4)), (2, 1, (1,)), (40, 16, (301,)),
                                         (4, 6, (0,)), (3, 33, (45, 53))])  # the last: 2 tiles of 32 * 64 indices
def test_embedding_forward_and_backward(rng, dtype, V, D, shape):
    nn.manual_seed(0)
    layer = nn.Embedding(V, D, dtype=dtype)
    x = rng.integers(0, V, shape)
    y = layer(x)
    w = layer.weight.data.get()
    assert y.shape == shape + (D,) and y.dtype == dtype
    assert np.array_equal(y.get(), w[x])
    dy = rng.standard_normal(shape + (D,)).astype(dtype)
    assert layer.backward(dy) is None
    assert np.array_equal(layer.weight.grad.get(), _sequential_grad(dy, x, V))
    layer.backward(dy)                                      # gradients accumulate
    assert_close(layer.weight.grad, 2 * _sequential_grad(dy, x, V).astype(np.float64), dtype, k=shape[0] if shape
                 else 1)


def test_embedding_backward_is_deterministic_under_both_orders(rng, sim_order):
    """Many repeats of few rows in float32: any change of summation order would show in the bits."""
    x = rng.integers(0, 3, 2100)                            # two tiles of 32 * 64 indices, the second partial
    dy = (rng.standard_normal((2100, 40)) * 10 ** rng.uniform(-3, 3, (2100, 1))).astype(np.float32)
    layer = nn.Embedding(3, 40)
    layer(x)
    layer.backward(dy)
    assert np.array_equal(layer.weight.grad.get(), _sequential_grad(dy, x, 3))


@pytest.mark.parametrize("padding_idx", [2, -1])
def test_embedding_padding_idx(rng, padding_idx):
    layer = nn.Embedding(4, 5, padding_idx=padding_idx)
    row = padding_idx % 4
    assert layer.padding_idx == row and not layer.weight.data.get()[row].any()
    x = np.array([[row, 0, row], [1, row, 0]])
    assert not layer(x).get()[x == row].any()
    dy = rng.standard_normal((2, 3, 5)).astype(np.float32)
    layer.backward(dy)
    grad = layer.weight.grad.get()
    assert not grad[row].any()
    assert np.array_equal(grad, _sequential_grad(dy, x, 4, padding_idx=row))


def test_embedding_accepts_device_indices(rng):
    layer = nn.Embedding(6, 2)
    x = rng.integers(0, 6, (3, 2))
    want = layer(x).get()
    for dev in (gpublas.to_device(x.astype(np.int32)), gpublas.to_device(x.astype(np.int64))):
        assert np.array_equal(layer(dev).get(), want)


def test_embedding_gradcheck(rng):
    """(Without padding_idx: PyTorch defines that row's gradient as zero although the output uses it.)"""
    nn.manual_seed(0)
    layer = nn.Embedding(5, 3).double()
    nn.gradcheck(layer, np.array([[1, 4, 1], [0, 1, 4]]))
    model = nn.Sequential(nn.Embedding(4, 3), nn.Flatten(), nn.Dense(6, 2, activation="tanh")).double()
    nn.gradcheck(model, np.array([[3, 3], [0, 2]]))


def test_embedding_errors_and_names():
    layer = nn.Embedding(4, 2)
    assert list(layer.state_dict()) == ["weight"] and layer.state_dict()["weight"].shape == (4, 2)
    with pytest.raises(IndexError, match=r"Embedding\(4, 2\): index 4 at position \(1, 0\) is outside \[0, 4\)"):
        layer(np.array([[0, 1], [4, 0]]))
    with pytest.raises(IndexError, match="index -1"):
        layer(np.array([-1]))
    with pytest.raises(TypeError, match="indices must be integers, got float64"):
        layer(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(RuntimeError, match="backward\\(\\) called before forward\\(\\)"):
        nn.Embedding(4, 2).backward(np.zeros((1, 2)))


def test_embedding_parity_with_pytorch(rng):
    torch = pytest.importorskip("torch")
    ours = nn.Embedding(7, 4, padding_idx=3, dtype=np.float64)
    theirs = torch.nn.Embedding(7, 4, padding_idx=3).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    x, dy = rng.integers(0, 7, (5, 3)), rng.standard_normal((5, 3, 4))
    ty = theirs(torch.tensor(x))
    ty.backward(torch.tensor(dy))
    assert_close(ours(x), ty.detach().numpy(), np.float64)
    ours.backward(dy)
    assert_close(ours.weight.grad, theirs.weight.grad.numpy(), np.float64, k=15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_both_backward_kernels_give_the_same_bits(rng, dtype, sim_order):
    """embedding_backward_serial (the sim's, no barrier) against embedding_backward (the GPU's, bit masks in
    shared memory), each launched directly: runs of EMB_RUN columns and a shorter last one, padding_idx,
    indices outside [0, V) that match no row, no indices at all."""
    from nn.kernels import EMB_RUN, get_kernel
    serial, block = (get_kernel("embedding", k, dtype) for k in ("embedding_backward_serial", "embedding_backward"))
    for V, D, n, pad in [(5, 3, 7, -1), (11, 2 * EMB_RUN + 2, 65, 3), (2, 1, 1, -1), (40, EMB_RUN, 301, 0),
                         (3, 40, 2100, -1), (4, 6, 0, -1)]:
        idx = rng.integers(-1, V + 1, n).astype(np.int32)  # -1 and V match no row
        dy = (rng.standard_normal((n, D)) * 10 ** rng.uniform(-3, 3, (n, 1))).astype(dtype)
        w = rng.standard_normal((V, D)).astype(dtype)
        d_dy, d_idx = gpublas.to_device(dy), gpublas.to_device(idx)
        out = [gpublas.to_device(w), gpublas.to_device(w)]
        serial(3, 32, d_dy, d_idx, out[0], n, D, V, pad)  # a grid-stride loop over fewer threads than pairs
        block((V, -(-D // 32)), 32, d_dy, d_idx, out[1], n, D, pad)
        ok = (idx >= 0) & (idx < V) & (idx != pad)
        want = w + _sequential_grad(dy[ok], idx[ok], V)
        np.testing.assert_array_equal(out[0].get(), out[1].get(), err_msg=f"V {V}, D {D}, n {n}")
        np.testing.assert_array_equal(out[0].get(), want)
        # the large-vocabulary path: the indices sorted, a block per run of one row (the GPU's from V n >= 2^22)
        sorted_ = K.embedding_backward(d_dy, d_idx, gpublas.to_device(w), None if pad < 0 else pad, sort=True)
        np.testing.assert_array_equal(sorted_.get(), want, err_msg=f"sorted: V {V}, D {D}, n {n}")
