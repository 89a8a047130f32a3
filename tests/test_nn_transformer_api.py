"""PyTorch code run on nn's transformer layers gives PyTorch's numbers: signatures and defaults (batch_first=False),
MultiheadAttention's (out, weights), the encoder layer's src_mask slot, masks (boolean and additive, attn_mask and
key_padding_mask, through the fused kernels where they can be), unbatched input, kdim / vdim, and
scaled_dot_product_attention's masks and head dims; float64 against torch with the same weights."""
import inspect

import numpy as np
import pytest

import nn
from reference import assert_close, copy_weights

torch = pytest.importorskip("torch")
F64 = np.float64
pytestmark = pytest.mark.usefixtures("torch_seeded")

# nn's classes against torch's: every parameter's name, order and default (activation: nn takes 'relu' and the
# functional relu alike, torch's default being the function)
SIGNATURES = [("MultiheadAttention", "__init__"), ("MultiheadAttention", "forward"),
              ("TransformerEncoderLayer", "__init__"), ("TransformerEncoderLayer", "forward"),
              ("TransformerDecoderLayer", "__init__"), ("TransformerDecoderLayer", "forward")]


def _params(f):
    return [(p.name, "relu" if p.name == "activation" else p.default, p.kind)
            for p in inspect.signature(f).parameters.values()]


@pytest.mark.parametrize("cls, method", SIGNATURES, ids=[f"{c}.{m}" for c, m in SIGNATURES])
def test_signatures_are_torchs(cls, method):
    assert _params(getattr(getattr(nn, cls), method)) == _params(getattr(getattr(torch.nn, cls), method))


def _mha(E, H, **kw):
    ours = nn.MultiheadAttention(E, H, dtype=F64, **kw)
    theirs = torch.nn.MultiheadAttention(E, H, **kw).double()
    copy_weights(ours, theirs)
    return ours, theirs


def _t(a, grad=False):
    return torch.tensor(a, requires_grad=grad)


def test_default_layout_is_sequence_first_and_weights_are_returned(rng):
    """(T, B, E) by default, as torch; `out, w = mha(x, x, x)` unpacks the output and the averaged weights."""
    ours, theirs = _mha(8, 2)
    x = rng.standard_normal((5, 3, 8))
    out, w = ours(x, x, x)
    tout, tw = theirs(_t(x), _t(x), _t(x))
    assert out.shape == (5, 3, 8) and w.shape == (3, 5, 5)
    assert_close(out, tout.detach().numpy(), F64, k=40)
    assert_close(w, tw.detach().numpy(), F64, k=40)
    _, w = ours(x, x, x, average_attn_weights=False)
    assert_close(w, theirs(_t(x), _t(x), _t(x), average_attn_weights=False)[1].detach().numpy(), F64, k=40)
    assert ours(x, x, x, need_weights=False)[1] is None


def _check_masked(ours, theirs, rng, q, kv, used=None, **masks):
    tq, tkv = _t(q, True), _t(kv, True)
    tmasks = {k: torch.tensor(v) for k, v in masks.items()}
    ty = theirs(tq, tkv, tkv, need_weights=False, **tmasks)[0]
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    y = ours(q, kv, kv, need_weights=False, **masks)[0]
    assert_close(y, ty.detach().numpy(), F64, k=64)
    dq, dk, dv = ours.backward(dy)
    assert_close(dq, tq.grad.numpy(), F64, k=64)
    assert_close(dk + dv, tkv.grad.numpy(), F64, k=64)
    g = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, g[name].grad.numpy(), F64, k=64)
    if used is not None:
        assert ours.used is getattr(ours, used)


@pytest.mark.parametrize("E, H", [(8, 2), (32, 2)], ids=["D4-unfused", "D16-fused"])
@pytest.mark.parametrize("kind", ["bool", "float", "3d"])
def test_attn_mask_is_torchs(rng, E, H, kind):
    ours, theirs = _mha(E, H, batch_first=True)
    B, T, S = 2, 4, 6
    q, kv = rng.standard_normal((B, T, E)), rng.standard_normal((B, S, E))
    mask = rng.random((T, S)) < 0.3
    mask[:, 0] = False                               # every query keeps a key
    if kind == "float":
        mask = np.where(mask, -np.inf, rng.standard_normal((T, S)))
    if kind == "3d":
        mask = np.broadcast_to(mask, (B * H, T, S)).copy()
        mask[1, :, 2] = True
    _check_masked(ours, theirs, rng, q, kv, "attn_unfused", attn_mask=mask)


