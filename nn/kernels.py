"""Launchers for the kernels of nn's layers (nn/cuda/*.cu: activation, conv, pool, dropout, lstm,
batchnorm, embedding): one function per kernel that checks its arguments, computes the grid and launches.
The losses' and optimizers' kernels (loss.cu, optim.cu) have theirs in nn/step_kernels.py.

Layers call these and gpublas.gemm; nothing here computes on the host.
"""
import functools
from pathlib import Path

import numpy as np

import gpublas
from gpublas import device_checks, dtypes, launch, reduction, source
from gpublas.launch import ceil_div, geometry_1d
from gpublas.launch import fast_divisor as fd

KERNELS = Path(__file__).resolve().parent / "cuda"   # nn's .cu files, shipped as package data

BN_THREADS = 256       # threads per block of nn/cuda/batchnorm.cu's per-channel kernels
EMB_THREADS = 128      # at most nn/cuda/embedding.cu's EMB_THREADS
EMB_RUN = source.int_defines("embedding.cu", "EMB_RUN", root=KERNELS)["EMB_RUN"]  # embedding_backward_serial's
# activation codes: common.cuh's ACT_IDENTITY, ACT_RELU, ... read from the header
ACT = {name[4:].lower(): code for name, code in source.int_defines("common.cuh", "ACT_").items()}
LSTM_RUN = source.int_defines("lstm.cu", "LSTM_RUN", root=KERNELS)["LSTM_RUN"]  # a simulated thread's units (float)
ACT[None] = ACT["identity"]


def get_kernel(family, name, dtype):
    """Kernel `name` of nn/cuda/<family>.cu, through gpublas' one compile path."""
    return launch.get_kernel(family, name, dtype, root=KERNELS)


# Up to this many elements a grid-stride kernel over independent elements runs on the sim as one thread walking
# them in order, about twice as fast as geometry_1d's threads each hopping by the grid's width (its grid for so
# few, 15 blocks at most, stays under the 4,096 threads that the sim spreads over cores). us of CPU: 24.6k
# floats, sgd_update 28.5 -> 14.1, clip_scale 14 -> 7.2, adam_update 63 -> 61 (its sqrt and division bound
# it); embedding_forward 768 x 16 23 -> 11.
SIM_IN_ORDER = 15 * launch.BLOCK * launch.SIM_ELEMENTS_PER_THREAD


def in_order_geometry(n):
    """(grid, block) for a grid-stride loop over n independent elements: geometry_1d's, or on the sim up to
    SIM_IN_ORDER elements one thread (the same bits: no element's value depends on its thread)."""
    return (1, 1) if 0 < n <= SIM_IN_ORDER and launch.simulated() else geometry_1d(n)


def _same(what, *arrays):
    dtype = arrays[0].dtype
    for a in arrays:
        if a is not None and a.dtype != dtype:
            raise TypeError(f"{what}: mixed dtypes {[str(b.dtype) for b in arrays if b is not None]}")
    return dtype


def _storage(what, data, stats):
    """The dtype of a kernel whose `data` arrays hold `real` and whose `stats` arrays (None allowed)
    hold its compute dtype: float32 for 16-bit data (FP32 statistics and parameters)."""
    dtype = _same(what, *data)
    compute = dtypes.TABLE[dtype].compute
    for a in stats:
        if a is not None and a.dtype != compute:
            raise TypeError(f"{what}: statistics and parameters must be {compute} for {dtype} data, got {a.dtype}")
    return dtype


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


def gemm(a, b, c=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, acc=False):
    """gpublas.gemm: C = alpha op(A) op(B) + beta C (a new C when none is given). acc=True: a new C in the
    accumulator's dtype (float32 for 16-bit operands, GemmEx's FP32 output), for an epilogue kernel after it
    (bias_act_forward, cnp_to_nchw_bias, col2im) that rounds the result to the operands' dtype once."""
    out = acc_dtype(a.dtype) if acc else None
    return gpublas.gemm(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b,
                        out_dtype=out if out != a.dtype else None)


def acc_dtype(dtype):
    """The dtype GEMMs accumulate `dtype` operands in and nn's epilogue kernels read them as (acc_real)."""
    return dtypes.TABLE[np.dtype(dtype)].compute


