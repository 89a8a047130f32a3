"""Level-1 BLAS on DeviceArrays (kernels in cuda_src/blas1.cu).

    gpublas.axpy(2.0, x, y)      # y += 2 x, in place; returns y
    gpublas.dot(x, y)            # a Python float
    gpublas.iamax(x)             # 0-based index of the first largest |x[i]|
    c, s = gpublas.rotg(a, b)    # the Givens rotation zeroing b; gpublas.rot(x, y, c, s) applies it

Vectors are taken flat: x and y must have the same shape (any number of dimensions) and dtype
(float32 or float64, and complex64 and complex128 as cuBLAS's C and Z routines: dot is dotu, asum sums
|re| + |im|, iamax and iamin compare |re| + |im|, rot takes a real c and a real or complex s; rotm and
rotmg are real only, as in cuBLAS). Every check runs before any launch and
raises ValueError naming the shapes.
A 1-D view (any step, reversed too) is passed with its stride as BLAS's incx, no copy; other
non-contiguous layouts go through a contiguous temporary (an output written back).
Reductions run in two passes (block partials, then one block), so results do not depend on the order
in which threads or blocks run.
"""
import math

import numpy as np

from ..runtime import dtypes
from ..core.array import DeviceArray, empty
from ..core.checks import FLOATS, check_operands, contiguous, vector, write_back
from ..core.scratch import scratch
from ..runtime.geometry import SIM_BLOCK_RUNS, SIM_REDUCE_RUNS, SIM_SPREAD
from ..runtime.launch import BLOCK, SIM_RUN, ceil_div, flat_geometry, get_kernel, simulated
from ..runtime.stream import refuse_in_capture

MAX_PARTIALS = 1024   # reductions: partials per pass-1 launch
SIM_PARTIALS = 16     # ... on the sim backend (blocks of SIM_RUN-element runs: 2^22 elements fill them)


BLAS1_TYPES = FLOATS + dtypes.COMPLEX  # axpy, scal, copy, swap, dot, dotc, asum, nrm2
_BLAS1_SET = frozenset(BLAS1_TYPES)
_INDEX = np.dtype(np.int64)  # iamax / iamin's index


def _check_pair(routine, x, y):
    if type(x) is DeviceArray and type(y) is DeviceArray:  # the common case, in a few comparisons
        dtype = x.dtype
        if dtype is y.dtype and dtype in _BLAS1_SET and x.shape == y.shape:
            return dtype
    dtype = check_operands(routine, BLAS1_TYPES, x=x, y=y)
    if x.shape != y.shape:
        raise ValueError(f"{routine}: x has shape {x.shape} but y has shape {y.shape}; they must match")
    return dtype


# -- element-wise ---------------------------------------------------------------------------------
def axpy(alpha, x, y, stream=None):
    """y += alpha * x, in place; returns y. alpha == 0 reads nothing (BLAS returns at once)."""
    dtype = _check_pair("axpy", x, y)
    n = y.size
    if n == 0 or alpha == 0:
        return y
    if x.c_contiguous and y.c_contiguous:  # vector()'s answer for contiguous arrays, without its calls
        get_kernel("blas1", "axpy_real", dtype).launch(*flat_geometry(n), n, alpha, x, 1, y, 1, stream=stream)
        return y
    (xv, incx), (yv, incy) = vector(x, stream), vector(y, stream)
    get_kernel("blas1", "axpy_real", dtype)(*flat_geometry(n), n, alpha, xv, incx, yv, incy, stream=stream,
                                            views=True)
    return write_back(y, yv, stream)


def scal(alpha, x, stream=None):
    """x *= alpha, in place; returns x (a plain product: alpha = 0 keeps NaN as NaN)."""
    dtype = check_operands("scal", BLAS1_TYPES, x=x)
    if x.size:
        xv, incx = vector(x, stream)
        get_kernel("blas1", "scal_real", dtype)(*flat_geometry(x.size), x.size, alpha, xv, incx, stream=stream,
                                                views=True)
        write_back(x, xv, stream)
    return x


