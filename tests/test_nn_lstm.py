"""nn.LSTM against a NumPy LSTM with the same weights; state passing; batch_first."""
import numpy as np
import pytest

import nn
from nn.reference import layers as ref
from reference import assert_close


def _weights(lstm):
    sd = lstm.state_dict()
    return [tuple(sd[f"{n}_l{k}"].astype(np.float64) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
            for k in range(lstm.num_layers)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layers, with_state", [(1, False), (2, True)])
def test_lstm_forward_matches_numpy(rng, dtype, layers, with_state):
    nn.manual_seed(3)
    T, N, I, H = 4, 3, 5, 6
    lstm = nn.LSTM(I, H, num_layers=layers, dtype=dtype)
    x = rng.standard_normal((T, N, I)).astype(dtype)
    h0 = rng.standard_normal((layers, N, H)).astype(dtype) if with_state else np.zeros((layers, N, H), dtype)
    c0 = rng.standard_normal((layers, N, H)).astype(dtype) if with_state else np.zeros((layers, N, H), dtype)
    out, (hn, cn) = lstm(x, (h0, c0) if with_state else None)
    want_out, want_h, want_c = ref.lstm(x, _weights(lstm), h0, c0)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else {}
    assert_close(out, want_out, dtype, k=I + H, **tol)
    assert_close(hn, want_h, dtype, k=I + H, **tol)
    assert_close(cn, want_c, dtype, k=I + H, **tol)


def test_lstm_batch_first_matches_time_major(rng):
    nn.manual_seed(4)
    a = nn.LSTM(3, 4, dtype=np.float64)
    b = nn.LSTM(3, 4, batch_first=True, dtype=np.float64)
    b.load_state_dict(a.state_dict())
    x = rng.standard_normal((5, 2, 3))                       # (T, N, I)
    out_a, (h_a, _) = a(x)
    out_b, (h_b, _) = b(np.ascontiguousarray(x.transpose(1, 0, 2)))
    assert out_b.shape == (2, 5, 4)
    assert_close(out_b, out_a.get().transpose(1, 0, 2), np.float64)
    assert_close(h_b, h_a.get(), np.float64)
    d = rng.standard_normal((5, 2, 4))
    dx_a = a.backward(d).get()
    dx_b = b.backward(np.ascontiguousarray(d.transpose(1, 0, 2))).get()
    assert_close(dx_b, dx_a.transpose(1, 0, 2), np.float64)


def test_lstm_state_carries_across_calls(rng):
    """Running T steps at once equals running them in two chunks, passing (h, c) along."""
    nn.manual_seed(5)
    lstm = nn.LSTM(2, 3, num_layers=2, dtype=np.float64)
    x = rng.standard_normal((6, 2, 2))
    full, (h, c) = lstm(x)
    first, state = lstm(x[:4])
    second, (h2, c2) = lstm(x[4:], state)
    assert_close(np.concatenate([first.get(), second.get()]), full.get(), np.float64)
    assert_close(h2, h.get(), np.float64)
    assert_close(c2, c.get(), np.float64)


def test_lstm_bad_input(rng):
    lstm = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"LSTM\(3, 4.*expected input \(T, N, I\) with I = 3, got \(2, 2, 5\)"):
        lstm(np.zeros((2, 2, 5)))
    with pytest.raises(ValueError, match=r"expected state \(h0, c0\) of shape \(1, 2, 4\)"):
        lstm(np.zeros((2, 2, 3)), (np.zeros((1, 3, 4)), np.zeros((1, 2, 4))))
