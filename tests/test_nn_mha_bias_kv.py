"""MultiheadAttention(add_bias_kv=True, add_zero_attn=True) as PyTorch's: bias_k and bias_v (1, 1, E) appended as
one more key and value per sequence, a zero key and value after them, the masks padded with columns that mask
nothing (or, where PyTorch hands SDPA its is_causal flag, the causal mask over every key); float64 against torch
with the same weights: outputs, weights, the inputs' gradients, every parameter's gradient, state_dict both ways."""
import numpy as np
import pytest

import gpublas
import nn
from reference import assert_close, copy_weights

torch = pytest.importorskip("torch")
F64 = np.float64
pytestmark = pytest.mark.usefixtures("torch_seeded")
KINDS = [dict(add_bias_kv=True), dict(add_zero_attn=True), dict(add_bias_kv=True, add_zero_attn=True)]
KIND_IDS = ["bias_kv", "zero_attn", "both"]


def _mha(E, H, **kw):
    ours = nn.MultiheadAttention(E, H, dtype=F64, **kw)
    theirs = torch.nn.MultiheadAttention(E, H, **kw).double()
    copy_weights(ours, theirs)
    return ours, theirs


def _compare(ours, theirs, rng, q, kv, need_weights, masks, tmasks=None, k=64):
    """One forward and backward of both; every output, input gradient and parameter gradient compared."""
    self_attn = kv is None
    tq = torch.tensor(q, requires_grad=True)
    tkv = tq if self_attn else torch.tensor(kv, requires_grad=True)
    tmasks = {n: torch.tensor(m) for n, m in masks.items()} if tmasks is None else tmasks
    ty, tw = theirs(tq, tkv, tkv, need_weights=need_weights, **tmasks)
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    kv = q if self_attn else kv
    ins = (q, q, q) if self_attn else (q, kv, kv)
    y, w = ours(*ins, need_weights=need_weights, **masks)
    assert_close(y, ty.detach().numpy(), F64, k=k)
    if need_weights:
        assert_close(w, tw.detach().numpy(), F64, k=k)
    else:
        assert w is None and tw is None
    grads = ours.backward(dy)
    if self_attn:
        assert_close(grads, tq.grad.numpy(), F64, k=k)
    else:
        assert_close(grads[0], tq.grad.numpy(), F64, k=k)
        assert_close(grads[1] + grads[2], tkv.grad.numpy(), F64, k=k)
    g = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, g[name].grad.numpy(), F64, k=k)


@pytest.mark.parametrize("kw", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "no_weights"])
@pytest.mark.parametrize("mask", ["none", "attn_bool", "attn_float_3d", "padding", "both", "causal_hint"])
def test_self_attention_is_torchs(rng, kw, need_weights, mask):
    """(T, B, E) self-attention with every mask PyTorch pads for the extra keys; is_causal with its mask as
    PyTorch asks for it (its flag path, need_weights False and no padding mask, never attends the extra keys)."""
    T, B, E, H = 5, 3, 8, 2
    ours, theirs = _mha(E, H, **kw)
    x = rng.standard_normal((T, B, E))
    masks = {}
    if mask in ("attn_bool", "both"):
        masks["attn_mask"] = rng.random((T, T)) < 0.3
        np.fill_diagonal(masks["attn_mask"], False)
    if mask == "attn_float_3d":
        masks["attn_mask"] = np.where(rng.random((B * H, T, T)) < 0.3, -np.inf, rng.standard_normal((B * H, T, T)))
        masks["attn_mask"][:, :, 0] = 0.5
    if mask in ("padding", "both"):
        masks["key_padding_mask"] = np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [0, 1, 0, 1, 0]], bool)
    tmasks = None
    if mask == "causal_hint":
        causal = np.triu(np.full((T, T), -np.inf), 1)
        masks, tmasks = {"attn_mask": causal, "is_causal": True}, {"attn_mask": torch.tensor(causal), "is_causal": True}
    _compare(ours, theirs, rng, x, None, need_weights, masks, tmasks)