def _epilogue(what, acc, *outs):
    """The `real` of a kernel that reads the GEMM output `acc` as acc_real and writes `outs` (None allowed)."""
    dtype = _same(what, *outs)
    if acc.dtype != acc_dtype(dtype):
        raise TypeError(f"{what}: the GEMM output must be {acc_dtype(dtype)} for {dtype} data (its accumulator "
                        f"dtype, nn.kernels.gemm(acc=True)), got {acc.dtype}")
    return dtype


# -- activation.cu ----------------------------------------------------------------------------------
def act_forward(x, y, act):
    """y = act(x) elementwise (y may be x)."""
    if x.size != y.size:
        raise ValueError(f"act_forward: {x.shape} vs {y.shape}")
    get_kernel("activation", "act_forward", _same("act_forward", x, y))(*geometry_1d(x.size), x, y, x.size, act)
    return y


def act_backward(y, dy, dx, act):
    """dx = dy * act'(.) from the forward output y (dx may be dy)."""
    if not y.size == dy.size == dx.size:
        raise ValueError(f"act_backward: sizes {y.shape}, {dy.shape}, {dx.shape} differ")
    if act in FROM_INPUT:
        raise ValueError("act_backward: the GELUs' derivative needs the input (act_backward_input)")
    get_kernel("activation", "act_backward", _same("act_backward", y, dy, dx))(
        *geometry_1d(y.size), y, dy, dx, y.size, act)
    return dx


def act_backward_input(x, dy, dx, act):
    """dx = dy * act'(x) from the forward input x (the GELUs'; dx may be dy)."""
    if not x.size == dy.size == dx.size:
        raise ValueError(f"act_backward_input: sizes {x.shape}, {dy.shape}, {dx.shape} differ")
    get_kernel("activation", "act_backward_input", _same("act_backward_input", x, dy, dx))(
        *geometry_1d(x.size), x, dy, dx, x.size, act)
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
        *geometry_1d(x.size), x, b, y, pre, x.size, fd(channels), fd(inner), act)
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
        gpublas.indexing.copy_to(db, acc)
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


# -- conv.cu ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)  # a model asks the same few geometries every step
def _conv_sizes(N, C, H, W, geom):
    """conv.cu's size arguments: every size it divides by packed as a FastDivmod divisor."""
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW = geom
    return (*map(fd, (N, C, H, W, kh, kw, sh, sw)), ph, pw, dh, dw, fd(OH), fd(OW))


def im2col(x, cols, geom):
    """cols (C*kh*kw, N*OH*OW) from x (N, C, H, W); geom = (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)."""
    N, C, H, W = x.shape
    kh, kw, _, _, _, _, _, _, OH, OW = geom
    if cols.shape != (C * kh * kw, N * OH * OW):
        raise ValueError(f"im2col: cols {cols.shape}, expected {(C * kh * kw, N * OH * OW)}")
    get_kernel("conv", "im2col_nchw", _same("im2col", x, cols))(  # a thread item per (c, column)
        *geometry_1d(C * N * OH * OW), x, cols, *_conv_sizes(N, C, H, W, geom), fd(N * OH * OW))
    return cols


def col2im(dcols, dx, geom):
    """dx (N, C, H, W) = the sum of dcols (accumulator dtype) over every tap landing on each pixel (writes dx)."""
    N, C, H, W = dx.shape
    kh, kw, _, _, _, _, _, _, OH, OW = geom
    if dcols.shape != (C * kh * kw, N * OH * OW):
        raise ValueError(f"col2im: dcols {dcols.shape}, expected {(C * kh * kw, N * OH * OW)}")
    get_kernel("conv", "col2im_nchw", _epilogue("col2im", dcols, dx))(
        *geometry_1d(dx.size), dcols, dx, *_conv_sizes(N, C, H, W, geom))
    return dx


