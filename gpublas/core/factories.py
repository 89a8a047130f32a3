"""Kernel factories, as PyCUDA's: write the loop body (or the map and reduce expressions) in CUDA C,
get a callable that runs it on either backend.

    lin_comb = gpublas.ElementwiseKernel("float a, float* x, float* y, float* z",
                                         "z[i] = a*x[i] + y[i]", "lin_comb")
    lin_comb(2.0, x, y, z)                                  # i over the size of x (the first array)
    dot = gpublas.ReductionKernel(np.float32, "0", "a+b", "x[i]*y[i]", "float* x, float* y")
    float(dot(x, y))

The generated CUDA C text compiles through launch.load_source (memoized and cached on disk, like
every other kernel); a compile error raises gpublas.CompileError at construction, with the
compiler's log in `.log`. `source` holds the generated text.
"""
import builtins

import numpy as np

from . import elementwise as ew
from ..runtime import dtypes
from .array import DeviceArray
from ..runtime.launch import BLOCK, ceil_div, load_source

MAX_REDUCE_BLOCKS = 256  # partials per reduction: one block of BLOCK threads finishes them

# C pointee type -> the DeviceArray dtype it must be handed
_POINTEE = {"float": np.float32, "double": np.float64, "int": np.int32, "int32_t": np.int32,
            "long long": np.int64, "int64_t": np.int64, "unsigned char": np.uint8, "uint8_t": np.uint8,
            **{row.c: d for d, row in dtypes.TABLE.items() if row.storage_only}}  # __half, __nv_bfloat16
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.int32): "int",
          np.dtype(np.int64): "long long"}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict"}

_ELEMENTWISE = """#include "common.cuh"
{preamble}

extern "C" __global__ void {name}({arguments}, long long gpublas_start, long long n, long long gpublas_step) {{
    const long long gpublas_threads = (long long)gridDim.x * blockDim.x;
    for (long long i = gpublas_start + (blockIdx.x * (long long)blockDim.x + threadIdx.x) * gpublas_step; i < n;
         i += gpublas_threads * gpublas_step) {{
        {operation};
    }}
}}
"""

# Stage 1: each block folds a grid-stride slice of map(i) and reduces it (common.cuh's block_reduce:
# shuffles, then the warps' results through shared memory) into one partial; stage 2: one block
# reduces the partials. The order of every combination depends on n and the grid only, so results
# are deterministic.
_REDUCTION = """#include "common.cuh"
{preamble}

struct {name}_op {{
    __device__ __forceinline__ {T} operator()({T} a, {T} b) const {{ return ({reduce_expr}); }}
}};

extern "C" __global__ void {name}_stage1({arguments}, {T}* gpublas_partial, long long n) {{
    {T} gpublas_acc = ({T})({neutral});
    GRID_STRIDE_LOOP(long long, i, n)
        gpublas_acc = {name}_op()(gpublas_acc, ({T})({map_expr}));
    gpublas_acc = block_reduce(gpublas_acc, {name}_op(), ({T})({neutral}));
    if (threadIdx.x == 0) gpublas_partial[blockIdx.x] = gpublas_acc;
}}

extern "C" __global__ void {name}_stage2(const {T}* gpublas_in, {T}* gpublas_partial, long long n) {{
    {T} gpublas_acc = ({T})({neutral});
    for (long long i = threadIdx.x; i < n; i += blockDim.x)
        gpublas_acc = {name}_op()(gpublas_acc, gpublas_in[i]);
    gpublas_acc = block_reduce(gpublas_acc, {name}_op(), ({T})({neutral}));
    if (threadIdx.x == 0) gpublas_partial[0] = gpublas_acc;
}}
"""


def parse_arguments(arguments):
    """'float a, const float* x' -> [(name, pointee dtype or None, is_pointer), ...]."""
    parsed = []
    for part in arguments.split(","):
        part = part.strip()
        if not part:
            continue
        pointer = "*" in part or "[" in part
        words = [w for w in part.replace("*", " ").replace("[", " ").replace("]", " ").split()
                 if w not in _QUALIFIERS]
        if len(words) < 2:
            raise ValueError(f"argument '{part}': expected '<type> <name>'")
        ctype = " ".join(words[:-1])
        parsed.append((words[-1], _POINTEE.get(ctype) if pointer else None, pointer))
    return parsed


def check_arguments(kernel_name, spec, args):
    """Raises TypeError when the number of arguments or an array's dtype does not match `spec`."""
    if len(args) != len(spec):
        raise TypeError(f"{kernel_name}: takes {len(spec)} arguments ({', '.join(s[0] for s in spec)}), "
                        f"{len(args)} given")
    for (name, dtype, pointer), a in zip(spec, args):
        if pointer and isinstance(a, DeviceArray) and dtype is not None and a.dtype != dtype:
            raise TypeError(f"{kernel_name}: argument '{name}' is {np.dtype(dtype)}*, got a {a.dtype} array")
        if pointer and not isinstance(a, DeviceArray) and a is not None:
            raise TypeError(f"{kernel_name}: argument '{name}' is a pointer: pass a DeviceArray, "
                            f"got {type(a).__name__}")


