"""Attention masks as PyTorch takes them, turned into what nn's attention paths take.

PyTorch has two conventions for a boolean mask: nn.MultiheadAttention's (and the Transformer layers') True
means "may not attend" (masked), torch.nn.functional.scaled_dot_product_attention's True means "takes part".
A float mask is added to the scores in both. Here every mask becomes one additive float device array
(0 or -inf for a boolean one) broadcastable to the scores (B, H, Tq, Tk), built on the device (a host mask is
copied once, then converted by gpublas.where).

Two masks need no T x T array at all, so the fused kernels run them: a causal mask (is_causal, or a mask
from the host equal to generate_square_subsequent_mask's), and a key-padding mask from the host that pads
each sequence at its end (keys 0 .. L_b - 1 kept, L_b >= 1): the fused kernels then run each sequence of the
batch on its first L_b keys (`lengths`). Masks already on the device are never read back (graphs capture
them): they take the unfused path.
"""
import numpy as np

import gpublas
from gpublas.runtime import dtypes


def _host(mask):
    """The mask as a host ndarray, or None when it lives on the device."""
    return None if isinstance(mask, gpublas.DeviceArray) else np.asarray(mask)


def _kind(mask, what, name):
    dt = mask.dtype
    if dt == np.bool_:
        return "bool"
    if dtypes.is_float(dt):
        return "float"
    raise TypeError(f"{what}: {name} must be a bool or float mask, got {dt}")


def additive(mask, dtype, what, name, true_masks=True):
    """mask (bool or float, host or device) as an additive device array of `dtype` with the mask's shape: a
    boolean True becomes -inf where true_masks (MultiheadAttention's convention), 0 where not (SDPA's)."""
    host = _host(mask)
    kind = _kind(mask if host is None else host, what, name)
    if kind == "float":
        if host is not None:
            return gpublas.to_device(np.ascontiguousarray(host, dtype=dtype))
        return mask if mask.dtype == dtype else mask.astype(dtype)
    dev = gpublas.to_device(np.ascontiguousarray(host)) if host is not None else mask
    if not true_masks:
        dev = gpublas.logical_not(dev)
    return gpublas.where(dev, -np.inf, gpublas.zeros(dev.shape, dtype))


def _causal_pattern(Tq, Tk):
    return np.arange(Tk)[None, :] > np.arange(Tq)[:, None]


def is_causal(mask, Tq, Tk, true_masks=True):
    """Whether a host mask is the (Tq, Tk) causal mask (PyTorch's top-left: key j > query i masked), in its
    boolean or its additive (0 / -inf) form. A device mask: False (never read back)."""
    host = _host(mask)
    if host is None or host.shape[-2:] != (Tq, Tk) or host.size != Tq * Tk:
        return False
    host = host.reshape(Tq, Tk)
    above = _causal_pattern(Tq, Tk)
    if host.dtype == np.bool_:
        return bool(np.array_equal(host, above if true_masks else ~above))
    if not dtypes.is_float(host.dtype):
        return False
    h = host.astype(np.float64)
    return bool(np.all(np.isneginf(h[above])) and np.all(h[~above] == 0))


def suffix_lengths(kpm, B, Tk):
    """The kept keys' counts [L_b] of a host key-padding mask (B, Tk) (True or -inf: padded) that pads each
    sequence at its end only and keeps at least one key, else None."""
    host = _host(kpm)
    if host is None or host.shape != (B, Tk):
        return None
    if host.dtype == np.bool_:
        padded = host
    elif dtypes.is_float(host.dtype):
        h = host.astype(np.float64)
        if not np.all((h == 0) | np.isneginf(h)):
            return None
        padded = np.isneginf(h)
    else:
        return None
    lengths = (~padded).sum(axis=1)
    if lengths.min() < 1 or not np.array_equal(padded, np.arange(Tk)[None, :] >= lengths[:, None]):
        return None
    return [int(n) for n in lengths]


