"""The exceptions gpublas raises; each message names the problem and the values involved."""


class GpublasError(RuntimeError):
    """Base class of gpublas' own errors."""


class ConfigError(GpublasError, ValueError):
    """An environment variable (GPUBLAS_*, CXX) holds a value gpublas cannot use: the message is one
    line naming the variable, its value and what is allowed (gpublas.config)."""


class CompileError(GpublasError):
    """A CUDA C source failed to compile. `log` holds the compiler's output, `filename` and `line`
    the first error it reported (None where it named none)."""

    def __init__(self, message, log, filename=None, line=None):
        super().__init__(f"{message}\n{log}")
        self.log = log
        self.filename = filename
        self.line = line


class OutOfMemoryError(GpublasError, MemoryError):
    """A device allocation failed even after the pool released its cached blocks."""

    def __init__(self, requested, in_use, total=None):
        where = f", device total {total} bytes" if total else ""
        super().__init__(f"out of device memory: asked for {requested} bytes with {in_use} bytes "
                         f"in use{where}")
        self.requested = requested
        self.in_use = in_use
        self.total = total


class FreedArrayError(GpublasError):
    """A DeviceArray (or a view of it) was used after its memory was freed."""


class LaunchError(GpublasError):
    """A kernel launch failed (bad configuration, or an error reported by the device/simulator)."""


class IllegalAddressError(LaunchError):
    """A kernel accessed memory outside any live allocation (CUDA's "an illegal memory access was
    encountered"). On the simulator the message names the kernel, block and thread, the address,
    and where it lies relative to the nearest allocation (GPUBLAS_SIM_MEMCHECK=1 catches every
    access past an allocation's end)."""


class SingularMatrixWarning(RuntimeWarning):
    """A factorization met an exactly zero pivot (getrf_batched): the matrix is singular. The factors
    are still returned, as LAPACK's getrf returns them with info > 0."""


class GraphError(GpublasError):
    """Work issued inside `gpublas.graph()` that a graph cannot hold (a host read-back, a pageable
    host copy, a synchronize, a kernel compile, a capture inside a capture), raised at the call."""
