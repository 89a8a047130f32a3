"""nn.models.GPT as nanoGPT users call it: model(idx, targets) -> (logits, loss) and backward() from that loss,
dropout where nanoGPT's Block puts it, and generate with its KV cache (greedy: the same tokens as without it;
a 1-D prompt; past block_size the context slides)."""
import numpy as np
import pytest

import nn

F64 = np.float64
V, BS, L, H, C = 13, 8, 2, 2, 32


@pytest.fixture
def gpt():
    nn.manual_seed(0)
    return nn.models.GPT(V, BS, L, H, C, dtype=F64)


def test_targets_give_logits_and_loss(gpt, rng):
    idx, y = rng.integers(0, V, (2, 6)), rng.integers(0, V, (2, 6))
    y[0, :2] = -1                                  # ignored, as nanoGPT's ignore_index=-1
    logits, loss = gpt(idx, y)
    crit = nn.CrossEntropyLoss(ignore_index=-1)
    assert loss == pytest.approx(crit(logits, y), rel=1e-14)
    gpt.zero_grad()
    gpt.backward()
    grads = [p.grad.get().copy() for p in gpt.parameters()]
    gpt.zero_grad()
    gpt(idx)
    gpt.backward(crit.backward())
    for g, p in zip(grads, gpt.parameters()):
        np.testing.assert_array_equal(g, p.grad.get())
    assert gpt(idx).shape == (2, 6, V)
    with pytest.raises(RuntimeError, match="needs a forward with targets"):
        gpt.backward()


def test_dropout_is_nanogpts_block():
    """Dropout on the embeddings' sum, the attention probabilities and each residual branch's output; none
    between the GELU and the MLP's second Linear (nanoGPT's MLP has none there)."""
    model = nn.models.GPT(V, BS, 1, H, C, dropout=0.2)
    ps = {name: m.p if hasattr(m, "p") else m.dropout_p for name, m in model.named_modules()
          if type(m).__name__ in ("Dropout", "ScaledDotProductAttention", "UnfusedAttention")}
    assert ps == {"drop": 0.2, "h.0.self_attn.attn": 0.2, "h.0.self_attn.attn_unfused": 0.2, "h.0.dropout": 0.0,
                  "h.0.dropout1": 0.2, "h.0.dropout2": 0.2}