def scale_output(x, beta, stream=None):
    """x = beta * x as BLAS scales an output: beta == 0 writes zeros without reading x (for gemm/gemv)."""
    if x.size and not x.c_contiguous and beta == 0:
        return x.fill(0, stream)
    if x.size:
        xc = contiguous(x, stream)
        get_kernel("blas1", "scal_beta", x.dtype)(*flat_geometry(x.size), x.size, beta, xc, stream=stream)
        write_back(x, xc, stream)
    return x


def copy(x, y, stream=None):
    """y = x (element by element, in a kernel); returns y."""
    dtype = _check_pair("copy", x, y)
    if y.size:
        (xv, incx), (yv, incy) = vector(x, stream), vector(y, stream)
        get_kernel("blas1", "copy_real", dtype)(*flat_geometry(y.size), y.size, xv, incx, yv, incy, stream=stream,
                                                views=True)
        write_back(y, yv, stream)
    return y


def swap(x, y, stream=None):
    """Exchanges the contents of x and y in place; returns (x, y)."""
    dtype = _check_pair("swap", x, y)
    if y.size:
        (xv, incx), (yv, incy) = vector(x, stream), vector(y, stream)
        get_kernel("blas1", "swap_real", dtype)(*flat_geometry(y.size), y.size, xv, incx, yv, incy, stream=stream,
                                                views=True)
        write_back(x, xv, stream)
        write_back(y, yv, stream)
    return x, y


# -- reductions -----------------------------------------------------------------------------------
def _parts(n):
    """(blocks, threads) of the first reduction pass: up to MAX_PARTIALS blocks of BLOCK threads. On the sim a
    thread per run of SIM_RUN elements: one block of them below SIM_SPREAD elements (partial warps: common.cuh's
    block_reduce takes any count), else blocks of SIM_BLOCK_RUNS runs or more (at most SIM_PARTIALS of them), which
    the runtime spreads over the cores (blas1.cu's `// sim spread:` lines), a thread taking SIM_REDUCE_RUNS runs there."""
    if simulated():
        runs = ceil_div(n, SIM_RUN) or 1
        if n < SIM_SPREAD:
            return 1, runs
        parts = min(ceil_div(runs, SIM_BLOCK_RUNS), SIM_PARTIALS)
        return parts, min(BLOCK, ceil_div(runs, parts * SIM_REDUCE_RUNS))
    return max(1, min(ceil_div(n, BLOCK), MAX_PARTIALS)), BLOCK


def _final_threads(nparts):
    """Threads of the one-block second pass over nparts partials (a thread each on the sim, at most BLOCK)."""
    return min(BLOCK, nparts) if simulated() else BLOCK


def _sum_of(partial_kernel, dtype, n, *arrays, stream=None, out=None):
    """Runs `<partial_kernel>` over n elements then sum_final (one block: the partial is the sum, no second
    pass); returns the sum as a Python float (on the default stream through this thread's scratch: no
    allocation), or with `out` (one element on the device) writes it there and returns out without waiting."""
    nparts, threads = _parts(n)
    s = scratch() if out is None and stream is None else None
    if s is not None:
        result = s.slot(0)
        partial = result if nparts == 1 else s.partials(0)
    else:
        result = empty(1, dtype) if out is None else out
        partial = result if nparts == 1 else empty(nparts, dtype)
    get_kernel("blas1", partial_kernel, dtype).launch(nparts, threads, n, *arrays, partial, stream=stream, views=True)
    if nparts > 1:
        get_kernel("blas1", "sum_final", dtype).launch(1, _final_threads(nparts), nparts, partial, result, stream=stream)
    if out is not None:
        return result
    return (s.read(result, dtype) if s is not None else _read(result, stream, partial_kernel.split("_")[0])).item()


def _read(out, stream, name):
    """out[0] on the host, once the work queued on `stream` is done (BLAS-1 `name` returns it)."""
    refuse_in_capture(f"gpublas.{name}() returning a Python float", "the value is read back to the host, and "
                      "nothing captured runs until a replay" + ("; pass out= to keep it on the device"
                                                                if name == "dot" else ""))
    if stream is not None:
        stream.synchronize()
    return out.get()[0]


