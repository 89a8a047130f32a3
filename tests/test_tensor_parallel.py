"""nn.distributed's model parallelism: Megatron's split layers and the rank grid, each rank of a real MPI
job (tests/mpi_tp_worker.py) checking itself against the one-device model built from the same seed."""
import numpy as np
import pytest

import gpublas
import nn
from test_distributed import HERE, mpiexec, needs_mpi


@needs_mpi
@pytest.mark.parametrize("wire", ["", "pinned"])
def test_column_then_row_parallel_match_one_device(tmp_path, wire):
    job = mpiexec(2, str(HERE / "mpi_tp_worker.py"), "layers", str(tmp_path), *([wire] if wire else []))
    assert job.returncode == 0, job.stdout + job.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok-0", "ok-1", "tp.npz"]


@needs_mpi
def test_grid_of_four_ranks_and_a_tensor_size_that_does_not_divide(tmp_path):
    job = mpiexec(4, str(HERE / "mpi_tp_worker.py"), "grid", str(tmp_path))
    assert job.returncode == 0, job.stdout + job.stderr
    assert len(list(tmp_path.iterdir())) == 4


def test_one_rank_group_is_the_plain_layer():
    dist = pytest.importorskip("nn.distributed", reason="needs mpi4py")
    nn.manual_seed(2)
    ref = nn.Dense(6, 4).double()
    nn.manual_seed(2)
    col = dist.ColumnParallelDense(6, 4).double()
    x = gpublas.to_device(np.random.default_rng(0).normal(size=(5, 6)))
    np.testing.assert_array_equal(col(x).get(), ref(x).get())
    assert col.group.stats["collectives"] == 0     # a group of one rank sends nothing
    assert "4 on each of 1 ranks" in repr(col)
