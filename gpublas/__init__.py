"""gpublas: a small cuBLAS substitute in Python, on NVIDIA GPUs (PyCUDA) or a CPU simulator.

    import gpublas, numpy as np
    a = gpublas.to_device(np.random.rand(64, 32).astype(np.float32))
    print(gpublas.backend(), a.get().sum())
"""
from .array import DeviceArray, asarray, empty, to_device
from .creation import ascontiguousarray, empty_like, full, full_like, ones, ones_like, zeros, zeros_like
from .dtypes import bfloat16, float16
from .backends import (backend, current as _current_backend, device_info, free_cached, memory_stats,
                       reset_peak_memory_stats, use)
from .errors import (CompileError, ConfigError, FreedArrayError, GpublasError, GraphError, IllegalAddressError,
                     LaunchError, OutOfMemoryError, SingularMatrixWarning)
from . import config  # noqa: E402 (the environment variables, checked where read)
from .launch import ceil_div, get_kernel, load_source
from .layout import may_share_memory
from .profiler import Profile, profile
from .pinned import PageableMemoryWarning, is_pinned, pinned_empty
from .stream import Event, Stream, current_stream, synchronize
from .graph import Graph, graph

__version__ = "0.1.0"


def sim_thread_order(order):
    """Sets the order in which the sim backend runs a block's threads: 'forward', 'reverse' or
    'random' (GPUBLAS_SIM_ORDER sets the default). A kernel whose result depends on it has a race."""
    b = _current_backend()
    if b.name != "sim":
        raise RuntimeError("thread order is a property of the sim backend; the active one is " + b.name)
    b.set_order(order)


# --- kernel factories (issue: runtime) ---
from .factories import ElementwiseKernel, ReductionKernel
# --- elementwise operations and reductions (issue: BLAS/array ops) ---
from .elementwise import (abs, axpby, clip, conj, conjugate, exp, floor_divide, log, maximum, minimum, negative, pow,
                          relu, remainder, sigmoid, sqrt, tanh, where)
from .cumath import (arccos, arcsin, arctan, arctan2, ceil, cos, cosh, exp2, expm1, floor, fmod, hypot, log1p,
                     log2, log10, reciprocal, rint, sign, sin, sinh, square, tan, trunc)
from .ops import (add, all, any, divide, equal, greater, greater_equal, less, less_equal, multiply, not_equal,
                  std, subtract, var)
from .bitwise import (bitwise_and, bitwise_invert, bitwise_not, bitwise_or, bitwise_xor, invert, left_shift,
                      logical_and, logical_not, logical_or, logical_xor, right_shift)
# --- indexing: views, integer and boolean array indices (issue: array) ---
from .gather import count_nonzero, nonzero
from .indexing import take
from .manipulation import concatenate, expand_dims, imag, real, squeeze, stack, transpose
from .ranges import arange, linspace
# --- interop: DLPack and the CUDA array interface (issue: array) ---
from .interop import as_device_array, from_dlpack
from .reduction import argmax, argmin, logsumexp, max, mean, min, softmax, sum
# --- sorting on the device (issue 32) ---
from .sorting import argsort, sort, topk
from .order_stats import median, percentile, quantile, unique
from .cumulative import cumprod, cumsum, prod
# --- views, rearrangements and value tests with NumPy's names (issue 32) ---
from .views import (array_split, atleast_1d, atleast_2d, atleast_3d, broadcast_to, diagonal, flip, moveaxis, split,
                    swapaxes)
from .rearrange import argwhere, diag, dstack, hstack, repeat, roll, tile, tril, triu, vstack
from .contract import einsum, outer, tensordot, trace
from . import linalg  # noqa: E402 (gpublas.linalg.norm)
from .predicates import allclose, around, array_equal, isclose, isfinite, isinf, isnan, nan_to_num, round
# --- BLAS levels 1-3 (issue: BLAS) ---
from .blas1 import asum, axpy, copy, dot, dotc, iamax, iamin, nrm2, rot, rotg, rotm, rotmg, scal, swap
from .blas2 import gemv, ger, gerc
from .blas3 import gemm, gemm_batched, matmul
# --- triangular and symmetric routines, cuBLAS's extensions, batched LU (issue 23) ---
from .blas3_tri import trmm, trsm, trsm_batched
from .blas3_sym import hemm, her2k, herk, symm, syr2k, syrk
from .blas2_tri import hemv, her, symv, syr, trmv, trsv
from .blas_ext import dgmm, geam
from .lapack import getrf_batched, getrs_batched
from . import numpy_dispatch as _numpy_dispatch  # noqa: E402,F401 (np.sum(a), np.exp(a) on DeviceArrays)

from . import profiler as _profiler  # noqa: E402
_profiler._from_environment()  # GPUBLAS_PROFILE=1: profile the whole process
