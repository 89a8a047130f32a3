"""What every launcher of nn/kernels/ shares: where nn's .cu files are, the one way to get a kernel of
theirs, the sim's in-order geometry, the dtype checks, and gpublas.gemm with an accumulator-dtype output for
the epilogue kernels that follow it."""
from pathlib import Path

import numpy as np

import gpublas
from gpublas.runtime import dtypes, launch
from gpublas.runtime.launch import geometry_1d

KERNELS = Path(__file__).resolve().parent.parent / "cuda"   # nn's .cu files, shipped as package data


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
