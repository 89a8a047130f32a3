"""Process groups for model parallelism: Group, an MPI communicator whose collectives move device arrays
and are counted, and init_grid, the tensor x data grid of ranks (Megatron-LM's initialize_model_parallel,
PyTorch's DeviceMesh of two dimensions).

    mpiexec -n 4 python train.py
    grid = dist.init_grid(tensor=2)    # ranks {0, 1} and {2, 3} split each layer; {0, 2} and {1, 3} the data
    layer = dist.ColumnParallelDense(512, 2048, group=grid.tensor)
    net = dist.DataParallel(model, comm=grid.data)

Each collective runs on a device buffer through Wire (a NumPy view on the sim, the device pointer where MPI
is CUDA-aware, pinned staging otherwise) and adds to `stats`: how many collectives, how many bytes each rank
handed to MPI, and the seconds spent in them."""
import time

import numpy as np

import gpublas

from .comm import MPI, Wire, _comm

_OPS = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}


class Group:
    """An MPI communicator for tensor-parallel layers (default MPI.COMM_WORLD), with collectives on
    DeviceArrays. `stats` = {"collectives", "bytes", "seconds"} since the last reset_stats()."""

    def __init__(self, comm=None, wire=None):
        """`wire` forces a Wire mode ("pinned" tests the staged path on the simulator)."""
        self.comm = _comm(comm)
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.wire = wire
        self.reset_stats()

    def reset_stats(self):
        self.stats = {"collectives": 0, "bytes": 0, "seconds": 0.0}

    def _count(self, nbytes, t0):
        self.stats["collectives"] += 1
        self.stats["bytes"] += int(nbytes)
        self.stats["seconds"] += time.perf_counter() - t0

    def all_reduce(self, x, op="sum"):
        """x <- op over ranks of x, in place (every rank gets the same values); returns x. A size-1
        group does nothing and counts nothing."""
        if self.size == 1:
            return x
        if not x.c_contiguous:
            raise ValueError(f"Group.all_reduce: needs a C-contiguous array, got strides {x.strides}")
        t0 = time.perf_counter()
        Wire(x, self.wire).run(lambda buf: self.comm.Allreduce(MPI.IN_PLACE, buf, op=_OPS[op]))
        self._count(x.nbytes, t0)
        return x

    def all_gather(self, x, axis=0):
        """The ranks' x (one shape on every rank) joined along `axis` in rank order: a new array with
        shape[axis] multiplied by the group's size. One MPI_Allgather into a rank-major buffer, then (for
        axis != 0) one device copy that moves the rank axis into place."""
        x = gpublas.ascontiguousarray(x)
        if self.size == 1:
            return x.copy()
        axis = axis % x.ndim
        t0 = time.perf_counter()
        parts = gpublas.empty((self.size,) + x.shape, x.dtype)   # parts[r] = rank r's x
        send = Wire(x, self.wire)
        recv = Wire(parts, self.wire)
        _ready(send, x)
        self.comm.Allgather(send.stage if send.stage is not None else x, recv.stage if recv.stage is not None else parts)
        if recv.mode == "pinned":
            parts.set(recv.stage)
        self._count(x.nbytes, t0)
        if axis == 0:
            return parts.reshape((self.size * x.shape[0],) + x.shape[1:])
        return gpublas.concatenate([parts[r] for r in range(self.size)], axis=axis)

    def reduce_scatter(self, x, axis=0):
        """This rank's slice along `axis` of the sum over ranks of x (x.shape[axis] divisible by the
        group's size): the adjoint of all_gather, one MPI_Reduce_scatter_block on a rank-major copy."""
        x = gpublas.ascontiguousarray(x)
        axis = axis % x.ndim
        n = x.shape[axis]
        if n % self.size:
            raise ValueError(f"Group.reduce_scatter: axis {axis} of {x.shape} does not split into {self.size} ranks")
        if self.size == 1:
            return x.copy()
        step = n // self.size
        t0 = time.perf_counter()
        chunks = [x[(slice(None),) * axis + (slice(r * step, (r + 1) * step),)] for r in range(self.size)]
        parts = gpublas.stack(chunks) if axis else x.reshape((self.size, step) + x.shape[1:])
        out = gpublas.empty(chunks[0].shape, x.dtype)
        send, recv = Wire(parts, self.wire), Wire(out, self.wire)
        _ready(send, parts)
        self.comm.Reduce_scatter_block(send.stage if send.stage is not None else parts,
                                       recv.stage if recv.stage is not None else out, op=MPI.SUM)
        if recv.mode == "pinned":
            out.set(recv.stage)
        self._count(x.nbytes, t0)
        return out

    def broadcast(self, x, root=0):
        """x <- rank `root`'s x, in place; returns x."""
        if self.size == 1:
            return x
        t0 = time.perf_counter()
        Wire(x, self.wire).run(lambda buf: self.comm.Bcast(buf, root=root))
        self._count(x.nbytes, t0)
        return x

    def all_gather_host(self, a, axis=0):
        """A host ndarray's all-gather along `axis` (for state_dict; not counted as a step's traffic)."""
        return np.concatenate(self.comm.allgather(np.ascontiguousarray(a)), axis=axis)

    def __repr__(self):
        return f"Group(rank {self.rank} of {self.size})"


def _ready(send, x):
    """Makes the send side of a collective readable by MPI: staged to pinned memory, or the kernels
    that write it finished where MPI reads the device directly."""
    if send.mode == "pinned":
        x.get(out=send.stage)
    elif send.mode == "device":
        gpublas.synchronize()


def as_group(group):
    """A Group from a Group, a Grid (its tensor group), an MPI communicator or None (COMM_WORLD)."""
    if isinstance(group, Group):
        return group
    if isinstance(group, Grid):
        return group.tensor
    return Group(group)


class Grid:
    """Ranks as a (data, tensor) grid: `tensor` (a Group) holds T consecutive ranks that split each
    layer; `data` (an MPI communicator, what DataParallel takes) holds the ranks with the same place in
    their tensor group. World rank r = data_rank * T + tensor_rank."""

    def __init__(self, tensor, comm=None, wire=None):
        world = _comm(comm)
        size, r = world.Get_size(), world.Get_rank()
        if not isinstance(tensor, (int, np.integer)) or tensor < 1 or size % tensor:
            raise ValueError(f"init_grid: tensor={tensor!r} must be a positive divisor of the {size} ranks "
                             f"(mpiexec -n {size}); a tensor group holds that many consecutive ranks")
        self.world = world
        self.tensor = Group(world.Split(color=r // tensor, key=r), wire)
        self.data = world.Split(color=r % tensor, key=r)
        self.tensor_size, self.data_size = int(tensor), size // tensor
        self.tensor_rank, self.data_rank = self.tensor.rank, self.data.Get_rank()

    def __repr__(self):
        return (f"Grid(data {self.data_rank} of {self.data_size} x tensor {self.tensor_rank} of "
                f"{self.tensor_size})")


def init_grid(tensor=1, comm=None, wire=None):
    """Splits `comm` (default COMM_WORLD) into tensor groups of `tensor` consecutive ranks and data
    groups across them (MPI_Comm_split). A size that does not divide the world raises ValueError on
    every rank (each sees the same sizes), before any collective."""
    return Grid(tensor, comm, wire)