@pytest.mark.parametrize("kw", KINDS, ids=KIND_IDS)
def test_cross_attention_kdim_vdim_batch_first_and_fused(rng, kw):
    """Key and value of their own widths (kdim, vdim), batch_first, a head dim the fused kernels take (D = 16),
    a key-padding mask that pads at the end (the fused path's, before the extra keys) and a device attn_mask."""
    E, H, B, Tq, Tk = 32, 2, 2, 4, 6
    ours, theirs = _mha(E, H, kdim=5, vdim=7, batch_first=True, **kw)
    q, kv = rng.standard_normal((B, Tq, E)), rng.standard_normal((B, Tk, 5))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, kv, rng.standard_normal((B, Tk, 7))))
    kpm = np.array([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]], bool)
    am = rng.random((Tq, Tk)) < 0.2
    am[:, 0] = False
    ty = theirs(tq, tk, tv, key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(am), need_weights=False)[0]
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    y, _ = ours(q, kv, tv.detach().numpy(), key_padding_mask=kpm, attn_mask=gpublas.to_device(am), need_weights=False)
    assert_close(y, ty.detach().numpy(), F64, k=64)
    for got, t in zip(ours.backward(dy), (tq, tk, tv)):
        assert_close(got, t.grad.numpy(), F64, k=64)
    g = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, g[name].grad.numpy(), F64, k=64)


def test_unbatched_and_no_mask_fused(rng):
    """(T, E) input and the padding mask (Tk,); and no mask at D = 16 (the fused kernels, the extra keys included)."""
    ours, theirs = _mha(32, 2, add_bias_kv=True, add_zero_attn=True)
    x = rng.standard_normal((5, 32))
    _compare(ours, theirs, rng, x, None, False, {"key_padding_mask": np.array([0, 0, 1, 0, 1], bool)})
    ours, theirs = _mha(32, 2, add_bias_kv=True)
    _compare(ours, theirs, rng, rng.standard_normal((4, 2, 32)), None, False, {})
    assert ours.used is ours.attn   # the fused kernels took the 5 keys


def test_state_dict_both_ways_and_init(rng):
    """Keys and order as torch's (bias_k, bias_v after in_proj_bias, before out_proj), loaded each way; bias_k and
    bias_v drawn as torch's xavier_normal_ on (1, 1, E): std sqrt(1 / E)."""
    E = 64
    ours = nn.MultiheadAttention(E, 4, add_bias_kv=True, add_zero_attn=True, dtype=F64)
    theirs = torch.nn.MultiheadAttention(E, 4, add_bias_kv=True, add_zero_attn=True).double()
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "in_proj_weight", "in_proj_bias", "bias_k", "bias_v", "out_proj.weight", "out_proj.bias"]
    assert ours.bias_k.shape == (1, 1, E)
    draws = np.concatenate([nn.MultiheadAttention(E, 4, add_bias_kv=True).bias_k.data.get().ravel()
                            for _ in range(20)])
    assert np.std(draws) == pytest.approx(np.sqrt(1 / E), rel=0.1)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    np.testing.assert_array_equal(ours.bias_v.data.get(), theirs.bias_v.detach().numpy())
    copy_weights(nn.MultiheadAttention(E, 4, add_bias_kv=True, add_zero_attn=True, dtype=F64), theirs)
    assert ours.extra_repr().endswith("add_bias_kv=True, add_zero_attn=True")


def test_bad_mask_width_is_named():
    m = nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)
    x = np.zeros((2, 3, 8), np.float32)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(3, 4\) does not end with the keys' length 3"):
        m(x, x, x, attn_mask=np.zeros((3, 4), bool))


def test_tensor_parallel_split_refuses_them():
    """nn.distributed's head split does not cut bias_k / bias_v by head: it says so rather than run them whole."""
    from nn.distributed.attention_parallel import ParallelMultiheadAttention
    for kw in KINDS:
        with pytest.raises(NotImplementedError, match="not split over a tensor group"):
            ParallelMultiheadAttention.split(nn.MultiheadAttention(8, 2, **kw))