@pytest.mark.parametrize("padding", ["suffix", "scattered"])
def test_key_padding_mask_is_torchs(rng, padding):
    """A mask that pads each sequence at its end runs the fused kernels (each sequence on its own keys); any other
    the unfused path; both give torch's numbers, the causal mask beside them too."""
    ours, theirs = _mha(32, 2, batch_first=True)
    B, T = 3, 5
    x = rng.standard_normal((B, T, 32))
    kpm = np.arange(T)[None, :] >= np.array([5, 3, 1])[:, None]
    if padding == "scattered":
        kpm = np.array([[0, 1, 0, 0, 1], [0, 0, 0, 1, 0], [0, 1, 1, 0, 1]], bool)
    used = "attn" if padding == "suffix" else "attn_unfused"
    _check_masked(ours, theirs, rng, x, rng.standard_normal((B, T, 32)), used, key_padding_mask=kpm)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64).numpy()
    _check_masked(ours, theirs, rng, x, x.copy(), used, key_padding_mask=kpm, attn_mask=causal)


def test_unbatched_and_kdim_vdim(rng):
    ours, theirs = _mha(8, 2, kdim=5, vdim=3)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    q, k, v = rng.standard_normal((4, 8)), rng.standard_normal((6, 5)), rng.standard_normal((6, 3))
    tq, tk, tv = _t(q, True), _t(k, True), _t(v, True)
    ty, tw = theirs(tq, tk, tv)
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    y, w = ours(q, k, v)
    assert y.shape == (4, 8) and w.shape == (4, 6)
    assert_close(y, ty.detach().numpy(), F64, k=40)
    assert_close(w, tw.detach().numpy(), F64, k=40)
    for got, want in zip(ours.backward(dy), (tq, tk, tv)):
        assert_close(got, want.grad.numpy(), F64, k=40)


def test_encoder_layer_takes_src_mask_second(rng):
    """tel(x, mask) is torch's src_mask (not is_causal); defaults batch_first=False."""
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=F64)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).double()
    copy_weights(ours, theirs)
    x = rng.standard_normal((5, 2, 8))
    mask = rng.random((5, 5)) < 0.4
    np.fill_diagonal(mask, False)
    tx = _t(x, True)
    ty = theirs(tx, torch.tensor(mask))
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    assert_close(ours(x, mask), ty.detach().numpy(), F64, k=80)
    assert_close(ours.backward(dy), tx.grad.numpy(), F64, k=80)
    kpm = np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], bool)
    assert_close(ours(x, src_key_padding_mask=kpm), theirs.eval()(_t(x), src_key_padding_mask=torch.tensor(kpm))
                 .detach().numpy(), F64, k=80)


@pytest.mark.parametrize("D", [4, 16, 10])
@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
def test_sdpa_masks_and_head_dims(rng, D, kind):
    """attn_mask as torch's SDPA takes it (boolean True: takes part), broadcast over B and H; any head dim."""
    import nn.functional as F
    q, k, v = rng.standard_normal((2, 3, 4, D)), rng.standard_normal((2, 3, 6, D)), rng.standard_normal((2, 3, 6, D))
    mask, causal = None, False
    if kind == "bool":
        mask = rng.random((2, 1, 4, 6)) < 0.7
        mask[..., 0] = True
    elif kind == "float":
        mask = rng.standard_normal((4, 6))
    elif kind == "causal":
        causal = True
    want = torch.nn.functional.scaled_dot_product_attention(
        _t(q), _t(k), _t(v), attn_mask=None if mask is None else torch.tensor(mask), is_causal=causal)
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    assert_close(got, want.numpy(), F64, k=D * 6)


def test_sdpa_layer_takes_any_head_dim(rng):
    layer = nn.ScaledDotProductAttention(is_causal=True)
    q = rng.standard_normal((1, 2, 5, 12))
    nn.gradcheck(type("Self", (nn.Module,), {"forward": lambda s, x: layer(x, x, x),
                                             "backward": lambda s, dy: sum(layer.backward(dy))})(), q)


def test_bad_masks_are_named():
    m = nn.MultiheadAttention(8, 2, batch_first=True)
    x = np.zeros((2, 3, 8), np.float32)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 4\) does not fit"):
        m(x, x, x, attn_mask=np.zeros((4, 4), bool))
    with pytest.raises(ValueError, match=r"key_padding_mask must be \(B, S\) = \(2, 3\)"):
        m(x, x, x, key_padding_mask=np.zeros((3, 3), bool))
    with pytest.raises(TypeError, match="attn_mask must be a bool or float mask"):
        m(x, x, x, attn_mask=np.zeros((3, 3), np.int32))
