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
import time

import numpy as np

import gpublas

from .. import kernels as K
from ..checkpoint import save_state
from ..layers.dropout import Dropout
from .comm import _SEED_STRIDE, MPI, Wire, _comm, barrier, is_main

BUCKET_BYTES = 25 << 20   # PyTorch DDP's default bucket_cap_mb


def save(model, path, comm=None):
    """nn.save written by rank 0 only, then a barrier so that no rank reads the file before it exists.
    Every rank takes the state_dict (a model split over ranks gathers its parts in it, collectively);
    rank 0 writes the whole model's. Returns the path on every rank."""
    model = model.module if isinstance(model, DataParallel) else model
    state = model.state_dict()
    if is_main(comm):
        save_state(state, path)
    barrier(comm)
    return path


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
