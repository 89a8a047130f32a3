"""The transformer layers' `activation` given as PyTorch code gives it: a string, the functional relu / gelu
(torch's or nn's) or a ReLU() / GELU(approximate) instance (torch.nn's or nn's); float64 against torch's encoder
and decoder layers and Transformer with the same callable; a callable nn cannot fuse is refused by name."""
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

# (ours, torch's): the same activation as each library spells it
CALLABLES = {
    "torch_F.relu": (lambda: TF.relu, lambda: TF.relu),
    "torch_F.gelu": (lambda: TF.gelu, lambda: TF.gelu),
    "nn_F.relu": (lambda: F.relu, lambda: TF.relu),
    "nn_F.gelu": (lambda: F.gelu, lambda: TF.gelu),
    "torch_ReLU()": (lambda: torch.nn.ReLU(), lambda: torch.nn.ReLU()),
    "torch_GELU(tanh)": (lambda: torch.nn.GELU("tanh"), lambda: torch.nn.GELU("tanh")),
    "nn_GELU()": (lambda: nn.GELU(), lambda: torch.nn.GELU()),
    "nn_GELU(tanh)": (lambda: nn.GELU("tanh"), lambda: torch.nn.GELU("tanh")),
}
NAMES = {"torch_F.relu": "relu", "torch_F.gelu": "gelu", "nn_F.relu": "relu", "nn_F.gelu": "gelu",
         "torch_ReLU()": "relu", "torch_GELU(tanh)": "gelu_tanh", "nn_GELU()": "gelu", "nn_GELU(tanh)": "gelu_tanh"}


def _compare(ours, theirs, rng, inputs, k=FF * 20):
    """Forward and backward of both on the host arrays `inputs`: outputs, input and parameter gradients."""
    copy_weights(ours, theirs)
    tins = [torch.tensor(a, requires_grad=True) for a in inputs]
    ty = theirs(*tins)
    dy = rng.standard_normal(ty.shape)
    ty.backward(torch.tensor(dy))
    assert_close(ours(*inputs), ty.detach().numpy(), F64, k=k)
    grads = ours.backward(dy)
    for got, t in zip(grads if isinstance(grads, tuple) else (grads,), tins):
        assert_close(got, t.grad.numpy(), F64, k=k)
    g = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, g[name].grad.numpy(), F64, k=k)


@pytest.mark.parametrize("kind", list(CALLABLES))
@pytest.mark.parametrize("cls", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_layer_with_a_callable_activation_is_torchs(rng, kind, cls):
    ours_act, theirs_act = (make() for make in CALLABLES[kind])
    kw = dict(dim_feedforward=FF, dropout=0.0, batch_first=True)
    ours = getattr(nn, cls)(E, H, activation=ours_act, dtype=F64, **kw)
    theirs = getattr(torch.nn, cls)(E, H, activation=theirs_act, **kw).double()
    assert ours.activation == NAMES[kind]
    inputs = [rng.standard_normal((2, 5, E))] + ([rng.standard_normal((2, 3, E))] if "Decoder" in cls else [])
    _compare(ours, theirs, rng, inputs)


@pytest.mark.parametrize("kind", [k for k in CALLABLES if "F." in k])
def test_transformer_passes_a_functional_activation_to_every_layer(rng, kind):
    """nn.Transformer(activation=the functional relu / gelu): every layer's. (torch's TransformerDecoder deep-copies
    its layer, and a copy of one made with a module instance falls back to relu: functions only here.)"""
    ours_act, theirs_act = (make() for make in CALLABLES[kind])
    kw = dict(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=FF, dropout=0.0,
              batch_first=True)
    ours = nn.Transformer(**kw, activation=ours_act, dtype=F64)
    theirs = torch.nn.Transformer(**kw, activation=theirs_act).double()
    assert {m.activation for m in ours.modules() if hasattr(m, "linear1")} == {NAMES[kind]}
    _compare(ours, theirs, rng, [rng.standard_normal((2, 5, E)), rng.standard_normal((2, 3, E))])


@pytest.mark.parametrize("activation", [lambda x: x, TF.silu, torch.nn.SiLU(), torch.tanh, "swish", 3],
                         ids=["lambda", "F.silu", "SiLU()", "torch.tanh", "swish", "int"])
@pytest.mark.parametrize("cls", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_an_activation_nn_cannot_run_is_named(activation, cls):
    with pytest.raises(ValueError, match=rf"{cls}: activation must be 'relu', 'gelu' or 'gelu_tanh'.*cannot run"):
        getattr(nn, cls)(E, H, activation=activation)