def cnp_to_nchw_bias(Y, b, y, act):
    """y (N, C, P...) = act(Y (C, N*P) permuted + b[c]); b may be None; Y in the accumulator dtype."""
    N, C = y.shape[:2]
    P = y.size // max(1, N * C)
    if Y.size != y.size or Y.shape[0] != C:
        raise ValueError(f"cnp_to_nchw_bias: Y {Y.shape} does not fit y {y.shape}")
    get_kernel("conv", "cnp_to_nchw_bias", _epilogue("cnp_to_nchw_bias", Y, y, b))(
        *geometry_1d(y.size), Y, b, y, N, fd(C), fd(P), act)
    return y


# -- pool.cu ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)  # a model asks the same few geometries every step
def _pool_sizes(N, C, H, W, OH, OW, geom):
    """pool.cu's size arguments (planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw), divisors packed."""
    kh, kw, sh, sw, ph, pw = geom
    return N * C, fd(H), fd(W), fd(OH), fd(OW), kh, kw, fd(sh), fd(sw), ph, pw


def maxpool_forward(x, y, idx, geom):
    """y, idx (N, C, OH, OW) = the max over each window and its flat position in the input plane."""
    N, C, H, W = x.shape
    OH, OW = y.shape[2:]
    if idx.dtype != np.int32 or idx.shape != y.shape:
        raise ValueError(f"maxpool_forward: idx must be int32 {y.shape}, got {idx.dtype} {idx.shape}")
    get_kernel("pool", "maxpool_forward", _same("maxpool_forward", x, y))(
        *geometry_1d(y.size), x, y, idx, *_pool_sizes(N, C, H, W, OH, OW, geom))
    return y


def _pool_backward_items(dy, dx, geom):
    """The thread items of pool.cu's backward kernels: dy's elements when no two windows overlap (each
    writes its stride cell of dx), else dx's (each gathers)."""
    kh, kw, sh, sw = geom[:4]
    return dy.size if kh <= sh and kw <= sw and dy.size else dx.size


def maxpool_backward(dy, idx, dx, geom):
    """dx = dy routed back to each window's argmax (writes dx)."""
    N, C, H, W = dx.shape
    OH, OW = dy.shape[2:]
    get_kernel("pool", "maxpool_backward", _same("maxpool_backward", dy, dx))(
        *geometry_1d(_pool_backward_items(dy, dx, geom)), dy, idx, dx, *_pool_sizes(N, C, H, W, OH, OW, geom))
    return dx


def avgpool_forward(x, y, geom):
    N, C, H, W = x.shape
    OH, OW = y.shape[2:]
    get_kernel("pool", "avgpool_forward", _same("avgpool_forward", x, y))(
        *geometry_1d(y.size), x, y, *_pool_sizes(N, C, H, W, OH, OW, geom))
    return y


def avgpool_backward(dy, dx, geom):
    N, C, H, W = dx.shape
    OH, OW = dy.shape[2:]
    get_kernel("pool", "avgpool_backward", _same("avgpool_backward", dy, dx))(
        *geometry_1d(_pool_backward_items(dy, dx, geom)), dy, dx, *_pool_sizes(N, C, H, W, OH, OW, geom))
    return dx


# -- dropout.cu -------------------------------------------------------------------------------------
def dropout_forward(x, y, mask, p, seed, counter):
    """y = x * mask / (1 - p) with mask[i] = hash(seed, offset + i) >= p, drawn on the device; offset is
    the int64 device scalar `counter`, which then moves on by x.size (dropout_advance)."""
    if mask.dtype != np.uint8 or mask.size != x.size or y.size != x.size:
        raise ValueError(f"dropout_forward: x {x.shape}, y {y.shape}, mask {mask.dtype} {mask.shape}")
    if counter.dtype != np.int64 or counter.size != 1:
        raise ValueError(f"dropout_forward: counter must be one int64 element, got {counter.dtype} {counter.shape}")
    scale = 1.0 / (1.0 - p)
    dtype = _same("dropout_forward", x, y)
    get_kernel("dropout", "dropout_forward", dtype)(*geometry_1d(x.size), x, y, mask, x.size, p, scale, seed, counter)
    dropout_advance(counter, x.size, dtype)
    return y


def dropout_advance(counter, n, dtype=np.float32):
    """*counter += n on the device (one thread): the next draw's offset. Returns counter."""
    get_kernel("dropout", "dropout_advance", dtype)(1, 1, counter, n)
    return counter