def first_array_size(kernel_name, args):
    for a in args:
        if isinstance(a, DeviceArray):
            return a.size
    raise ValueError(f"{kernel_name}: no array argument to take the size from; pass n= or range=")


INDEX_LIMIT = 1 << 63  # the generated kernels index with long long


def check_index_range(kernel_name, spec, args, what, last):
    """Raises ValueError when `last` (the largest index i a launch reaches, or -1 for none) does not
    fit the kernel's 64-bit index or falls outside an array argument, naming that argument."""
    if last >= INDEX_LIMIT:
        raise ValueError(f"{kernel_name}: {what} reaches index {last}, beyond the kernel's 64-bit index "
                         f"(at most {INDEX_LIMIT - 1})")
    for (name, _, pointer), a in zip(spec, args):
        if pointer and isinstance(a, DeviceArray) and last >= a.size:
            raise ValueError(f"{kernel_name}: {what} reaches index {last} but argument '{name}' has "
                             f"only {a.size} elements")


class ElementwiseKernel:
    """`operation` (C statements using index i) for every i of a range, in a grid-stride loop."""

    def __init__(self, arguments, operation, name="elementwise_kernel", preamble=""):
        self.name = name
        self.spec = parse_arguments(arguments)
        self.source = _ELEMENTWISE.format(preamble=preamble, name=name, arguments=arguments, operation=operation)
        self.kernel = load_source(self.source, None, f"elementwise_kernel_{name}.cu").get(name)

    def __call__(self, *args, range=None, n=None, stream=None):
        """Runs for i in range(n) (n defaults to the size of the first array argument) or for the
        indices of `range` (a slice or range object with a positive step)."""
        check_arguments(self.name, self.spec, args)
        if range is not None:
            start, stop, step = range.start or 0, range.stop, range.step or 1
            if step <= 0 or stop is None:
                raise ValueError(f"{self.name}: range needs a stop and a positive step, got {range}")
        else:
            start, stop, step = 0, (first_array_size(self.name, args) if n is None else int(n)), 1
        if start < 0:
            raise ValueError(f"{self.name}: range starts at {start}; indices must not be negative")
        count = builtins.max(0, ceil_div(stop - start, step))
        what = f"n={stop}" if range is None else f"range={range}"
        check_index_range(self.name, self.spec, args, what, start + (count - 1) * step if count else -1)
        if count:
            self.kernel(ew.grid_for(count), BLOCK, *args, start, stop, step, stream=stream)


class ReductionKernel:
    """reduce_expr (over a and b, from `neutral`) of map_expr (using index i) for i in range(n):
    a 0-d DeviceArray of dtype_out. reduce_expr must be associative and commutative."""

    def __init__(self, dtype_out, neutral, reduce_expr, map_expr=None, arguments=None, name="reduce_kernel",
                 preamble=""):
        self.dtype = np.dtype(dtype_out)
        if self.dtype not in _CTYPE:
            raise TypeError(f"ReductionKernel: dtype_out must be float32, float64, int32 or int64, "
                            f"got {self.dtype}")
        ctype = _CTYPE[self.dtype]
        if arguments is None:
            arguments = f"const {ctype}* in"
        self.name = name
        self.spec = parse_arguments(arguments)
        if map_expr is None:
            pointers = [s[0] for s in self.spec if s[2]]
            if not pointers:
                raise ValueError("ReductionKernel: map_expr is needed when no argument is a pointer")
            map_expr = f"{pointers[0]}[i]"
        self.source = _REDUCTION.format(preamble=preamble, name=name, arguments=arguments, T=ctype,
                                        neutral=neutral, reduce_expr=reduce_expr, map_expr=map_expr)
        module = load_source(self.source, None, f"reduction_kernel_{name}.cu")
        self.stage1 = module.get(f"{name}_stage1")
        self.stage2 = module.get(f"{name}_stage2")

    def __call__(self, *args, n=None, stream=None):
        """The reduction over i in range(n), n defaulting to the size of the first array argument."""
        check_arguments(self.name, self.spec, args)
        n = first_array_size(self.name, args) if n is None else int(n)
        check_index_range(self.name, self.spec, args, f"n={n}", n - 1 if n > 0 else -1)
        out = DeviceArray((), self.dtype)
        blocks = builtins.max(1, builtins.min(ew.grid_for(n), MAX_REDUCE_BLOCKS))
        if blocks == 1:
            self.stage1(1, BLOCK, *args, out, n, stream=stream)
            return out
        partial = DeviceArray((blocks,), self.dtype)
        self.stage1(blocks, BLOCK, *args, partial, n, stream=stream)
        self.stage2(1, BLOCK, partial, out, blocks, stream=stream)
        return out