def dot(x, y, stream=None, out=None, _conjugate=False):
    """sum(x * y) as a Python float (complex: cuBLAS's dotu, a complex; 0.0 for empty vectors); with `out` (a
    one-element DeviceArray of x's dtype) the result stays on the device, written into out, and out is returned."""
    dtype = _check_pair("dotc" if _conjugate else "dot", x, y)
    if out is not None and (not isinstance(out, DeviceArray) or out.size != 1 or out.dtype != dtype):
        raise ValueError(f"dot: out must be a one-element {dtype} DeviceArray, got {out!r}")
    if x.size == 0:
        return dtype.type(0).item() if out is None else out.fill(0, stream)
    return _sum_of("dot_partial", dtype, x.size, *vector(x, stream), *vector(y, stream), int(_conjugate),
                   stream=stream, out=out)


def dotc(x, y, stream=None, out=None):
    """sum(conj(x) * y) (cuBLAS's dotc, scipy's cdotc / zdotc); for real vectors dot's."""
    return dot(x, y, stream, out, _conjugate=True)


def asum(x, stream=None):
    """sum(|x|) as a Python float; complex: sum(|re| + |im|), cuBLAS's scasum / dzasum (on the parts' views)."""
    dtype = check_operands("asum", BLAS1_TYPES, x=x)
    if dtype.kind == "c":
        return asum(x.real, stream) + asum(x.imag, stream)
    if x.size == 0:
        return 0.0
    return _sum_of("asum_partial", dtype, x.size, *vector(x, stream), stream=stream)


def nrm2(x, stream=None, out=None):
    """sqrt(sum(x**2)) as a Python float in one pass (blas1.cu: float squares summed in double, double ones by
    Blue's scaled sums where they leave the range), so that huge or tiny elements neither overflow nor underflow
    (as the reference BLAS's snrm2/dnrm2); with `out` (a one-element
    real DeviceArray of x's real dtype) the result stays on the device, written into out, and out is returned."""
    dtype = check_operands("nrm2", BLAS1_TYPES, x=x)
    real = dtypes.real_of(dtype) if dtype.kind == "c" else dtype
    if out is not None and (not isinstance(out, DeviceArray) or out.size != 1 or out.dtype != real):
        raise ValueError(f"nrm2: out must be a one-element {real} DeviceArray, got {out!r}")
    if dtype.kind == "c":  # sqrt(sum |x|^2) = hypot of the parts' norms, each overflow-safe
        if out is not None:
            raise ValueError("nrm2: out= takes a real x; for a complex one, hypot of nrm2(x.real, out=) and "
                             "nrm2(x.imag, out=) (gpublas.linalg.norm does that)")
        return math.hypot(nrm2(x.real, stream), nrm2(x.imag, stream))
    if x.size == 0:
        return 0.0 if out is None else out.fill(0, stream)
    x, incx = vector(x, stream)
    nparts, threads = _parts(x.size)
    s = scratch() if out is None and stream is None else None
    if s is not None:  # a Python float on the default stream: this thread's scratch (core/scratch.py)
        partial, result = s.partials(0), s.slot(0)  # 3 nparts doubles: partials(0) runs on into partials(1)
    else:
        partial, result = empty(3 * nparts, np.float64), empty(1, dtype) if out is None else out.reshape(1)
    get_kernel("blas1", "nrm2_partial", dtype).launch(nparts, threads, x.size, x, incx, partial, stream=stream,
                                                      views=True)
    get_kernel("blas1", "nrm2_final", dtype).launch(1, _final_threads(nparts), nparts, partial, result, stream=stream)
    if out is not None:
        return out
    return float(s.read(result, dtype) if s is not None else _read(result, stream, "nrm2"))


def _arg_index(routine, x, stream):
    dtype = check_operands(routine, BLAS1_TYPES, x=x)
    if x.size == 0:
        raise ValueError(f"{routine}: x has shape {x.shape} and no elements")
    x, incx = vector(x, stream)
    nparts, threads = _parts(x.size)
    s = scratch() if stream is None else None
    if s is not None:  # on the default stream: this thread's scratch (core/scratch.py)
        part_v, part_i, out = s.partials(0), s.partials(1), s.slot(0)
    else:
        part_v, part_i = empty(nparts, dtype), empty(nparts, np.int64)
        out = empty(1, np.int64)
    out = part_i if nparts == 1 else out
    get_kernel("blas1", f"{routine}_partial", dtype).launch(nparts, threads, x.size, x, incx, part_v, part_i,
                                                            stream=stream, views=True)
    if nparts > 1:
        get_kernel("blas1", f"{routine}_final", dtype).launch(1, _final_threads(nparts), nparts, part_v, part_i, out,
                                                              stream=stream)
    i = int(s.read(out, _INDEX) if s is not None else _read(out, stream, routine))
    return i if i < x.size else 0


