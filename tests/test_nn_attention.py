"""nn.ScaledDotProductAttention (nn/cuda/attention.cu, fused FlashAttention-2 kernels) against PyTorch's
F.scaled_dot_product_attention in float64, forward and all three gradients; finite differences; float32
against the float64 result; the GPU's tiles (128 threads, cp.async stages) run on the simulator; peak memory
O(T); bad input named."""
import numpy as np
import pytest

import gpublas
import nn
from nn.kernels import attention as KA
from nn.layers.attention_unfused import UnfusedAttention
from reference import PackedAttention

torch = pytest.importorskip("torch")
F = torch.nn.functional

# (B, H, Tq, Tk, D, causal, scale): T across and off the tiles (16 .. 64), Tq != Tk both ways, D = 16 .. 128
CASES = [(1, 1, 5, 5, 16, False, None), (2, 3, 37, 37, 64, True, 0.3), (1, 2, 70, 45, 80, False, None),
         (1, 2, 45, 70, 128, True, None), (2, 1, 1, 9, 64, False, 1.7), (1, 1, 66, 66, 80, True, None)]


def inputs(rng, B, H, Tq, Tk, D):
    return [rng.standard_normal(s) for s in ((B, H, Tq, D), (B, H, Tk, D), (B, H, Tk, D), (B, H, Tq, D))]


def torch_sdpa(q, k, v, g, causal, scale):
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    y = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, scale=scale)
    y.backward(torch.tensor(g))
    return [t.detach().numpy() for t in (y, tq.grad, tk.grad, tv.grad)]


def ours(q, k, v, g, causal, scale, dtype=np.float64):
    layer = nn.ScaledDotProductAttention(is_causal=causal, scale=scale)
    dev = [gpublas.to_device(a.astype(dtype)) for a in (q, k, v, g)]
    y = layer(*dev[:3])
    return [a.get() for a in (y, *layer.backward(dev[3]))]


@pytest.mark.parametrize("B, H, Tq, Tk, D, causal, scale", CASES)
def test_float64_matches_torch(rng, B, H, Tq, Tk, D, causal, scale):
    q, k, v, g = inputs(rng, B, H, Tq, Tk, D)
    for name, got, want in zip(("y", "dq", "dk", "dv"), ours(q, k, v, g, causal, scale),
                               torch_sdpa(q, k, v, g, causal, scale)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=name)


def _gpu_tiles_cp_async(dtype, dp):
    """KA.gpu_tiles built with ATT_CP_ASYNC: att_load_rows' 16-byte cp.async copies with zero fill (which the
    simulator checks for alignment) instead of the simulator's whole-row copies."""
    t = KA.gpu_tiles(dtype, dp)
    tile_defines = t.defines
    t.defines = lambda dp: {**tile_defines(dp), "ATT_CP_ASYNC": 1}
    return t


# (dtype, tolerance, case): float64 D 64 and float32 D 128 causal (Tk > Tq: key blocks past the last query tile skip
# the loop), float32 at D <= 64 (BK 64) and float64 at D > 64 (BK 16), both non-causal
GPU_TILE_CASES = [(np.float64, 1e-10, CASES[1]), (np.float32, 2e-5, CASES[3]),
                  (np.float32, 2e-5, (1, 1, 37, 21, 48, False, None)),
                  (np.float64, 1e-10, (1, 1, 21, 37, 80, False, 0.5))]


def test_gpu_tiles_on_the_simulator(rng, monkeypatch):
    """The GPU's configuration (8 x 16 threads, cp.async stages, K row-major, ATT_CP_ASYNC's copies) built and run
    on the simulator: the code a GPU runs, against torch, float64 and float32; and its dropout build (ATT_DROPOUT)
    against the unfused path drawing the same mask."""
    monkeypatch.setattr(KA, "tiles", _gpu_tiles_cp_async)
    for dtype, tol, (B, H, Tq, Tk, D, causal, scale) in GPU_TILE_CASES:
        q, k, v, g = inputs(rng, B, H, Tq, Tk, D)
        for name, got, want in zip(("y", "dq", "dk", "dv"), ours(q, k, v, g, causal, scale, dtype),
                                   torch_sdpa(q, k, v, g, causal, scale)):
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{np.dtype(dtype)} D {D} {name}")
    fused = nn.ScaledDotProductAttention(is_causal=True, dropout_p=0.25, scale=0.6)
    unfused = UnfusedAttention(is_causal=True, dropout_p=0.25, scale=0.6)
    unfused.seed = fused.seed
    q, k, v, g = (gpublas.to_device(a) for a in inputs(rng, 1, 2, 19, 23, 16))
    for name, a, b in zip(("y", "dq", "dk", "dv"), [fused(q, k, v), *fused.backward(g)],
                          [unfused(q, k, v), *unfused.backward(g)]):
        np.testing.assert_allclose(a.get(), b.get(), rtol=1e-12, atol=1e-12, err_msg=f"dropout: {name}")


