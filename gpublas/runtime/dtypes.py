"""The element types a DeviceArray holds, as one table: everything the rest of gpublas needs to know
about a dtype (its C type in the kernels, its code in memory.cu's casts, how a scalar of it is
passed to a kernel, its DLPack type) is a column here, so a new dtype is a new row.

    float16   NumPy's IEEE half;  C: __half (cuda_fp16.h)
    bfloat16  ml_dtypes.bfloat16 (the NumPy bfloat16 JAX uses);  C: __nv_bfloat16 (cuda_bf16.h)

    complex64, complex128  NumPy's;  C: cfloat, cdouble (common.cuh's gcomplex<R>, cuComplex's layout)

    int8, int16, uint8, uint16, uint32, uint64, bool  NumPy's; stored and converted as themselves,
    computed in int32 or int64 (uint64 as itself) by the elementwise maps (gpublas/core/promotion.py's COMPUTE).

16-bit floats are storage types: kernels load them as float, compute in float and round once on
store (common.cuh's load_as / store_as), as CUDA's own __hadd on bfloat16 and PyTorch do.
"""
import struct

import ml_dtypes
import numpy as np

float16 = np.float16
bfloat16 = ml_dtypes.bfloat16

_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 4, 5, 6  # DLPack's DLDataTypeCode


class DType:
    """One row: `c` the C type kernels see as `real`; `src` memory.cu's SRC_* code of the type as a
    cast's source; `arg` the struct code of a scalar of it passed to a kernel (a 16-bit float goes
    as its bit pattern, 'H'; a complex one by value, 'C' / 'Z': pack_layout); `compute` the dtype its kernels compute in; `dlpack` (type code, bits);
    `typestr` its CUDA array interface type (None for bfloat16, which that interface cannot name)."""

    def __init__(self, dtype, c, src, arg, dlpack, compute=None):
        self.dtype, self.c, self.src, self.arg, self.dlpack = np.dtype(dtype), c, src, arg, dlpack
        self.compute = np.dtype(compute or dtype)
        self.storage_only = self.compute != self.dtype  # loaded and stored, computed in `compute`
        self.typestr = None if dlpack[0] == _DL_BFLOAT else self.dtype.str


TABLE = {row.dtype: row for row in (
    DType(np.float32, "float", 0, "f", (_DL_FLOAT, 32)),
    DType(np.float64, "double", 1, "d", (_DL_FLOAT, 64)),
    DType(np.int32, "int", 2, "i", (_DL_INT, 32)),
    DType(np.int64, "long long", 3, "q", (_DL_INT, 64)),
    DType(np.uint8, "unsigned char", 4, "B", (_DL_UINT, 8)),
    DType(np.bool_, "bool", 5, "?", (_DL_BOOL, 8)),
    DType(float16, "__half", 6, "H", (_DL_FLOAT, 16), compute=np.float32),
    DType(bfloat16, "__nv_bfloat16", 7, "H", (_DL_BFLOAT, 16), compute=np.float32),
    DType(np.complex64, "cfloat", 8, "C", (_DL_COMPLEX, 64)),
    DType(np.complex128, "cdouble", 9, "Z", (_DL_COMPLEX, 128)),
    DType(np.int8, "signed char", 10, "b", (_DL_INT, 8)),
    DType(np.uint16, "unsigned short", 11, "H", (_DL_UINT, 16)),
    DType(np.uint32, "unsigned int", 12, "I", (_DL_UINT, 32)),
    DType(np.uint64, "unsigned long long", 13, "Q", (_DL_UINT, 64)),
    DType(np.int16, "short", 14, "h", (_DL_INT, 16)),
)}
DTYPES = tuple(TABLE)
HALVES = tuple(d for d, row in TABLE.items() if row.storage_only)  # float16, bfloat16
FLOATS = (np.dtype(np.float32), np.dtype(np.float64)) + HALVES
COMPLEX = (np.dtype(np.complex64), np.dtype(np.complex128))
# A complex kernel parameter's code (the table's `arg`): (struct code of each part, size = alignment)
_COMPLEX_ARGS = {"C": ("f", 8), "Z": ("d", 16)}