def iamax(x, stream=None):
    """The 0-based index of the first element with the largest |x[i]| (BLAS i?amax, minus one; complex x:
    the largest |re| + |im|, as icamax / izamax). Raises ValueError for an empty vector; an all-NaN vector gives 0."""
    return _arg_index("iamax", x, stream)


def iamin(x, stream=None):
    """The 0-based index of the first element with the smallest |x[i]| (cuBLAS i?amin, minus one; complex x:
    the smallest |re| + |im|); NaN elements never win. Raises ValueError for an empty vector; an all-NaN
    vector gives 0."""
    return _arg_index("iamin", x, stream)


# -- plane rotations ------------------------------------------------------------------------------
def rot(x, y, c, s, stream=None):
    """(x, y) = (c x + s y, c y - conj(s) x), both in place, c real; returns (x, y) (scipy.linalg.blas ?rot;
    complex x and y: a real s is csrot / zdrot, a complex one LAPACK's crot / zrot, cuBLAS's Csrot and Crot)."""
    dtype = _check_pair("rot", x, y)
    if np.iscomplexobj(c) and np.imag(c) != 0:
        raise ValueError(f"rot: c = {c} must be real (the rotation's cosine; only s may be complex)")
    if np.iscomplexobj(s) and np.imag(s) != 0 and dtype.kind != "c":
        raise ValueError(f"rot: s = {s} is complex but x and y are {dtype}; a complex s rotates complex vectors")
    c, s = float(np.real(c)), (complex(s) if dtype.kind == "c" else float(np.real(s)))
    return _plane(x, y, c, -s.conjugate(), s, c, stream)


def _plane(x, y, h11, h21, h12, h22, stream):
    """(x, y) = (h11 x + h12 y, h21 x + h22 y) in place (rotm_real: rot's and rotm's one kernel)."""
    if y.size:
        (xv, incx), (yv, incy) = vector(x, stream), vector(y, stream)
        get_kernel("blas1", "rotm_real", x.dtype)(*flat_geometry(y.size), y.size, xv, incx, yv, incy, h11, h21, h12,
                                                  h22, stream=stream, views=True)
        write_back(x, xv, stream)
        write_back(y, yv, stream)
    return x, y


def rotm(x, y, param, stream=None):
    """Applies the modified Givens transformation H that param (5 numbers, as rotmg returns: flag, h11,
    h21, h12, h22) describes: (x, y) = (h11 x + h12 y, h21 x + h22 y), both in place; returns (x, y).
    flag -2 is the identity (nothing runs), 0 and 1 imply the entries BLAS leaves out. Real only, as cuBLAS."""
    _real_only("rotm", _check_pair("rotm", x, y))
    p = np.asarray(param.get() if isinstance(param, DeviceArray) else param, dtype=np.float64).ravel()
    if p.shape != (5,):
        raise ValueError(f"rotm: param must hold 5 numbers (flag, h11, h21, h12, h22), got shape {p.shape}")
    flag, h11, h21, h12, h22 = p
    if flag == 0:
        h11 = h22 = 1.0
    elif flag == 1:
        h12, h21 = 1.0, -1.0
    elif flag != -1:
        if flag != -2:
            raise ValueError(f"rotm: param[0] (the flag) must be -2, -1, 0 or 1, got {flag}")
        return x, y
    return _plane(x, y, h11, h21, h12, h22, stream)


def _real_only(routine, dtype):
    if np.dtype(dtype).kind == "c":
        raise ValueError(f"{routine}: {np.dtype(dtype)} given; {routine} is real only (float32, float64), as cuBLAS "
                         f"has no complex {routine}")


