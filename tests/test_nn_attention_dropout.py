"""Dropout inside the fused attention (nn/cuda/attention.cu and attention_half.cu built with ATT_DROPOUT): the
kernel's mask against a NumPy copy of dropout_rng.cuh's generator, its keep fraction within a binomial bound, the
forward and the three gradients equal to the unfused path (T x T probabilities, nn.Dropout's kernel) drawing the
same mask, finite differences with the mask replayed, the same seed giving the same bits, the counter moving on
by B H Tq Tk a call, and the 16-bit kernels within the rounding bounds of tests/test_nn_attention_half.py."""
import numpy as np
import pytest

import gpublas
import nn
from nn.layers.attention_unfused import UnfusedAttention
from reference import PackedAttention


def keep_mask(seed, offset, shape, p):
    """dropout_rng.cuh's dropout_keep for counters offset .. offset + prod(shape) - 1, in NumPy (uint64 wraps)."""
    c = np.uint64(offset) + np.arange(int(np.prod(shape)), dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = c * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed) * np.uint64(0xD1B54A32D192ED03) \
            + np.uint64(0x632BE59BD9B4E019)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return (u >= np.float32(p)).reshape(shape)


def kernel_mask(attn, B, H, Tq, Tk, dtype=np.float64):
    """The mask the fused forward draws, read back through the kernel itself: q = 0 makes every probability
    1 / Tk, and v = the identity's first Tk rows (Tk <= D = 16) puts key j's kept (scaled) probability in
    column j of y."""
    D = 16
    q = gpublas.zeros((B, H, Tq, D), dtype)
    v = gpublas.to_device(np.broadcast_to(np.eye(Tk, D), (B, H, Tk, D)).astype(dtype))
    y = attn(q, v, v).get()[..., :Tk]
    return y * Tk * (1 - attn.dropout_p)


def test_mask_is_the_generator_s_and_keeps_a_binomial_fraction():
    nn.manual_seed(7)
    B, H, Tq, Tk, p = 2, 3, 67, 13, 0.3
    attn = nn.ScaledDotProductAttention(dropout_p=p)
    attn.offset = 1000
    got = kernel_mask(attn, B, H, Tq, Tk)
    assert np.allclose(got, np.round(got), atol=1e-12) and set(np.unique(np.round(got))) <= {0.0, 1.0}
    want = keep_mask(attn.seed, 1000, (B, H, Tq, Tk), p)
    np.testing.assert_array_equal(np.round(got).astype(bool), want)
    n = want.size
    assert abs(want.sum() - (1 - p) * n) < 5 * np.sqrt(n * p * (1 - p)), want.mean()
    assert attn.offset == 1000 + n
    again = kernel_mask(attn, B, H, Tq, Tk)  # the next call: fresh numbers, from the moved counter
    np.testing.assert_array_equal(np.round(again).astype(bool), keep_mask(attn.seed, 1000 + n, (B, H, Tq, Tk), p))
    attn.eval()
    np.testing.assert_allclose(kernel_mask(attn, B, H, Tq, Tk), 1 - p)  # eval mode: every y = 1 / Tk


# (B, H, Tq, Tk, causal): T off the tiles, Tq != Tk both ways
SAME_MASK = [(2, 2, 37, 29, True), (1, 3, 20, 45, False)]


@pytest.mark.parametrize("B, H, Tq, Tk, causal", SAME_MASK)
def test_forward_and_backward_equal_the_unfused_path_with_the_same_mask(rng, B, H, Tq, Tk, causal):
    D, p = 16, 0.25
    fused = nn.ScaledDotProductAttention(is_causal=causal, dropout_p=p, scale=0.6)
    unfused = UnfusedAttention(is_causal=causal, dropout_p=p, scale=0.6)
    unfused.seed = fused.seed
    for call in range(2):  # the second call draws from the moved counter, in both
        q, k, v, g = (gpublas.to_device(rng.standard_normal(s)) for s in
                      ((B, H, Tq, D), (B, H, Tk, D), (B, H, Tk, D), (B, H, Tq, D)))
        got = [fused(q, k, v), *fused.backward(g)]
        want = [unfused(q, k, v), *unfused.backward(g)]
        assert unfused.mask.get().mean() < 0.9  # some were dropped
        for name, a, b in zip(("y", "dq", "dk", "dv"), got, want):
            np.testing.assert_allclose(a.get(), b.get(), rtol=1e-12, atol=1e-12, err_msg=f"call {call}: {name}")
    assert fused.offset == int(unfused.counter.get()[0]) == 2 * B * H * Tq * Tk


def test_gradcheck_with_a_fixed_seed(rng):
    """nn.gradcheck replays the attention's mask (its offset) for every evaluation."""
    nn.manual_seed(3)
    nn.gradcheck(PackedAttention(is_causal=True, scale=0.7, dropout_p=0.4), rng.standard_normal((3, 1, 2, 7, 16)))


