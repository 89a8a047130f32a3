"""MultiheadAttention and TransformerEncoderLayer against PyTorch in float64 with the same weights (through
state_dict, whose keys must be torch's, in order), finite differences, and bad input."""
import numpy as np
import pytest

import nn
from reference import assert_close, copy_weights

torch = pytest.importorskip("torch")
F64 = np.float64
E, H, B, T = 12, 3, 2, 5


pytestmark = pytest.mark.usefixtures("torch_seeded")


def _grads(ours, theirs, k):
    g = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, g[name].grad.numpy(), F64, k=k)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("E, H", [(12, 3), (32, 2)], ids=["D4-unfused", "D16-fused"])
def test_self_attention_is_torchs(rng, causal, E, H):
    ours = nn.MultiheadAttention(E, H, batch_first=True, dtype=F64)
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=True).double()
    copy_weights(ours, theirs)
    x, dy = rng.standard_normal((B, T, E)), rng.standard_normal((B, T, E))
    tx = torch.tensor(x, requires_grad=True)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64) if causal else None
    ty = theirs(tx, tx, tx, need_weights=False, attn_mask=mask, is_causal=causal)[0]
    ty.backward(torch.tensor(dy))
    assert_close(ours(x, x, x, need_weights=False, is_causal=causal)[0], ty.detach().numpy(), F64, k=E * T)
    assert_close(ours.backward(dy), tx.grad.numpy(), F64, k=E * T)
    _grads(ours, theirs, E * T)


@pytest.mark.parametrize("E, H", [(12, 3), (48, 2)], ids=["D4-unfused", "D24-fused"])
def test_cross_attention_is_torchs(rng, E, H):
    ours = nn.MultiheadAttention(E, H, batch_first=True, dtype=F64)
    theirs = torch.nn.MultiheadAttention(E, H, batch_first=True).double()
    copy_weights(ours, theirs)
    q, k, v, dy = (rng.standard_normal((B, n, E)) for n in (T, 7, 7, T))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ty = theirs(tq, tk, tv, need_weights=False)[0]
    ty.backward(torch.tensor(dy))
    assert_close(ours(q, k, v, need_weights=False)[0], ty.detach().numpy(), F64, k=E * 7)
    for got, want in zip(ours.backward(dy), (tq, tk, tv)):
        assert_close(got, want.grad.numpy(), F64, k=E * 7)
    _grads(ours, theirs, E * 7)


def test_init_and_sequence_first_layout(rng):
    m = nn.MultiheadAttention(8, 2, batch_first=False, dtype=F64)
    assert not m.in_proj_bias.data.get().any() and not m.out_proj.bias.data.get().any()
    x = rng.standard_normal((T, B, 8))
    m(x, x, x, need_weights=False)
    assert m.used is m.attn_unfused  # head dim 4: the fused kernels decline it
    assert np.abs(m.in_proj_weight.data.get()).max() <= np.sqrt(6 / (8 + 24))
    theirs = torch.nn.MultiheadAttention(8, 2).double()
    copy_weights(m, theirs)
    assert_close(m(x, x, x, need_weights=False)[0], theirs(*(torch.tensor(x),) * 3, need_weights=False)[0].detach().numpy(), F64, k=40)


class _Self(nn.Module):
    """x (B, T, E) -> self-attention's output."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(6, 2, batch_first=True, dtype=F64)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]

    def backward(self, dy):
        return self.mha.backward(dy)


class _Cross(nn.Module):
    """x (3, B, T, E) -> attention(x[0], x[1], x[2]), for gradcheck's one input."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(6, 2, batch_first=True, dtype=F64)

    def forward(self, x):
        return self.mha(x[0], x[1], x[2], need_weights=False)[0]

    def backward(self, dy):
        import gpublas
        return gpublas.stack(self.mha.backward(dy))


def test_finite_differences(rng):
    nn.gradcheck(_Self(), rng.standard_normal((2, 3, 6)))
    nn.gradcheck(_Cross(), rng.standard_normal((3, 1, 4, 6)))
    layer = nn.TransformerEncoderLayer(6, 2, 8, dropout=0.0, activation="gelu_tanh", norm_first=True, batch_first=True, dtype=F64)
    nn.gradcheck(layer, rng.standard_normal((1, 3, 6)), max_elements=12)


def test_encoder_layer_dropout_in_the_fused_attention(rng):
    """Training with dropout: the attention's dropout runs inside the fused kernels (no unfused fallback), and
    forward and backward agree with finite differences, every layer's mask replayed (offset and seed)."""
    layer = nn.TransformerEncoderLayer(32, 2, 8, dropout=0.3, activation="gelu", batch_first=True, dtype=F64)
    nn.gradcheck(layer, rng.standard_normal((1, 5, 32)), max_elements=12)
    assert layer.self_attn.used is layer.self_attn.attn
    assert layer.self_attn.attn.offset > 0 and layer.self_attn.attn.dropout_p == 0.3


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_is_torchs(rng, norm_first, activation):
    ours = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, activation=activation, norm_first=norm_first,
                                      batch_first=True, dtype=F64)
    theirs = torch.nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, activation=activation, norm_first=norm_first,
                                              batch_first=True).double()
    copy_weights(ours, theirs)
    x, dy = rng.standard_normal((B, T, E)), rng.standard_normal((B, T, E))
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    ty.backward(torch.tensor(dy))
    assert_close(ours(x), ty.detach().numpy(), F64, k=E * 16)
    assert_close(ours.backward(dy), tx.grad.numpy(), F64, k=E * 16)
    _grads(ours, theirs, E * 16)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"embed_dim \(10\) must be divisible by num_heads \(3\)"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match=r"expected query \(T, B, 4\) or \(T, 4\), got \(2, 3\)"):
        x = np.zeros((2, 3), np.float32)
        nn.MultiheadAttention(4, 2)(x, x, x)
    with pytest.raises(ValueError, match=r"activation must be 'relu', 'gelu' or 'gelu_tanh'"):
        nn.TransformerEncoderLayer(4, 2, activation="swish")
    with pytest.raises(RuntimeError, match=r"backward\(\) called before forward\(\)"):
        nn.TransformerEncoderLayer(4, 2).backward(np.zeros((1, 1, 4), np.float32))
