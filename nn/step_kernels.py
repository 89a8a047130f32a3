"""Launchers for the kernels of a training step's end: the losses (nn/cuda/loss.cu) and the optimizers and
gradient clipping (nn/cuda/optim.cu), one function per kernel, as nn/kernels.py has for the layers.
What changes from step to step (the learning rate, the step count, the clipping coefficient, a running
loss) is read from device memory, so a captured step replays with the values of the moment."""
import numpy as np

import gpublas
from gpublas import device_checks, reduction, source
from gpublas.launch import ceil_div, geometry_1d, simulated

from .kernels import KERNELS, _same, get_kernel, in_order_geometry

# softmax_xent_forward's rows per thread on the sim, taken through each step together so that one row's
# max and sum chains overlap the others' exps (768 rows of 45, the LSTM example's loss: 206 -> 134 us of
# CPU; 4 rows a thread 149, 16 rows 130); one row per thread on a GPU
SIM_XENT_ROWS = source.int_defines("loss.cu", "XENT_", root=KERNELS)["XENT_ROWS"]


# -- loss.cu ----------------------------------------------------------------------------------------
def softmax_xent_forward(logits, labels, dlogits, row_loss, scale=None, ignore_index=-100, site=0):
    """row_loss[n] = (logsumexp(logits[n]) - logits[n, label]) s; dlogits = (softmax - onehot) s, with s =
    scale[0] (a one-element device array; None: 1 / N); rows whose label is ignore_index get 0 and 0. Any
    other label outside [0, C) makes its row NaN and, with a `site` (gpublas.device_checks.site), raises
    IndexError at the host's next synchronization."""
    N, C = logits.shape
    if labels.dtype != np.int32 or labels.shape != (N,):
        raise ValueError(f"softmax_xent_forward: labels must be int32 ({N},), got {labels.dtype} {labels.shape}")
    dtype = _same("softmax_xent_forward", logits, dlogits, row_loss, scale)
    if scale is None:
        scale = gpublas.to_device(np.array([1.0 / max(N, 1)], dtype))
    rows = SIM_XENT_ROWS if simulated() else 1
    get_kernel("loss", "softmax_xent_forward", dtype)(
        *geometry_1d(ceil_div(N, rows)), logits, labels, dlogits, row_loss, N, C, rows, int(ignore_index), scale,
        device_checks.record() if site else None, site)
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


# -- optim.cu ---------------------------------------------------------------------------------------
def _state(state):
    if state.dtype != np.float64 or state.shape != (4,):
        raise ValueError(f"optimizer state must be float64 (4,) [lr, t, step_size, bc2_sqrt], got "
                         f"{state.dtype} {state.shape}")


def optim_tick(state, beta1=0.0, beta2=0.0):
    """Advances the device step count t in state [lr, t, step_size, bc2_sqrt] and sets Adam's bias
    corrections for the new t (one thread)."""
    _state(state)
    get_kernel("optim", "optim_tick", np.float64)(1, 1, state, beta1, beta2)
    return state


def sgd_update(p, grad, buf, state, momentum, dampening, weight_decay, nesterov):
    """PyTorch's SGD step for one parameter, in place (buf: momentum buffer or None); lr and the step
    count (t == 1: the first step, buf = g) come from the device `state`."""
    if grad.shape != p.shape or (buf is not None and buf.shape != p.shape):
        raise ValueError(f"sgd_update: param {p.shape}, grad {grad.shape}, buffer {None if buf is None else buf.shape}")
    if momentum != 0 and buf is None:
        raise ValueError("sgd_update: momentum needs a buffer")
    _state(state)
    get_kernel("optim", "sgd_update", _same("sgd_update", p, grad, buf))(
        *in_order_geometry(p.size), p, grad, buf, p.size, state, momentum, dampening, weight_decay, int(nesterov))
    return p


def adam_update(p, grad, m, v, vmax, state, beta1, beta2, eps, weight_decay, decoupled):
    """PyTorch's Adam (decoupled=False) or AdamW (True) step for one parameter, in place; m, v: the
    moment buffers; vmax: amsgrad's running max of v, or None; lr and the bias corrections of the
    current step (optim_tick) come from the device `state`."""
    for name, b in (("m", m), ("v", v), ("vmax", vmax)):
        if grad.shape != p.shape or (b is not None and b.shape != p.shape):
            raise ValueError(f"adam_update: param {p.shape}, grad {grad.shape}, "
                             f"{name} {None if b is None else b.shape}")
    _state(state)
    get_kernel("optim", "adam_update", _same("adam_update", p, grad, m, v, vmax))(
        *in_order_geometry(p.size), p, grad, m, v, vmax, p.size, state, beta1, beta2, eps, weight_decay, int(decoupled))
    return p


def sumsq(x, out, slot):
    """out[slot] = sum(x^2): gpublas.dot(x, x) kept on the device (two passes, fixed order)."""
    if not 0 <= slot < out.size:
        raise IndexError(f"sumsq: slot {slot} outside out of size {out.size}")
    gpublas.dot(x, x, out=out[slot])
    return out


def scale_inplace(x, s):
    get_kernel("optim", "scale_inplace", x.dtype)(*in_order_geometry(x.size), x, x.size, s)
    return x


def clip_coef(sums32, sums64, max_norm, clip):
    """clip (float64 (2,)) = [total, coefficient]: total = the square root of the sum of the float32
    and float64 per-parameter sums of squares (each group summed in NumPy's order, None: empty), and
    coefficient = max_norm / (total + 1e-6) when total > max_norm, else 1 (one thread)."""
    for what, s, dtype in (("sums32", sums32, np.float32), ("sums64", sums64, np.float64)):
        if s is not None and s.dtype != dtype:
            raise TypeError(f"clip_coef: {what} must be {np.dtype(dtype)}, got {s.dtype}")
    if clip.dtype != np.float64 or clip.size != 2:
        raise ValueError(f"clip_coef: clip must be float64 (2,), got {clip.dtype} {clip.shape}")
    get_kernel("optim", "clip_coef", np.float64)(1, 1, sums32, 0 if sums32 is None else sums32.size, sums64,
                                                 0 if sums64 is None else sums64.size, max_norm, clip)
    return clip


def clip_scale(x, clip):
    """x *= clip[1] (rounded to x's dtype) unless clip[1] == 1: clip_coef's coefficient applied on the device."""
    get_kernel("optim", "clip_scale", x.dtype)(*in_order_geometry(x.size), x, x.size, clip)
    return x
