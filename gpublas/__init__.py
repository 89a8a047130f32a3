"""gpublas: a small cuBLAS substitute in Python, on NVIDIA GPUs (PyCUDA) or a CPU simulator.

    import gpublas, numpy as np
    a = gpublas.to_device(np.random.rand(64, 32).astype(np.float32))
    print(gpublas.backend(), a.get().sum())
"""
from .core.array import DeviceArray, asarray, empty, to_device
from .core.creation import ascontiguousarray, empty_like, full, full_like, ones, ones_like, zeros, zeros_like
from .runtime.dtypes import bfloat16, float16
from .runtime.backends import (backend, current as _current_backend, device_info, free_cached, memory_stats,
                               reset_peak_memory_stats, use)
from .runtime.errors import (CompileError, ConfigError, FreedArrayError, GpublasError, GraphError,
                             IllegalAddressError, LaunchError, OutOfMemoryError, SingularMatrixWarning)
from .runtime import config  # noqa: E402 (the environment variables, checked where read)
from .runtime.launch import ceil_div, get_kernel, load_source
from .core.layout import may_share_memory
from .runtime.profiler import Profile, profile
from .runtime.pinned import PageableMemoryWarning, is_pinned, pinned_empty
from .runtime.stream import Event, Stream, current_stream, synchronize
from .runtime.graph import Graph, graph

__version__ = "0.1.0"


def sim_thread_order(order):
    """Sets the order in which the sim backend runs a block's threads: 'forward', 'reverse' or
    'random' (GPUBLAS_SIM_ORDER sets the default). A kernel whose result depends on it has a race."""
    b = _current_backend()
    if b.name != "sim":
        raise RuntimeError("thread order is a property of the sim backend; the active one is " + b.name)
    b.set_order(order)


# --- kernel factories (issue: runtime) ---
from .core.factories import ElementwiseKernel, ReductionKernel
# --- elementwise operations and reductions (issue: BLAS/array ops) ---
from .core.elementwise import (abs, axpby, clip, conj, conjugate, exp, floor_divide, log, maximum, minimum, negative,
                               pow, relu, remainder, sigmoid, sqrt, tanh, where)
from .core.cumath import (arccos, arcsin, arctan, arctan2, ceil, cos, cosh, exp2, expm1, floor, fmod, hypot, log1p,
                          log2, log10, reciprocal, rint, sign, sin, sinh, square, tan, trunc)
from .numpy_api.ops import (add, all, any, divide, equal, greater, greater_equal, less, less_equal, multiply,
                            not_equal, std, subtract, var)
from .numpy_api.bitwise import (bitwise_and, bitwise_invert, bitwise_not, bitwise_or, bitwise_xor, invert,
                                left_shift, logical_and, logical_not, logical_or, logical_xor, right_shift)
# --- indexing: views, integer and boolean array indices (issue: array) ---
from .core.gather import count_nonzero, nonzero
from .core.indexing import take
from .numpy_api.manipulation import concatenate, expand_dims, imag, real, squeeze, stack, transpose
from .core.ranges import arange, linspace
# --- interop: DLPack and the CUDA array interface (issue: array) ---
from .core.interop import as_device_array, from_dlpack
from .core.reduction import argmax, argmin, logsumexp, max, mean, min, softmax, sum
# --- sorting on the device (issue 32) ---
from .numpy_api.sorting import argsort, sort, topk
from .numpy_api.order_stats import median, percentile, quantile, unique
from .numpy_api.cumulative import cumprod, cumsum, prod
# --- views, rearrangements and value tests with NumPy's names (issue 32) ---
from .core.views import (array_split, atleast_1d, atleast_2d, atleast_3d, broadcast_to, diagonal, flip, moveaxis,
                         split, swapaxes)
from .numpy_api.rearrange import argwhere, diag, dstack, hstack, repeat, roll, tile, tril, triu, vstack
from .numpy_api.contract import einsum, outer, tensordot, trace
from .numpy_api import linalg  # noqa: E402 (gpublas.linalg.norm)
from .numpy_api.predicates import allclose, around, array_equal, isclose, isfinite, isinf, isnan, nan_to_num, round
# --- BLAS levels 1-3 (issue: BLAS) ---
from .blas.blas1 import asum, axpy, copy, dotc, iamax, iamin, nrm2, rot, rotg, rotm, rotmg, scal, swap
from .numpy_api.contract import blas_dot as dot  # BLAS's on 1-D vectors, NumPy's (cupy.dot's) otherwise
from .blas.blas2 import gemv, ger, gerc
from .blas.blas3 import gemm, gemm_batched, matmul
# --- triangular and symmetric routines, cuBLAS's extensions, batched LU (issue 23) ---
from .blas.blas3_tri import trmm, trsm, trsm_batched
from .blas.blas3_sym import hemm, her2k, herk, symm, syr2k, syrk
from .blas.blas2_tri import hemv, her, symv, syr, trmv, trsv
from .blas.blas_ext import dgmm, geam
from .blas.lapack import getrf_batched, getrs_batched
from .numpy_api import numpy_dispatch as _numpy_dispatch  # noqa: E402,F401 (np.sum(a), np.exp(a) on DeviceArrays)

from .runtime import profiler as _profiler  # noqa: E402
_profiler._from_environment()  # GPUBLAS_PROFILE=1: profile the whole process
