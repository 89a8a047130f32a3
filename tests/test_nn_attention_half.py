"""16-bit attention on the tensor cores (nn/cuda/attention_half.cu: mma.sync m16n8k16 and ldmatrix, run on the
simulator's warp-collective emulation) against a float64 reference computed from the same 16-bit inputs.

The bounds follow from where the kernels round. Forward: the scores, the softmax and its sums are float (relative
error ~2^-22 here, negligible), P = e^(s - m) is rounded to 16 bits once as the P V mma's operand and y once on
store: |y - y_ref| <= u P|V| + u |y| <= 2u P|V| (P the exact probabilities, u the unit roundoff: 2^-8 bfloat16,
2^-11 float16), plus float's share, taken as 2^-16 P|V|.
Backward: P is recomputed in float from the float logsumexp and rounded once as the dv product's operand, dv once
on store: |dv - dv_ref| <= 2u P^T|dy|. delta = rowsum(dy y) reads the rounded y (off by 2u P|V| at most, so delta
by 2u Md, Md = rowsum(|dy| P|V|)); dS = P (dP - delta) is rounded once as the dk and dq products' operand:
|dS - dS_ref| <= 2u P Md + u |dS| <= 3u MdS, MdS = P (|dy| |v|^T + Md); dk and dq add one rounding on store:
|dk - dk_ref| <= 4u scale MdS^T |q|, |dq - dq_ref| <= 4u scale MdS |k|. Float's share as above."""
import numpy as np
import pytest

import gpublas
import nn
from gpublas.blas import gemm_plan
from nn.kernels import attention as KA

UNIT = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}  # unit roundoff of round-to-nearest
FLOAT_SHARE = 2.0 ** -16

# (dtype, B, H, Tq, Tk, D, causal): T off the 64-query and 64-key tiles, Tq != Tk both ways, D = 16, 56 (padded to
# 64 in shared memory), 64 and 128 (the largest register tiles); few head dims (each is one simulator build)
CASES = [("bfloat16", 1, 2, 37, 37, 64, True), ("bfloat16", 1, 1, 70, 45, 16, False),
         ("bfloat16", 2, 1, 45, 70, 56, True), ("bfloat16", 1, 1, 45, 70, 128, True),
         ("float16", 1, 2, 70, 66, 64, False), ("float16", 1, 1, 66, 130, 64, True)]


def rounded(rng, dtype, *shape):
    return rng.standard_normal(shape).astype(dtype).astype(np.float64)


def reference(q, k, v, causal, scale):
    """y and the probabilities P, float64."""
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        Tq, Tk = s.shape[-2:]
        s = np.where(np.arange(Tk)[None, :] <= np.arange(Tq)[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p @ v, p


@pytest.mark.parametrize("dtype, B, H, Tq, Tk, D, causal", CASES)
def test_forward_within_the_rounding_bound(rng, sim_order, dtype, B, H, Tq, Tk, D, causal):
    dt = np.dtype(getattr(gpublas, dtype))
    q, k, v = (rounded(rng, dt, B, H, T, D) for T in (Tq, Tk, Tk))
    attn = nn.ScaledDotProductAttention(is_causal=causal)
    y = attn(*(gpublas.to_device(a.astype(dt)) for a in (q, k, v)))
    assert y.dtype == dt and y.shape == (B, H, Tq, D)
    want, p = reference(q, k, v, causal, D ** -0.5)
    bound = (2 * UNIT[dtype] + FLOAT_SHARE) * (p @ np.abs(v))
    err = np.abs(y.get().astype(np.float64) - want)
    assert (err <= bound).all(), f"max error {err.max():.3g}, worst err / bound {(err / bound).max():.3g}"
    lse = attn.saved[4].get().reshape(B, H, Tq)  # kept for backward: float32 logsumexp of the scaled scores
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * D ** -0.5
    if causal:
        s = np.where(np.arange(Tk)[None, :] <= np.arange(Tq)[:, None], s, -np.inf)
    want_lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, B, H, Tq, Tk, D, causal", CASES)
def test_gradients_within_the_rounding_bound(rng, sim_order, dtype, B, H, Tq, Tk, D, causal):
    dt = np.dtype(getattr(gpublas, dtype))
    q, k, v = (rounded(rng, dt, B, H, T, D) for T in (Tq, Tk, Tk))
    dy = rounded(rng, dt, B, H, Tq, D)
    attn = nn.ScaledDotProductAttention(is_causal=causal)
    attn(*(gpublas.to_device(a.astype(dt)) for a in (q, k, v)))
    got = [a.get().astype(np.float64) for a in attn.backward(gpublas.to_device(dy.astype(dt)))]
    scale = D ** -0.5
    y, p = reference(q, k, v, causal, scale)
    dp = dy @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dy * y).sum(-1, keepdims=True))
    want = [scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ dy]
    md = (np.abs(dy) * (p @ np.abs(v))).sum(-1, keepdims=True)
    mds = p * (np.abs(dy) @ np.swapaxes(np.abs(v), -1, -2) + md)
    u = UNIT[dtype]
    bounds = [(4 * u + FLOAT_SHARE) * scale * mds @ np.abs(k),
              (4 * u + FLOAT_SHARE) * scale * np.swapaxes(mds, -1, -2) @ np.abs(q),
              (2 * u + FLOAT_SHARE) * np.swapaxes(p, -1, -2) @ np.abs(dy)]
    for name, a, w, bound in zip(("dq", "dk", "dv"), got, want, bounds):
        assert a.shape == w.shape, name
        err = np.abs(a - w)
        assert (err <= bound).all(), f"{name}: max error {err.max():.3g}, worst err / bound {(err / bound).max():.3g}"


def test_16_bit_attention_needs_tensor_cores(monkeypatch):
    """A cuda device below compute capability 8.0 has no mma.m16n8k16: a named error, before any launch."""
    monkeypatch.setattr(gemm_plan, "target", lambda: ("sm_75", 75))
    x = gpublas.to_device(np.ones((1, 1, 4, 16), gpublas.bfloat16))
    with pytest.raises(KA.NoTensorCoresError, match=r"tensor cores .*8\.0 or newer.*7\.5"):
        nn.ScaledDotProductAttention()(x, x, x)
    with pytest.raises(KA.NoTensorCoresError, match="float16 attention"):
        nn.functional.scaled_dot_product_attention(*(gpublas.to_device(np.ones((1, 4, 16), gpublas.float16)),) * 3)