def dropout_backward(dy, mask, dx, p):
    scale = 1.0 / (1.0 - p)
    get_kernel("dropout", "dropout_backward", _same("dropout_backward", dy, dx))(
        *geometry_1d(dy.size), dy, mask, dx, dy.size, scale)
    return dx


# -- batchnorm.cu -----------------------------------------------------------------------------------
def _ncl(x, C):
    """x's (N, C, L) view: L = the product of the axes after the channel axis (1 for (N, C))."""
    if x.ndim < 2 or x.shape[1] != C:
        raise ValueError(f"batchnorm: expected x (N, {C}, ...), got {x.shape}")
    return x.shape[0], x.size // max(1, x.shape[0] * C)


def bn_stats(x, mean, invstd, running_mean, running_var, eps, momentum, use_running):
    """mean, invstd (C,) of x's channels from the batch (updating the running buffers when given, with
    factor `momentum`) or, with use_running, from the running buffers."""
    C = mean.size
    N, L = _ncl(x, C)
    if invstd.size != C or any(b is not None and b.size != C for b in (running_mean, running_var)):
        raise ValueError(f"bn_stats: per-channel arrays must have {C} elements")
    if use_running and (running_mean is None or running_var is None):
        raise ValueError("bn_stats: use_running needs the running buffers")
    get_kernel("batchnorm", "bn_stats", _storage("bn_stats", [x], [mean, invstd, running_mean, running_var]))(
        C, BN_THREADS, x, mean, invstd, running_mean, running_var, N, C, L, eps, momentum, int(use_running))
    return mean, invstd


def bn_forward(x, mean, invstd, gamma, beta, y):
    """y = (x - mean[c]) invstd[c] gamma[c] + beta[c] (gamma, beta may be None)."""
    C = mean.size
    N, L = _ncl(x, C)
    if y.shape != x.shape:
        raise ValueError(f"bn_forward: y {y.shape} differs from x {x.shape}")
    get_kernel("batchnorm", "bn_forward", _storage("bn_forward", [x, y], [mean, invstd, gamma, beta]))(
        *geometry_1d(x.size), x, mean, invstd, gamma, beta, y, x.size, C, L)
    return y


def bn_backward(x, dy, mean, invstd, gamma, dx, dgamma, dbeta, batch_stats):
    """dx (writes), and dgamma, dbeta (adds; may be None) of batch normalization; batch_stats: mean and
    invstd came from this batch (so they depend on x) rather than from the running buffers."""
    C = mean.size
    N, L = _ncl(x, C)
    if dy.shape != x.shape or dx.shape != x.shape:
        raise ValueError(f"bn_backward: x {x.shape}, dy {dy.shape}, dx {dx.shape} differ")
    dtype = _storage("bn_backward", [x, dy, dx], [mean, invstd, gamma, dgamma, dbeta])
    get_kernel("batchnorm", "bn_backward", dtype)(
        C, BN_THREADS, x, dy, mean, invstd, gamma, dx, dgamma, dbeta, N, C, L, int(batch_stats))
    return dx


# -- embedding.cu -----------------------------------------------------------------------------------
def _indices(idx):
    if idx.dtype != np.int32:
        raise TypeError(f"embedding: indices must be int32 on the device, got {idx.dtype}")


def embedding_forward(weight, idx, y, site=0):
    """y (n, D) = weight[idx] for int32 idx (n,); a row whose index is outside [0, V) is NaN and, with a
    `site` (gpublas.device_checks.site), raises IndexError at the host's next synchronization."""
    V, D = weight.shape
    _indices(idx)
    if y.shape != (idx.size, D):
        raise ValueError(f"embedding_forward: y {y.shape}, expected {(idx.size, D)}")
    get_kernel("embedding", "embedding_forward", _same("embedding_forward", weight, y))(
        *in_order_geometry(y.size), weight, idx, y, idx.size, fd(D), V, device_checks.record() if site else None,
        site)
    return y


