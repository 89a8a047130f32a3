"""LayerNorm, GELU, Dense on (..., features) and the cross-entropy of sequences against PyTorch in float64
(weights through state_dict), finite differences, the LayerNorm kernels' GPU form (a warp per row) against
the simulator's (a thread per row) bit for bit, 16-bit LayerNorm with FP32 statistics, and bad input."""
from pathlib import Path

import numpy as np
import pytest

import gpublas
import nn
from reference import assert_close

torch = pytest.importorskip("torch")
F64 = np.float64
pytestmark = pytest.mark.usefixtures("torch_seeded")


def _both(ours, theirs, x, dy):
    """Forward and backward through both; returns ours' (y, dx) and torch's (y, dx), parameters compared."""
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    ty.backward(torch.tensor(dy))
    y, dx = ours(x).get(), ours.backward(dy).get()
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        want = grads[name].grad.numpy()  # (width 1: torch's xhat is rounding noise, ours exactly 0)
        assert_close(p.grad, want, F64, k=x.size, atol=1e-12 * (1 + np.abs(want).max()))
    return y, dx, ty.detach().numpy(), tx.grad.numpy()


@pytest.mark.parametrize("C", [1, 33, 1000, 4096])
def test_layernorm_is_torchs(rng, C):
    shape = (2, 3, C) if C < 1000 else (3, C)
    ours = nn.LayerNorm(C, dtype=F64)
    ours.load_state_dict({"weight": rng.standard_normal(C), "bias": rng.standard_normal(C)})
    x = 2 + 3 * rng.standard_normal(shape)
    y, dx, ty, tdx = _both(ours, torch.nn.LayerNorm(C).double(), x, rng.standard_normal(shape))
    assert_close(y, ty, F64, k=C)
    assert_close(dx, tdx, F64, k=C, atol=1e-12 * np.abs(tdx).max() + 1e-13)


@pytest.mark.parametrize("affine, bias", [(False, True), (True, False)])
def test_layernorm_options_and_2d_shape(rng, affine, bias):
    ours = nn.LayerNorm((3, 5), eps=1e-3, elementwise_affine=affine, bias=bias, dtype=F64)
    theirs = torch.nn.LayerNorm((3, 5), eps=1e-3, elementwise_affine=affine, bias=bias).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = rng.standard_normal((4, 3, 5))
    y, dx, ty, tdx = _both(ours, theirs, x, rng.standard_normal(x.shape))
    assert_close(y, ty, F64, k=15)
    assert_close(dx, tdx, F64, k=15)


def test_layernorm_gradcheck(rng):
    ln = nn.LayerNorm(7, dtype=F64)
    ln.load_state_dict({"weight": rng.standard_normal(7), "bias": rng.standard_normal(7)})
    nn.gradcheck(ln, rng.standard_normal((2, 3, 7)))


def _lanes_tree(v):
    """float32 sum of v as layernorm.cu's 32 lanes take it: lane l adds v[l], v[l + 32], ... in order,
    then the butterfly's tree (offsets 16, 8, 4, 2, 1)."""
    p = np.zeros(32, np.float32)
    for c0 in range(0, v.size, 32):
        chunk = v[c0:c0 + 32]
        p[:chunk.size] += chunk
    for off in (16, 8, 4, 2, 1):
        p[:off] = p[:off] + p[off:2 * off]
    return p[0]


@pytest.mark.parametrize("dtype", [np.float32, gpublas.bfloat16])
def test_layernorm_row_sums_follow_the_warp_tree(rng, dtype):
    """The mean each row gets is the 32 lanes' sums folded by the shuffle butterfly, bit for bit: a warp per
    row on a GPU, one thread computing every lane's sum and the same tree on the simulator."""
    rows, C = 9, 70
    x = (3 * rng.standard_normal((rows, C))).astype(dtype)
    ln = nn.LayerNorm(C)
    ln(gpublas.to_device(x))
    want = np.array([_lanes_tree(r) / np.float32(C) for r in x.astype(np.float32)], np.float32)
    np.testing.assert_array_equal(ln.mean.get(), want)
    np.testing.assert_allclose(ln.rstd.get(), 1 / np.sqrt(x.astype(F64).var(1) + 1e-5), rtol=1e-5)


