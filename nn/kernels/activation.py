"""Launchers of nn/cuda/activation.cu: activations, their derivatives, bias + activation epilogues and bias
gradients (gpublas' reductions). common.cuh's activation codes (ACT) and act_code."""
import gpublas
from gpublas.core import reduction
from gpublas.runtime import dtypes, source
from gpublas.runtime.launch import flat_geometry
from gpublas.runtime.launch import fast_divisor as fd

from .common import _epilogue, _same, get_kernel

# activation codes: common.cuh's ACT_IDENTITY, ACT_RELU, ... read from the header
ACT = {name[4:].lower(): code for name, code in source.int_defines("common.cuh", "ACT_").items()}
ACT[None] = ACT["identity"]

# the activations whose derivative needs the forward input (act_backward_input), not only its output
FROM_INPUT = frozenset((ACT["gelu"], ACT["gelu_tanh"]))


def act_code(name, from_output=False):
    """common.cuh's code for activation `name`; from_output: a layer that keeps only the output refuses the
    GELUs, whose derivative has no form in it."""
    names = "relu, tanh, sigmoid" + ("" if from_output else ", gelu, gelu_tanh")
    code = ACT.get(name)
    if code is None or (from_output and code in FROM_INPUT):
        raise ValueError(f"unknown activation {name!r}; expected one of {names} or None")
    return code


def act_forward(x, y, act):
    """y = act(x) elementwise (y may be x)."""
    if x.size != y.size:
        raise ValueError(f"act_forward: {x.shape} vs {y.shape}")
    get_kernel("activation", "act_forward", _same("act_forward", x, y))(*flat_geometry(x.size), x, y, x.size, act)
    return y


def act_backward(y, dy, dx, act):
    """dx = dy * act'(.) from the forward output y (dx may be dy)."""
    if not y.size == dy.size == dx.size:
        raise ValueError(f"act_backward: sizes {y.shape}, {dy.shape}, {dx.shape} differ")
    if act in FROM_INPUT:
        raise ValueError("act_backward: the GELUs' derivative needs the input (act_backward_input)")
    get_kernel("activation", "act_backward", _same("act_backward", y, dy, dx))(
        *flat_geometry(y.size), y, dy, dx, y.size, act)
    return dx


def act_backward_input(x, dy, dx, act):
    """dx = dy * act'(x) from the forward input x (the GELUs'; dx may be dy)."""
    if not x.size == dy.size == dx.size:
        raise ValueError(f"act_backward_input: sizes {x.shape}, {dy.shape}, {dx.shape} differ")
    get_kernel("activation", "act_backward_input", _same("act_backward_input", x, dy, dx))(
        *flat_geometry(x.size), x, dy, dx, x.size, act)
    return dx


def bias_act_forward(x, b, y, channels, inner, act, pre=None):
    """y = act(x + b[channel]) for x viewed as (outer, channels, inner), b None: act(x). x is a GEMM's output
    in the accumulator dtype (gemm(acc=True): float32 for 16-bit y, rounded once here); y may be x. pre (y's
    dtype; may be x when that is y's dtype too, not y) gets x + b, the pre-activation act_backward_input reads."""
    if (b is not None and b.size != channels) or x.size % (channels * inner) or y.size != x.size or (
            pre is not None and (pre.size != x.size or pre is y)):
        raise ValueError(f"bias_act_forward: bias {None if b is None else b.shape}, y {y.shape} and pre "
                         f"{None if pre is None else pre.shape} do not fit x {x.shape} as (*, {channels}, {inner})")
    get_kernel("activation", "bias_act_forward", _epilogue("bias_act_forward", x, y, b, pre))(
        *flat_geometry(x.size), x, b, y, pre, x.size, fd(channels), fd(inner), act)
    return y


def bias_grad_sum(dy, db, channels, inner, accumulate=True):
    """db[c] += sum of dy over (outer, inner) for dy viewed as (outer, channels, inner) (db[c] = the sum
    with accumulate=False, db then in dy's compute dtype): gpublas' deterministic reductions, in two
    passes when inner > 1. Short rows (a conv's H*W up to
    reduction.SERIAL_N) sum over outer first, coalesced across the channels * inner columns, then the
    channels' short rows; long ones sum each (outer, channel) row first, then over outer. The sums are in
    dy's compute dtype: float32 for a 16-bit dy (FP32 bias gradients, summed in float32). A 16-bit db
    (a pure 16-bit layer's gradient) gets db + the FP32 sums, added in FP32 and rounded once."""
    if db.size != channels or dy.size % (channels * inner):
        raise ValueError(f"bias_grad_sum: db {db.shape} does not fit dy {dy.shape} as (*, {channels}, {inner})")
    dtype = dtypes.TABLE[dy.dtype].compute
    if db.dtype != dtype and dtypes.TABLE[db.dtype].compute == dtype and accumulate:
        acc = db.astype(dtype)
        bias_grad_sum(dy, acc, channels, inner)
        gpublas.core.indexing.copy_to(db, acc)
        return db
    if db.dtype != dtype:
        raise TypeError(f"bias_grad_sum: db must be {dtype} (or 16 bits) for a {dy.dtype} dy, got {db.dtype}")
    outer = dy.size // (channels * inner)
    SUM, reduce, beta = reduction.SUM, reduction.launch_reduce, 1.0 if accumulate else 0.0
    if outer == 0:
        return db if accumulate else db.fill(0)
    if inner == 1:
        reduce(SUM, dy, 1, outer, channels, db, None, beta=beta)
    elif reduction.serial_fits(inner, 1):
        cols = gpublas.empty((channels * inner,), dtype)
        reduce(SUM, dy, 1, outer, channels * inner, cols, None)
        reduce(SUM, cols, channels, inner, 1, db, None, beta=beta)
    else:
        rows = gpublas.empty((outer * channels,), dtype)
        reduce(SUM, dy, outer * channels, inner, 1, rows, None)
        reduce(SUM, rows, 1, outer, channels, db, None, beta=beta)
    return db
