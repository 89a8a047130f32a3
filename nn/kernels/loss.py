"""Launchers of nn/cuda/loss.cu: softmax cross-entropy, MSE and the running-loss accumulators, one function per
kernel; a loss's scale is read from device memory, so a captured step replays with the values of the moment."""
import numpy as np

import gpublas
from gpublas.core import reduction
from gpublas.runtime import device_checks, source
from gpublas.runtime.launch import ceil_div, geometry_1d, simulated

from .common import KERNELS, _same, get_kernel

# softmax_xent_forward's rows per thread on the sim, taken through each step together so that one row's
# max and sum chains overlap the others' exps (768 rows of 45, the LSTM example's loss: 206 -> 134 us of
# CPU; 4 rows a thread 149, 16 rows 130); one row per thread on a GPU
SIM_XENT_ROWS = source.int_defines("loss.cu", "XENT_", root=KERNELS)["XENT_ROWS"]
XENT_MAX_BLOCKS = 1 << 16  # a GPU's blocks (a block per row, grid-stride beyond)


def xent_geometry(N, C):
    """softmax_xent_forward's (grid, block): on the sim a thread per group of SIM_XENT_ROWS rows; on a GPU a block
    per row (at most XENT_MAX_BLOCKS), of the power of two threads from 32 to 256 that covers C."""
    if simulated():
        return geometry_1d(ceil_div(N, SIM_XENT_ROWS))
    return min(N, XENT_MAX_BLOCKS), min(256, max(32, 1 << (max(C, 1) - 1).bit_length()))


def softmax_xent_forward(logits, labels, dlogits, row_loss, scale=None, ignore_index=-100, site=0):
    """row_loss[n] = (logsumexp(logits[n]) - logits[n, label]) s; dlogits = (softmax - onehot) s, with s =
    scale[0] (a one-element device array; None: 1 / N); rows whose label is ignore_index get 0 and 0. Any
    other label outside [0, C) makes its row NaN and, with a `site` (gpublas.runtime.device_checks.site), raises
    IndexError at the host's next synchronization."""
    N, C = logits.shape
    if labels.dtype != np.int32 or labels.shape != (N,):
        raise ValueError(f"softmax_xent_forward: labels must be int32 ({N},), got {labels.dtype} {labels.shape}")
    dtype = _same("softmax_xent_forward", logits, dlogits, row_loss, scale)
    if scale is None:
        scale = gpublas.to_device(np.array([1.0 / max(N, 1)], dtype))
    get_kernel("loss", "softmax_xent_forward", dtype)(
        *xent_geometry(N, C), logits, labels, dlogits, row_loss, N, C, SIM_XENT_ROWS if simulated() else 1,
        int(ignore_index), scale, device_checks.record() if site else None, site)
    return row_loss


def xent_scale(labels, ignore_index, scale):
    """scale[0] = 1 / the number of labels not equal to ignore_index, on the device (no read-back)."""
    if labels.dtype != np.int32 or scale.size != 1:
        raise ValueError(f"xent_scale: labels must be int32 and scale one element, got {labels.dtype}, {scale.shape}")
    get_kernel("loss", "xent_scale", scale.dtype)(1, 256, labels, labels.size, int(ignore_index), scale)
    return scale


def mse_forward(pred, target, dpred, sq):
    """sq = (pred - target)^2 and dpred = 2 (pred - target) / n, elementwise."""
    if not pred.size == target.size == dpred.size == sq.size:
        raise ValueError(f"mse_forward: sizes {pred.shape}, {target.shape}, {dpred.shape}, {sq.shape} differ")
    get_kernel("loss", "mse_forward", _same("mse_forward", pred, target, dpred, sq))(
        *geometry_1d(pred.size), pred, target, dpred, sq, pred.size)
    return sq


def sum_scaled(x, out, scale=1.0):
    """out[0] = scale * sum(x): gpublas' grid-wide two-pass reduction (fixed summation order)."""
    _same("sum_scaled", x, out)
    if x.size == 0:
        return out.fill(0)
    reduction.launch_reduce(reduction.SUM, x, 1, x.size, 1, out, None, scale)
    return out


def loss_track(loss, acc, a, b):
    """acc[0] = a * acc[0] + b * loss[0] in double on the device (loss: a one-element float array, acc:
    float64): an epoch's sum (a = 1, b = batch size) or a smoothed loss (a = 0.9, b = 0.1) with no read-back."""
    if loss.size != 1 or acc.dtype != np.float64 or acc.size < 1:
        raise ValueError(f"loss_track: loss must have one element and acc be float64, got {loss.shape}, {acc.dtype}")
    get_kernel("loss", "loss_track", loss.dtype)(1, 1, loss, acc, a, b)
    return acc