def test_same_seed_same_bits(rng):
    x = [gpublas.to_device(rng.standard_normal((1, 2, 33, 16))) for _ in range(4)]
    runs = []
    for _ in range(2):
        nn.manual_seed(11)
        attn = nn.ScaledDotProductAttention(is_causal=True, dropout_p=0.5)
        runs.append([a.get() for a in (attn(*x[:3]), *attn.backward(x[3]))])
    same_bits(*runs)
    nn.manual_seed(12)
    other = nn.ScaledDotProductAttention(is_causal=True, dropout_p=0.5)(*x[:3]).get()
    assert not np.array_equal(other, runs[0][0])
    y = nn.functional.scaled_dot_product_attention(*x[:3], dropout_p=0.5)  # functional: always drops
    assert not np.allclose(y.get(), nn.functional.scaled_dot_product_attention(*x[:3]).get())


def same_bits(got, want):
    """y, dk and dv bit for bit; dq within rounding (key blocks add into it by atomics, in no fixed order)."""
    for name, a, b in zip(("y", "dq", "dk", "dv"), got, want):
        if name == "dq":
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_graph_replays_draw_as_eager_calls(rng):
    """The offset is read and advanced on the device: each replay of a captured step draws the next mask,
    the one an eager call from the same offset draws."""
    x = [gpublas.to_device(rng.standard_normal((1, 2, 20, 16))) for _ in range(4)]
    attn = nn.ScaledDotProductAttention(dropout_p=0.3)
    attn(*x[:3])
    attn.backward(x[3])  # compiled before the capture
    n = 2 * 20 * 20
    with gpublas.graph() as g:
        y = attn(*x[:3])
        grads = attn.backward(x[3])
    replays = []
    for _ in range(2):
        g.replay()
        replays.append([a.get() for a in (y, *grads)])
    assert attn.offset == 3 * n
    for got, offset in zip(replays, (n, 2 * n)):
        attn.offset = offset
        same_bits(got, [attn(*x[:3]).get(), *(a.get() for a in attn.backward(x[3]))])
    assert not np.array_equal(replays[0][0], replays[1][0])


def test_bad_dropout_p():
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
        nn.ScaledDotProductAttention(dropout_p=1.0)
    x = gpublas.zeros((1, 1, 3, 16), np.float32)
    with pytest.raises(ValueError, match="dropout_p"):
        nn.functional.scaled_dot_product_attention(x, x, x, dropout_p=-0.1)


def test_16_bit_within_the_rounding_bound(rng):
    """bfloat16 with dropout against float64 from the same 16-bit inputs and the generator's mask M (scaled by
    r = 1 / (1 - p)): the bounds of tests/test_nn_attention_half.py with P replaced by r P o M where the product
    reads the dropped probabilities (y, dv and dP's share of dS)."""
    B, H, Tq, Tk, D, causal, p, u, fs = 1, 2, 37, 45, 16, True, 0.2, 2.0 ** -8, 2.0 ** -16
    dt = np.dtype(gpublas.bfloat16)
    q, k, v = (rng.standard_normal((B, H, T, D)).astype(dt).astype(np.float64) for T in (Tq, Tk, Tk))
    dy = rng.standard_normal((B, H, Tq, D)).astype(dt).astype(np.float64)
    attn = nn.ScaledDotProductAttention(is_causal=causal, dropout_p=p)
    y = attn(*(gpublas.to_device(a.astype(dt)) for a in (q, k, v))).get().astype(np.float64)
    grads = [a.get().astype(np.float64) for a in attn.backward(gpublas.to_device(dy.astype(dt)))]
    r, scale = 1 / (1 - p), D ** -0.5
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    s = np.where(np.arange(Tk)[None, :] <= np.arange(Tq)[:, None], s, -np.inf)
    P = np.exp(s - s.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    Pm = r * P * keep_mask(attn.seed, 0, P.shape, p)
    T = np.swapaxes
    want_y = Pm @ v
    err = np.abs(y - want_y)
    bound = (2 * u + fs) * (Pm @ np.abs(v))
    assert (err <= bound).all(), f"y: worst err / bound {(err / bound).max():.3g}"
    ds = P * (r * keep_mask(attn.seed, 0, P.shape, p) * (dy @ T(v, -1, -2)) - (dy * want_y).sum(-1, keepdims=True))
    md = (np.abs(dy) * (Pm @ np.abs(v))).sum(-1, keepdims=True)
    mds = Pm * (np.abs(dy) @ T(np.abs(v), -1, -2)) + P * md
    want = [scale * ds @ k, scale * T(ds, -1, -2) @ q, T(Pm, -1, -2) @ dy]
    bounds = [(4 * u + fs) * scale * mds @ np.abs(k), (4 * u + fs) * scale * T(mds, -1, -2) @ np.abs(q),
              (2 * u + fs) * T(Pm, -1, -2) @ np.abs(dy)]
    for name, a, w, bound in zip(("dq", "dk", "dv"), grads, want, bounds):
        err = np.abs(a - w)
        assert (err <= bound).all(), f"{name}: max error {err.max():.3g}, worst err / bound {(err / bound).max():.3g}"