def attn_mask_4d(mask, B, H, Tq, Tk, dtype, what, true_masks=True):
    """An attention mask (Tq, Tk), (B * H, Tq, Tk) (MultiheadAttention's 3-D form) or anything broadcastable to
    (B, H, Tq, Tk) (SDPA's), as an additive 4-D device array broadcastable to (B, H, Tq, Tk)."""
    shape = tuple(mask.shape)
    if len(shape) == 3 and shape == (B * H, Tq, Tk) and true_masks:
        shape4 = (B, H, Tq, Tk)
    else:
        shape4 = (1,) * (4 - len(shape)) + shape
        if len(shape) > 4 or any(s not in (1, t) for s, t in zip(shape4, (B, H, Tq, Tk))):
            raise ValueError(f"{what}: attn_mask of shape {shape} does not fit the scores (B={B}, H={H}, Tq={Tq}, "
                             f"Tk={Tk}): expected (Tq, Tk), (B * num_heads, Tq, Tk) or a shape broadcastable to "
                             f"(B, H, Tq, Tk)")
    return additive(mask, dtype, what, "attn_mask", true_masks).reshape(shape4)


def padding_mask_4d(kpm, B, Tk, dtype, what):
    """A key-padding mask (B, Tk) (True or -inf: padded) as an additive (B, 1, 1, Tk) device array."""
    if tuple(kpm.shape) != (B, Tk):
        raise ValueError(f"{what}: key_padding_mask must be (B, S) = ({B}, {Tk}), got {tuple(kpm.shape)}")
    return additive(kpm, dtype, what, "key_padding_mask").reshape(B, 1, 1, Tk)


def _pad_keys(mask, extra, Tk, what, name):
    """mask (..., Tk) (host or device, bool or float) with `extra` columns that mask nothing (False or 0) after its
    last: PyTorch's F.pad(mask, (0, 1)) per extra key."""
    if mask is None:
        return None
    if tuple(mask.shape)[-1:] != (Tk,):
        raise ValueError(f"{what}: {name} of shape {tuple(mask.shape)} does not end with the keys' length {Tk}")
    host = _host(mask)
    if host is not None:
        return np.pad(host, [(0, 0)] * (host.ndim - 1) + [(0, extra)])
    out = gpublas.zeros(tuple(mask.shape[:-1]) + (Tk + extra,), mask.dtype)
    out[..., :Tk] = mask
    return out


def extend_keys(attn_mask, key_padding_mask, is_causal, need_weights, extra, Tq, Tk, what):
    """The masks of MultiheadAttention's add_bias_kv / add_zero_attn, whose `extra` key columns (the bias row, the
    zero row) follow the Tk keys, as PyTorch's multi_head_attention_forward makes them: (attn_mask,
    key_padding_mask, is_causal) over Tk + extra keys. Where PyTorch passes is_causal on to SDPA instead of the
    mask (no key_padding_mask, need_weights False) the causal flag stays, top-left over all Tk + extra keys (so
    no query reaches the extra ones); elsewhere the masks get columns that mask nothing (is_causal alone standing
    for the causal attn_mask it hints at)."""
    if is_causal and key_padding_mask is None and not need_weights:
        return None, None, True
    if is_causal and attn_mask is None:
        attn_mask = _causal_pattern(Tq, Tk)
    return (_pad_keys(attn_mask, extra, Tk, what, "attn_mask"),
            _pad_keys(key_padding_mask, extra, Tk, what, "key_padding_mask"), False)


class Plan:
    """How one attention call runs: causal (the kernels' own mask), lengths (fused, each sequence on its first
    L_b keys) and mask (an additive device array for the unfused path, or None)."""

    def __init__(self, causal=False, lengths=None, mask=None):
        self.causal, self.lengths, self.mask = causal, lengths, mask

    @property
    def fusable(self):
        return self.mask is None


def plan(attn_mask, key_padding_mask, is_causal, B, H, Tq, Tk, dtype, what, fused_ok=True):
    """The Plan of MultiheadAttention's masks: is_causal (a hint that attn_mask is causal, as PyTorch's, or the
    causal mask alone) or a causal host attn_mask: the kernels' causal flag; a host key-padding mask that pads
    at the end: lengths, where the fused kernels run (fused_ok); everything else merged into one additive mask."""
    causal = bool(is_causal) or (attn_mask is not None and is_causal_host(attn_mask, Tq, Tk))
    mask = None
    if attn_mask is not None and not causal:
        mask = attn_mask_4d(attn_mask, B, H, Tq, Tk, dtype, what)
    lengths = None
    if key_padding_mask is not None:
        lengths = suffix_lengths(key_padding_mask, B, Tk) if fused_ok and mask is None else None
        if lengths is None:
            kpm = padding_mask_4d(key_padding_mask, B, Tk, dtype, what)
            mask = kpm if mask is None else mask + kpm
    return Plan(causal, lengths, mask)


def is_causal_host(mask, Tq, Tk):
    return is_causal(mask, Tq, Tk, true_masks=True)