def test_tiled_form_with_whole_rows_on_the_simulator(rng, monkeypatch):
    """The tiled kernels as the simulator ran them before its own form (sim_tiled_tiles: 8 threads of whole rows, the
    d-major copies), float64 against torch, causal with Tk > Tq and not. The simulator's own form
    (attention_sim.cuh) is test_float64_matches_torch's: CASES cut its 64-key chunks (Tk = 70, 66) and its 64-row
    forward blocks (Tq = 70, 66)."""
    monkeypatch.setattr(KA, "tiles", KA.sim_tiled_tiles)
    for B, H, Tq, Tk, D, causal, scale in (CASES[3], (1, 1, 37, 21, 48, False, None)):
        q, k, v, g = inputs(rng, B, H, Tq, Tk, D)
        for name, got, want in zip(("y", "dq", "dk", "dv"), ours(q, k, v, g, causal, scale),
                                   torch_sdpa(q, k, v, g, causal, scale)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=f"D {D} {name}")


def test_strided_views_and_three_dims(rng):
    """Heads split by a view of (B, T, H, D) (MultiheadAttention's layout) give the contiguous result, also
    written through out= into a (B, T, H, D) buffer, and (B, T, D) inputs are one head."""
    B, T, H, D = 2, 19, 3, 24
    x = rng.standard_normal((B, T, 3, H, D))
    qkv = gpublas.to_device(x)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))  # (B, H, T, D) views
    g = rng.standard_normal((B, H, T, D))
    layer = nn.ScaledDotProductAttention(is_causal=True)
    got = [layer(q, k, v).get(), *(a.get() for a in layer.backward(gpublas.to_device(g)))]
    want = torch_sdpa(*(x[:, :, i].transpose(0, 2, 1, 3) for i in range(3)), g, True, None)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    merged = gpublas.zeros((B, T, H, D), np.float64)  # out: y written into a (B, T, H, D) buffer's view, bits kept
    y = layer(q, k, v, out=merged.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(merged.get().transpose(0, 2, 1, 3), got[0])
    assert y.get().tobytes() == got[0].tobytes()
    for a, b in zip(layer.backward(gpublas.to_device(g)), got[1:]):
        np.testing.assert_array_equal(a.get(), b)
    y3 = nn.functional.scaled_dot_product_attention(*(gpublas.to_device(x[:, :, i, 0]) for i in range(3)))
    want3 = F.scaled_dot_product_attention(*(torch.tensor(x[:, :, i, 0]) for i in range(3))).numpy()
    np.testing.assert_allclose(y3.get(), want3, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck(rng, causal):
    nn.gradcheck(PackedAttention(is_causal=causal, scale=0.7), rng.standard_normal((3, 1, 2, 6, 16)))


def test_float32_close_to_float64(rng):
    q, k, v, g = inputs(rng, 2, 2, 77, 77, 16)
    want = ours(q, k, v, g, True, None)
    for name, got, ref in zip(("y", "dq", "dk", "dv"), ours(q, k, v, g, True, None, np.float32), want):
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max(), err_msg=name)


def test_peak_memory_is_linear_in_T(rng):
    """T = 4096: forward + backward allocate well under a quarter of one T x T float32 matrix (64 MiB)."""
    T, D = 4096, 16
    q, k, v, g = (gpublas.to_device(rng.standard_normal((1, 1, T, D)).astype(np.float32)) for _ in range(4))
    layer = nn.ScaledDotProductAttention(is_causal=True)
    gpublas.reset_peak_memory_stats()
    base = gpublas.memory_stats()["bytes_in_use"]
    layer(q, k, v)
    layer.backward(g)
    peak = gpublas.memory_stats()["peak_bytes_in_use"] - base
    assert peak < T * T * 4 / 4, peak
    assert peak < 8 * T * D * 4, peak  # y, lse, delta, dq, dk, dv: a few (T, D) arrays


def test_bad_input_is_named(rng):
    attn = nn.ScaledDotProductAttention()
    a = gpublas.to_device(rng.standard_normal((1, 2, 5, 16)))
    with pytest.raises(ValueError, match="mismatched head dims"):
        attn(a, gpublas.to_device(rng.standard_normal((1, 2, 5, 24))), a)
    for D in (8, 12, 136):   # the fused kernels decline these: the unfused path runs them (issue 41)
        x = gpublas.to_device(rng.standard_normal((1, 1, 3, D)))
        assert attn(x, x, x).shape == (1, 1, 3, D) and attn.saved[0] == "unfused"
    with pytest.raises(TypeError, match="one float dtype"):
        attn(a, a.astype(np.float32), a)
    with pytest.raises(ValueError, match=r"\(B, H, Tq, D\)"):
        attn(a, gpublas.to_device(rng.standard_normal((1, 3, 5, 16))), a)
    with pytest.raises(RuntimeError, match="before forward"):
        nn.ScaledDotProductAttention().backward(a)
    with pytest.raises(ValueError, match="attn_mask of shape"):
        nn.functional.scaled_dot_product_attention(a, a, a, attn_mask=a)
    y = attn(a, a, a)
    with pytest.raises(ValueError, match="dy of shape"):
        attn.backward(y[:, :1])