def embedding_backward(dy, idx, dweight, padding_idx):
    """dweight[r] += the sum of dy[i] over every i with idx[i] == r, in increasing i (no atomics); the
    row padding_idx (None: none) gets nothing."""
    V, D = dweight.shape
    _indices(idx)
    if dy.shape != (idx.size, D):
        raise ValueError(f"embedding_backward: dy {dy.shape}, expected {(idx.size, D)}")
    dtype, pad = _same("embedding_backward", dy, dweight), -1 if padding_idx is None else padding_idx
    if launch.simulated():  # no barriers: D = 16, V = 45, 768 indices (the LSTM example) 37 -> 8.2 us of CPU
        get_kernel("embedding", "embedding_backward_serial", dtype)(
            *geometry_1d(V * ceil_div(D, EMB_RUN)), dy, idx, dweight, idx.size, D, V, pad)
        return dweight
    block = min(EMB_THREADS, ceil_div(D, 32) * 32)
    get_kernel("embedding", "embedding_backward", dtype)((V, ceil_div(D, block)), block, dy, idx, dweight, idx.size,
                                                         D, pad)
    return dweight


# -- lstm.cu ----------------------------------------------------------------------------------------
def lstm_gates_forward(gates, b_ih, b_hh, c_prev, h, c, tanh_c):
    """Activates gates (N, 4H) in place and writes c = f c_prev + i g, h = o tanh(c) and tanh_c = tanh(c)
    (for lstm_gates_backward)."""
    N, H = c.shape
    if gates.shape != (N, 4 * H) or c_prev.shape != (N, H) or h.shape != (N, H) or tanh_c.shape != (N, H):
        raise ValueError(f"lstm_gates_forward: gates {gates.shape}, c_prev {c_prev.shape}, h {h.shape}, c {c.shape}, "
                         f"tanh_c {tanh_c.shape}")
    dtype = _same("lstm_gates_forward", gates, b_ih, b_hh, c_prev, h, c, tanh_c)
    get_kernel("lstm", "lstm_gates_forward", dtype)(
        *geometry_1d(_lstm_threads(N, H, dtype)), gates, b_ih, b_hh, c_prev, h, c, tanh_c, N, H)
    return h


def _lstm_threads(N, H, dtype):
    """The threads the lstm_gates kernels' grid-stride loops span: a unit each, or on the simulator for float a run
    of LSTM_RUN units of a row each (lstm.cu: vectors; 32 x 64 units, CPU: forward 48 -> 17.8 us with its vector
    exp and tanh)."""
    return N * ceil_div(H, LSTM_RUN) if launch.simulated() and np.dtype(dtype) == np.float32 else N * H


def lstm_gates_backward(gates, c_prev, tanh_c, d_out, dh_rec, dc, dgates):
    """dgates (N, 4H) for one step (tanh_c: the forward's tanh(c_t)); dc (N, H) goes in as dL/dc_t and
    comes out as dL/dc_{t-1}."""
    N, H = dc.shape
    if gates.shape != (N, 4 * H) or dgates.shape != (N, 4 * H) or c_prev.shape != (N, H) or tanh_c.shape != (N, H):
        raise ValueError(f"lstm_gates_backward: gates {gates.shape}, dgates {dgates.shape}, dc {dc.shape}, "
                         f"c_prev {c_prev.shape}, tanh_c {tanh_c.shape}")
    dtype = _same("lstm_gates_backward", gates, c_prev, tanh_c, d_out, dh_rec, dc, dgates)
    get_kernel("lstm", "lstm_gates_backward", dtype)(
        *geometry_1d(_lstm_threads(N, H, dtype)), gates, c_prev, tanh_c, d_out, dh_rec, dc, dgates, N, H)
    return dgates


def swap01(x, y):
    """y (B, A, K...) = x (A, B, K...) with the first two axes swapped (gpublas' transpose.cu kernel)."""
    A, B = x.shape[:2]
    K = x.size // max(1, A * B)
    if y.shape != (B, A) + x.shape[2:]:
        raise ValueError(f"swap01: y {y.shape}, expected {(B, A) + x.shape[2:]}")
    launch.get_kernel("transpose", "swap01", _same("swap01", x, y))(
        *geometry_1d(x.size), x, y, launch.fast_divisor(A), B, launch.fast_divisor(K))
    return y
