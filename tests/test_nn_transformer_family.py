"""The rest of the transformer family against torch in float64: TransformerDecoderLayer, TransformerEncoder,
TransformerDecoder, Transformer (forward, backward, every parameter's gradient, state_dict both ways), ModuleList,
Identity, Softmax, LogSoftmax (finite differences too) and nn.functional's names."""
import inspect

import numpy as np
import pytest

import nn
import nn.functional as F
from reference import assert_close, copy_weights

torch = pytest.importorskip("torch")
TF = torch.nn.functional
F64 = np.float64
pytestmark = pytest.mark.usefixtures("torch_seeded")
E, H, FF = 8, 2, 16


def _params(f):
    return [(p.name, "relu" if p.name == "activation" else p.default, p.kind)
            for p in inspect.signature(f).parameters.values()]


@pytest.mark.parametrize("cls", ["TransformerEncoder", "TransformerDecoder", "Transformer", "Softmax", "LogSoftmax",
                                 "ModuleList", "Identity"])
def test_signatures_are_torchs(cls):
    for method in ("__init__", "forward"):
        ours, theirs = _params(getattr(getattr(nn, cls), method)), _params(getattr(getattr(torch.nn, cls), method))
        if cls != "ModuleList" or method != "forward":
            assert ours == theirs, method


def _both_ways(ours, theirs, rng):
    """ours -> theirs (copy_weights), then theirs' perturbed weights back into ours."""
    copy_weights(ours, theirs)
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(torch.tensor(0.01 * rng.standard_normal(tuple(p.shape))))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})


def _grads(ours, theirs, k):
    g = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, g[name].grad.numpy(), F64, k=k)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_is_torchs(rng, norm_first):
    kw = dict(dropout=0.0, norm_first=norm_first, batch_first=True)
    ours = nn.TransformerDecoderLayer(E, H, FF, dtype=F64, **kw)
    theirs = torch.nn.TransformerDecoderLayer(E, H, FF, **kw).double()
    _both_ways(ours, theirs, rng)
    tgt, mem = rng.standard_normal((2, 4, E)), rng.standard_normal((2, 6, E))
    causal = nn.Transformer.generate_square_subsequent_mask(4, dtype=F64)
    mkpm = np.arange(6)[None, :] >= np.array([6, 4])[:, None]
    tt, tm = torch.tensor(tgt, requires_grad=True), torch.tensor(mem, requires_grad=True)
    ty = theirs(tt, tm, tgt_mask=torch.tensor(causal), memory_key_padding_mask=torch.tensor(mkpm), tgt_is_causal=True)
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    y = ours(tgt, mem, tgt_mask=causal, memory_key_padding_mask=mkpm, tgt_is_causal=True)
    assert_close(y, ty.detach().numpy(), F64, k=FF * 6)
    dt, dm = ours.backward(dy)
    assert_close(dt, tt.grad.numpy(), F64, k=FF * 6)
    assert_close(dm, tm.grad.numpy(), F64, k=FF * 6)
    _grads(ours, theirs, FF * 6)


def test_encoder_and_decoder_stacks_are_torchs(rng):
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, dtype=F64)
    ours = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E, dtype=F64))
    theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0), 2,
                                         norm=torch.nn.LayerNorm(E), enable_nested_tensor=False).double()
    assert isinstance(ours.layers, nn.ModuleList) and ours.layers[0] is not ours.layers[1]
    _both_ways(ours, theirs, rng)
    x = rng.standard_normal((5, 2, E))     # (T, B, E): batch_first=False
    kpm = np.array([[0, 0, 0, 1, 1], [0] * 5], bool)
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx, src_key_padding_mask=torch.tensor(kpm))
    dy = rng.standard_normal(ty.shape)
    dy[3:, 0] = 0                          # torch's fast path zeroes padded outputs; the slow path does not
    ty.backward(torch.tensor(dy))
    y = ours(x, src_key_padding_mask=kpm)
    assert_close(y.get()[:3], ty.detach().numpy()[:3], F64, k=FF * 10)
    assert_close(ours.backward(dy), tx.grad.numpy(), F64, k=FF * 10)
    _grads(ours, theirs, FF * 10)


