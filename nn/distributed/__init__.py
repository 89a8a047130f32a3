"""Training over MPI (mpi4py and Open MPI): `comm` is what every kind of parallelism shares (ranks, barriers,
shards, job-wide abort, Wire: a device buffer meeting MPI); `data_parallel` is DataParallel, PyTorch's
DistributedDataParallel (every rank the whole model, gradients averaged in buckets).

    mpiexec -n 2 python train.py
    import nn.distributed as dist
    net = dist.DataParallel(make_model())
"""
from .comm import MPI, Wire, abort, all_sum, barrier, cuda_aware, is_main, rank, shard, world_size
from .data_parallel import BUCKET_BYTES, Bucket, DataParallel, make_buckets, save

__all__ = ["BUCKET_BYTES", "Bucket", "DataParallel", "MPI", "Wire", "abort", "all_sum", "barrier", "cuda_aware", "is_main",
           "make_buckets", "rank", "save", "shard", "world_size"]
