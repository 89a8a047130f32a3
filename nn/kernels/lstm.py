"""Launchers of nn/cuda/lstm.cu's fused gate kernels, and swap01 (gpublas' transpose.cu) for the
sequence-major layout."""
import numpy as np

from gpublas.runtime import launch, source
from gpublas.runtime.launch import ceil_div, geometry_1d

from .common import KERNELS, _same, get_kernel

LSTM_RUN = source.int_defines("lstm.cu", "LSTM_RUN", root=KERNELS)["LSTM_RUN"]  # a simulated thread's units (float)


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
        *launch.flat_geometry(x.size), x, y, launch.fast_divisor(A), B, launch.fast_divisor(K))
    return y
