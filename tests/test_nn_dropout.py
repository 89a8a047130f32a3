"""Dropout: train/eval behaviour, mask statistics, the advancing device-side counter."""
import numpy as np
import pytest

import nn
from reference import assert_close


def test_dropout_eval_is_identity(rng):
    d = nn.Dropout(0.5).eval()
    x = rng.standard_normal((4, 5)).astype(np.float32)
    assert_close(d(x), x, np.float32)
    assert_close(d.backward(x), x, np.float32)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_mask_statistics_and_scaling(p):
    nn.manual_seed(7)
    d = nn.Dropout(p)
    n = 40000
    x = np.ones((n,), np.float32)
    y = d(x).get()
    kept = y != 0
    # a Binomial(n, 1 - p) count: within 5 standard deviations
    assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)
    assert_close(y[kept], np.full(int(kept.sum()), 1 / (1 - p)), np.float32)
    # no long-range structure: halves agree
    assert abs(kept[: n // 2].mean() - kept[n // 2:].mean()) < 10 * np.sqrt(p * (1 - p) / n)


def test_dropout_backward_uses_forward_mask(rng):
    d = nn.Dropout(0.5)
    x = rng.standard_normal((6, 7))
    y = d(x).get()
    dy = rng.standard_normal((6, 7))
    dx = d.backward(dy).get()
    assert_close(dx, np.where(y != 0, dy * 2.0, 0.0), np.float64)


def test_dropout_counter_advances_and_seed_repeats():
    nn.manual_seed(11)
    d = nn.Dropout(0.5)
    x = np.ones((1000,), np.float32)
    m1, m2 = d(x).get() != 0, d(x).get() != 0
    assert not np.array_equal(m1, m2)                        # fresh numbers each call
    nn.manual_seed(11)
    e = nn.Dropout(0.5)
    assert np.array_equal(e(x).get() != 0, m1)               # same seed, same masks
    assert np.array_equal(e(x).get() != 0, m2)


def test_dropout_bad_p():
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        nn.Dropout(1.0)