def row(dtype):
    """The table's row of `dtype`, or a TypeError naming the dtypes gpublas holds."""
    try:
        return TABLE[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"unsupported dtype {dtype}; gpublas arrays hold "
                        f"{', '.join(str(d) for d in DTYPES)}") from None


_CANONICAL = {**{d: d for d in TABLE}, **{d.type: d for d in TABLE}}  # np.float32 and its dtype -> the dtype


def canonical(dtype):
    """The dtype gpublas holds for `dtype` (a dtype, scalar type or name), or row's TypeError; a dtype
    or scalar type costs one dict lookup (every new array asks)."""
    try:
        return _CANONICAL[dtype]
    except (KeyError, TypeError):
        return row(dtype).dtype


def complex_of(dtype):
    """The complex dtype of real float `dtype`'s precision (NumPy's: float32 -> complex64, anything
    else -> complex128); a complex dtype is its own."""
    dtype = np.dtype(dtype)
    return dtype if dtype.kind == "c" else np.dtype(np.complex64 if dtype == np.float32 else np.complex128)


def real_of(dtype):
    """The dtype of a complex dtype's parts (complex64 -> float32); a real dtype is its own."""
    dtype = np.dtype(dtype)
    return np.dtype(f"f{dtype.itemsize // 2}") if dtype.kind == "c" else dtype


def is_float(dtype):
    """float16, bfloat16, float32 or float64 (bfloat16's NumPy kind is 'V', not 'f')."""
    return np.dtype(dtype) in FLOATS


def round_to(x, dtype):
    """float64 values `x` rounded once to nearest even into 16-bit `dtype`, as CUDA's __double2half /
    __double2bfloat16. (NumPy's float64 -> float16 rounds once; ml_dtypes' float64 -> bfloat16 goes
    through float32 and can round twice, so it is rounded to float32 with round-to-odd first:
    float32 keeps 24 bits >= 8 + 2, so the second rounding is then exact, as CUDA does it.)"""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if np.dtype(dtype) == np.float16:
            return x.astype(np.float16)
        f = x.astype(np.float32)
        inexact = (f.astype(np.float64) != x) & np.isfinite(f)
        bits = f.view(np.uint32).copy()
        bits -= (inexact & (np.abs(f.astype(np.float64)) > np.abs(x))).astype(np.uint32)  # toward zero
        bits |= inexact.astype(np.uint32)  # and odd: the sticky bit
        return bits.view(np.float32).astype(dtype)


def scalar_arg(dtype, value):
    """`value` as a kernel's scalar argument of C type TABLE[dtype].c: a Python number, or for a
    16-bit float its bit pattern (round_to: nearest even)."""
    dtype = np.dtype(dtype)
    if dtype in HALVES:
        return int(round_to(value, dtype).view(np.uint16))
    return bool(value) if dtype.kind == "b" else dtype.type(value).item()


def pack_layout(codes, prefix="@"):
    """Where a kernel's parameters sit in an argument buffer starting with struct format `prefix`
    (the sim's launch header, or nothing): (struct format of the whole buffer, each parameter's size,
    each parameter's offset, the indices of complex parameters). `codes` are source.py's, one per
    parameter: struct codes, and 'C' / 'Z' for a complex64 / complex128 passed by value, which struct
    cannot say: its two parts, after pad bytes to its alignment (cuComplex's: its size)."""
    fmt, sizes, offsets, complex_at = prefix, [], [], []
    for i, c in enumerate(codes):
        if c in _COMPLEX_ARGS:
            part, size = _COMPLEX_ARGS[c]
            pad = -struct.calcsize(fmt) % size
            fmt += (f"{pad}x" if pad else "") + part * 2
            complex_at.append(i)
        else:
            size = struct.calcsize("@" + c)
            fmt += c
        sizes.append(size)
        offsets.append(struct.calcsize(fmt) - size)
    return fmt, sizes, offsets, tuple(complex_at)


def split_complex(args, complex_at):
    """`args` with each complex argument at the indices `complex_at` as its two parts (pack_layout's
    format takes them so)."""
    out = list(args)
    for i in reversed(complex_at):
        v = complex(out[i])
        out[i:i + 1] = (v.real, v.imag)
    return out
