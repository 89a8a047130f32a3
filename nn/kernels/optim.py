"""Launchers of nn/cuda/optim.cu: the optimizers' updates and gradient clipping, one function per kernel. What
changes from step to step (the learning rate, the step count, the clipping coefficient) is read from device
memory, so a captured step replays with the values of the moment."""
import numpy as np

from gpublas.blas import blas1

from .common import _same, get_kernel, in_order_geometry


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
    """out[slot] = sum(x^2) over every element of x: BLAS's dot of x with itself, kept on the device (two
    passes, fixed order; blas1.dot takes x flat, whatever its shape)."""
    if not 0 <= slot < out.size:
        raise IndexError(f"sumsq: slot {slot} outside out of size {out.size}")
    blas1.dot(x, x, out=out[slot])
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
