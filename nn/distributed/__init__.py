"""Training over MPI (mpi4py and Open MPI): `comm` is what every kind of parallelism shares (ranks, barriers,
shards, job-wide abort, Wire: a device buffer meeting MPI); `data_parallel` is DataParallel, PyTorch's
DistributedDataParallel (every rank the whole model, gradients averaged in buckets); `group` the process
groups of model parallelism (Group: counted collectives on device arrays; init_grid: tensor x data ranks);
`tensor_parallel` Megatron-LM's split layers (ColumnParallelDense, RowParallelDense); `columns` AlexNet's
columns over ranks (ColumnConv2d, ColumnDense) and `alexnet` its two-column network.

    mpiexec -n 2 python train.py
    import nn.distributed as dist
    net = dist.DataParallel(make_model())
"""
from .comm import MPI, Wire, abort, all_sum, barrier, cuda_aware, is_main, rank, shard, world_size
from .data_parallel import BUCKET_BYTES, Bucket, DataParallel, make_buckets, save
from .alexnet import ColumnAlexNet
from .columns import ColumnConv2d, ColumnDense
from .group import Grid, Group, as_group, init_grid
from .tensor_parallel import (ColumnParallelDense, RowParallelDense, Sharded, collective_stats,
                              reset_collective_stats)

__all__ = ["BUCKET_BYTES", "Bucket", "ColumnAlexNet", "ColumnConv2d", "ColumnDense", "ColumnParallelDense", "DataParallel", "Grid", "Group", "MPI",
           "RowParallelDense", "Sharded", "Wire", "abort", "all_sum", "as_group", "barrier", "collective_stats",
           "cuda_aware", "init_grid", "is_main", "make_buckets", "rank", "reset_collective_stats", "save", "shard",
           "world_size"]
# Megatron-LM's transformer split (issue 42): heads, vocabulary, parallelize(model, group)
from .attention_parallel import ParallelMultiheadAttention
from .tensor_parallel import clip_grad_norm, split_parameters
from .parallelize import TensorParallelGPT, default_plan, megatron_collectives, parallelize, parallelize_module
from .vocab_parallel import VocabParallelCrossEntropy, VocabParallelEmbedding

__all__ += ["ParallelMultiheadAttention", "TensorParallelGPT", "VocabParallelCrossEntropy", "VocabParallelEmbedding",
            "clip_grad_norm", "default_plan", "megatron_collectives", "parallelize", "parallelize_module",
            "split_parameters"]