def _ln_kernels(rng, dtype, rows, C, lanes, **defines):
    """layernorm.cu's two kernels launched directly with `lanes` lanes a row (2 units a block, grids smaller than
    the rows: the grid-stride loop); (y, mean, rstd, dx, dw_part, db_part), the backward with G = 5 units (fewer
    for fewer rows)."""
    root = Path(nn.__file__).parent / "cuda"
    fwd, bwd = (gpublas.get_kernel("layernorm", f"layernorm_{k}", dtype, root=root, **defines)
                for k in ("forward", "backward"))
    x = gpublas.to_device((2 + 3 * rng.standard_normal((rows, C))).astype(dtype))
    dy = gpublas.to_device(rng.standard_normal((rows, C)).astype(dtype))
    w, b = (gpublas.to_device(rng.standard_normal(C).astype(np.float32)) for _ in range(2))
    y, dx = gpublas.empty((rows, C), dtype), gpublas.empty((rows, C), dtype)
    mean, rstd = gpublas.empty(rows, np.float32), gpublas.empty(rows, np.float32)
    G = min(5, rows)  # units past the rows would leave their partial rows unwritten
    dw, db = gpublas.empty((G, C), np.float32), gpublas.empty((G, C), np.float32)
    fwd(3, 2 * lanes, x, w, b, y, mean, rstd, rows, C, 1e-5)
    bwd(3, 2 * lanes, x, dy, w, mean, rstd, dx, dw, db, rows, C, G)
    return [a.get() for a in (y, mean, rstd, dx, dw, db)]


@pytest.mark.parametrize("dtype", [np.float32, gpublas.bfloat16])
def test_layernorm_gpu_form_on_the_simulator(dtype):
    """LN_GPU_FORM: the kernels a GPU runs (a warp a row, common.cuh's warp_allreduce) built on the simulator and
    launched with 32 lanes a row give the bits of the simulator's own form (a thread a row, warp_reduce_serial)."""
    if gpublas.backend() != "sim":
        pytest.skip("the GPU's form is what the cuda backend runs anyway")
    for rows, C in ((13, 70), (4, 1), (3, 64)):
        own = _ln_kernels(np.random.default_rng(7), dtype, rows, C, 1)
        gpu = _ln_kernels(np.random.default_rng(7), dtype, rows, C, 32, LN_GPU_FORM=1)
        for name, a, b in zip(("y", "mean", "rstd", "dx", "dw_part", "db_part"), own, gpu):
            np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"), err_msg=f"{name} C={C}")


@pytest.mark.parametrize("dtype", [np.float16, gpublas.bfloat16])
def test_layernorm_16bit_keeps_fp32_statistics(rng, dtype):
    C = 48
    ln = nn.LayerNorm(C)
    ln.load_state_dict({"weight": rng.standard_normal(C), "bias": rng.standard_normal(C)})
    x16 = (5 + rng.standard_normal((6, C))).astype(dtype)
    y = ln(gpublas.to_device(x16))
    assert y.dtype == dtype and ln.mean.dtype == np.float32 and ln.weight.dtype == np.float32
    xh = x16.astype(F64)
    want = (xh - xh.mean(1, keepdims=True)) / np.sqrt(xh.var(1, keepdims=True) + 1e-5) * ln.weight.data.get() \
        + ln.bias.data.get()
    np.testing.assert_allclose(y.get().astype(F64), want, rtol=2 ** -7, atol=2 ** -7 * np.abs(want).max())
    dx = ln.backward(gpublas.to_device(np.ones((6, C), dtype)))
    assert dx.dtype == dtype and ln.weight.grad.dtype == np.float32