def test_transformer_is_torchs(rng):
    kw = dict(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=FF, dropout=0.0,
              batch_first=True)
    ours, theirs = nn.Transformer(**kw, dtype=F64), torch.nn.Transformer(**kw).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _both_ways(ours, theirs, rng)
    src, tgt = rng.standard_normal((2, 6, E)), rng.standard_normal((2, 4, E))
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=F64)
    ts, tt = torch.tensor(src, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    ty = theirs(ts, tt, tgt_mask=torch.tensor(mask), tgt_is_causal=True)
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    assert_close(ours(src, tgt, tgt_mask=mask, tgt_is_causal=True), ty.detach().numpy(), F64, k=FF * 20)
    dsrc, dtgt = ours.backward(dy)
    assert_close(dsrc, ts.grad.numpy(), F64, k=FF * 20)
    assert_close(dtgt, tt.grad.numpy(), F64, k=FF * 20)
    _grads(ours, theirs, FF * 20)


@pytest.mark.parametrize("cls, dim", [("Softmax", -1), ("Softmax", 1), ("LogSoftmax", -1), ("LogSoftmax", None)])
def test_softmax_modules(rng, cls, dim):
    x, dy = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    ours, theirs = getattr(nn, cls)(dim), getattr(torch.nn, cls)(dim)
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    ty.backward(torch.tensor(dy))
    assert_close(ours(x), ty.detach().numpy(), F64, k=8)
    assert_close(ours.backward(dy), tx.grad.numpy(), F64, k=8)
    nn.gradcheck(ours, x)


def test_identity_and_module_list():
    ident = nn.Identity(3, foo=1)
    assert ident(np.ones(2)) is not None and ident.backward("dy") == "dy"
    ml = nn.ModuleList([nn.Dense(2, 3), nn.ReLU()])
    ml.append(nn.Dense(3, 1)).insert(1, nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Dense", "Identity", "ReLU", "Dense"] and len(ml[1:]) == 3
    assert list(ml.state_dict()) == ["0.weight", "0.bias", "3.weight", "3.bias"]
    with pytest.raises(TypeError, match="not an nn.Module"):
        ml.append(3)


def test_functional_is_torchs(rng):
    x, w, b = rng.standard_normal((2, 3, 5)), rng.standard_normal((4, 5)), rng.standard_normal(4)
    t = torch.tensor
    pairs = [(F.linear(x, w, b), TF.linear(t(x), t(w), t(b))), (F.linear(x, w), TF.linear(t(x), t(w))),
             (F.relu(x), TF.relu(t(x))), (F.gelu(x), TF.gelu(t(x))),
             (F.gelu(x, approximate="tanh"), TF.gelu(t(x), approximate="tanh")),
             (F.softmax(x, dim=1), TF.softmax(t(x), dim=1)), (F.log_softmax(x, dim=-1), TF.log_softmax(t(x), dim=-1)),
             (F.layer_norm(x, (5,), w[0], b[:1].repeat(5)), TF.layer_norm(t(x), (5,), t(w[0]), t(b[:1].repeat(5)))),
             (F.layer_norm(x, (3, 5)), TF.layer_norm(t(x), (3, 5))),
             (F.dropout(x, 0.3, training=False), t(x)),
             (F.embedding(np.array([[1, 3], [0, 1]]), w), TF.embedding(t(np.array([[1, 3], [0, 1]])), t(w)))]
    for i, (got, want) in enumerate(pairs):
        assert_close(got, want.numpy(), F64, k=16)
    labels = np.array([1, 0, 3, -100, 2, 2])
    logits = x.reshape(6, 5)
    assert_close(F.cross_entropy(logits, labels).get()[0], TF.cross_entropy(t(logits), t(labels)).item(), F64, k=8)
    kept = F.dropout(np.ones((50, 40)), 0.25).get()
    assert set(np.unique(kept)) <= {0.0, 1 / 0.75} and 0.2 < (kept == 0).mean() < 0.3


@pytest.mark.parametrize("name", ["relu", "softmax", "log_softmax", "layer_norm", "dropout", "cross_entropy",
                                  "embedding"])
def test_functional_signatures_are_torchs(name):
    """Names, order and defaults (torch's linear, gelu and scaled_dot_product_attention are builtins without
    a signature to read: their arguments are those of torch's documentation)."""
    def params(f):
        return [(p.name, p.default) for p in inspect.signature(f).parameters.values()]
    assert params(getattr(F, name)) == params(getattr(TF, name))


def test_unbatched_decoder_layer_is_torchs(rng):
    """(T, E) target and (S, E) memory, as torch's unbatched input."""
    ours = nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation="gelu", dtype=F64)
    theirs = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation="gelu").double()
    copy_weights(ours, theirs)
    tgt, mem = rng.standard_normal((3, E)), rng.standard_normal((5, E))
    tt, tm = torch.tensor(tgt, requires_grad=True), torch.tensor(mem, requires_grad=True)
    ty = theirs(tt, tm, memory_key_padding_mask=torch.tensor([False] * 4 + [True]))
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    y = ours(tgt, mem, memory_key_padding_mask=np.array([False] * 4 + [True]))
    assert y.shape == (3, E)
    assert_close(y, ty.detach().numpy(), F64, k=FF * 6)
    for got, want in zip(ours.backward(dy), (tt, tm)):
        assert_close(got, want.grad.numpy(), F64, k=FF * 6)