def rotg(a, b, dtype=np.float64):
    """(c, s) of the Givens rotation with c a + s b = r and c b - conj(s) a = 0 (scipy.linalg.blas ?rotg, in
    dtype's arithmetic): Python floats, or for a complex dtype (crotg / zrotg, a and b complex) c a float and s
    a complex. Scalars in, scalars out: computed on the host, as cuBLAS does in host pointer mode, no kernel."""
    t = np.dtype(dtype)
    if t.kind == "c":
        return _complex_rotg(t.type(a), t.type(b))
    if np.iscomplexobj(a) or np.iscomplexobj(b):
        raise ValueError(f"rotg: a = {a}, b = {b} are complex but dtype is {t}; pass dtype=np.complex64 or "
                         "np.complex128 (crotg / zrotg)")
    a, b = t.type(a), t.type(b)
    scale = abs(a) + abs(b)
    if scale == 0:
        return 1.0, 0.0
    roe = a if abs(a) > abs(b) else b
    r = scale * np.sqrt((a / scale) ** 2 + (b / scale) ** 2)
    r = -r if roe < 0 else r
    return float(a / r), float(b / r)


def _complex_rotg(a, b):
    """crotg / zrotg in a's precision (reference BLAS and scipy): s = (a / |a|) conj(b) / r with r = hypot(|a|, |b|),
    scaled so that neither square overflows; c = 0 and s = conj(b) / |b| when a is 0, (1, 0) when b is."""
    if b == 0:
        return 1.0, 0j
    absb = abs(b)   # NumPy's abs of a complex: the hypot of its parts, in its precision
    if a == 0:
        return 0.0, complex(np.conj(b) / absb)
    absa = abs(a)
    scale = absa + absb
    norm = scale * np.sqrt((absa / scale) ** 2 + (absb / scale) ** 2)
    return float(absa / norm), complex(a / absa * np.conj(b) / norm)


GAM, GAMSQ, RGAMSQ = 4096.0, 4096.0 ** 2, 1.0 / 4096.0 ** 2  # rotmg's rescaling steps (reference BLAS)


def rotmg(d1, d2, x1, y1, dtype=np.float64):
    """param (a NumPy array of 5: flag, h11, h21, h12, h22) of the modified Givens transformation H that
    zeros the second component of H (sqrt(d1) x1, sqrt(d2) y1)^T (scipy.linalg.blas ?rotmg, the
    reference BLAS algorithm in dtype's arithmetic; entries the flag implies are left 0). Host scalars
    in and out, as rotg. Real only, as cuBLAS."""
    _real_only("rotmg", dtype)
    t = np.dtype(dtype).type
    d1, d2, x1, y1 = t(d1), t(d2), t(x1), t(y1)
    zero, one = t(0), t(1)
    h11 = h12 = h21 = h22 = zero
    if d1 < 0:
        return np.array([-1, 0, 0, 0, 0], dtype)
    p2 = d2 * y1
    if p2 == 0:
        return np.array([-2, 0, 0, 0, 0], dtype)
    p1, q2 = d1 * x1, p2 * y1
    q1 = p1 * x1
    if abs(q1) > abs(q2):
        h21, h12 = -y1 / x1, p2 / p1
        u = one - h12 * h21
        if u <= 0:
            return np.array([-1, 0, 0, 0, 0], dtype)
        flag, d1, d2, x1 = 0, d1 / u, d2 / u, x1 * u
    else:
        if q2 < 0:
            return np.array([-1, 0, 0, 0, 0], dtype)
        h11, h22 = p1 / p2, x1 / y1
        u = one + h11 * h22
        flag, d1, d2, x1 = 1, d2 / u, d1 / u, y1 * u
    gam = t(GAM)
    for which in (1, 2):  # d1, then |d2|, brought within (RGAMSQ, GAMSQ), the scale folded into H
        d = d1 if which == 1 else abs(d2)
        while d != 0 and (d <= RGAMSQ or d >= GAMSQ):
            if flag == 0:
                h11, h22 = one, one
            elif flag == 1:
                h21, h12 = -one, one
            flag = -1
            g = gam if d <= RGAMSQ else one / gam  # d grows by g^2, H's row shrinks by g
            if which == 1:
                d1, h11, h12 = d1 * g * g, h11 / g, h12 / g
                d = d1
            else:
                d2, h21, h22 = d2 * g * g, h21 / g, h22 / g
                d = abs(d2)
    if flag == 0:
        h11 = h22 = zero
    elif flag == 1:
        h12 = h21 = zero
    return np.array([flag, h11, h21, h12, h22], dtype)