def test_layernorm_backward_is_deterministic(rng):
    ln = nn.LayerNorm(300)
    x, dy = rng.standard_normal((200, 300)).astype(np.float32), rng.standard_normal((200, 300)).astype(np.float32)
    grads = []
    for _ in range(2):
        ln.zero_grad()
        ln(x)
        grads.append((ln.backward(dy).get(), ln.weight.grad.get(), ln.bias.grad.get()))
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_torchs(rng, approximate):
    x = 3 * rng.standard_normal((4, 3, 5))
    ours, theirs = nn.GELU(approximate), torch.nn.GELU(approximate)
    y, dx, ty, tdx = _both(ours, theirs, x, rng.standard_normal(x.shape))
    assert_close(y, ty, F64, k=4)
    assert_close(dx, tdx, F64, k=4)
    nn.gradcheck(ours, x[0])


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh"])
@pytest.mark.parametrize("shape", [(3, 7), (2, 3, 7), (7,)])
def test_dense_fused_gelu_on_any_leading_axes(rng, act, shape):
    ours = nn.Dense(7, 5, activation=act, dtype=F64)
    linear = torch.nn.Linear(7, 5).double()
    theirs = torch.nn.Sequential(linear, torch.nn.GELU("none" if act == "gelu" else "tanh"))
    linear.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    x, dy = rng.standard_normal(shape), rng.standard_normal(shape[:-1] + (5,))
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    ty.backward(torch.tensor(dy))
    y = ours(x)
    assert y.shape == shape[:-1] + (5,)
    assert_close(y, ty.detach().numpy(), F64, k=7)
    assert_close(ours.backward(dy), tx.grad.numpy(), F64, k=7)
    assert_close(ours.weight.grad, linear.weight.grad.numpy(), F64, k=7)
    assert_close(ours.bias.grad, linear.bias.grad.numpy(), F64, k=7)


@pytest.mark.parametrize("dtype", [np.float32, gpublas.bfloat16])
def test_dense_gelu_under_16_bits_keeps_the_pre_activation(rng, dtype):
    d = nn.Dense(8, 6, activation="gelu_tanh")
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    with nn.autocast(gpublas.bfloat16, enabled=dtype != np.float32):
        y = d(x)
    z = x.astype(F64) @ d.weight.data.get().T.astype(F64) + d.bias.data.get()
    want = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    tol = 1e-5 if dtype == np.float32 else 2 ** -6
    np.testing.assert_allclose(y.get().astype(F64), want, rtol=tol, atol=tol)
    dx = d.backward(gpublas.to_device(np.ones(y.shape, np.float32)).astype(y.dtype))
    assert dx.shape == (2, 3, 8)


def test_activations_and_dropout_take_any_shape(rng):
    x = rng.standard_normal((2, 3, 4, 5))
    for m in (nn.ReLU(), nn.Tanh(), nn.Dropout(0.5)):
        y = m(x)
        assert y.shape == x.shape and m.backward(y).shape == x.shape


@pytest.mark.parametrize("device_labels", [False, True])
def test_cross_entropy_on_sequences_with_ignore_index(rng, device_labels):
    N, T, V = 3, 5, 7
    logits = rng.standard_normal((N, T, V))
    labels = rng.integers(0, V, (N, T))
    labels[0, :2] = labels[2, 4] = -100
    tl = torch.tensor(logits, requires_grad=True)
    want = torch.nn.functional.cross_entropy(tl.reshape(-1, V), torch.tensor(labels).reshape(-1))
    want.backward()
    crit = nn.CrossEntropyLoss()
    lab = gpublas.to_device(labels.astype(np.int32)) if device_labels else labels
    loss = crit(logits, lab)
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    assert_close(crit.backward(), tl.grad.numpy(), F64, k=V)
    crit7 = nn.CrossEntropyLoss(ignore_index=3)
    want7 = torch.nn.functional.cross_entropy(torch.tensor(logits[1]), torch.tensor(labels[1]), ignore_index=3)
    np.testing.assert_allclose(crit7(logits[1], labels[1]), want7.item(), rtol=1e-12)
    assert np.isnan(crit(logits[:1, :2], np.full((1, 2), -100)))  # every label ignored: NaN, as torch


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"LayerNorm\(\(4,\).*expected input \(..., 4\), got \(2, 5\)"):
        nn.LayerNorm(4)(np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"approximate must be 'none' or 'tanh'"):
        nn.GELU("fast")
    with pytest.raises(ValueError, match=r"unknown activation 'gelu'; expected one of relu, tanh, sigmoid"):
        nn.Conv2d(1, 1, 3, activation="gelu")
    with pytest.raises(ValueError, match=r"expected labels \(2, 3\) for logits \(2, 3, 4\)"):
        nn.CrossEntropyLoss()(np.zeros((2, 3, 4)), np.zeros((2, 4), int))
