"""Megatron-LM's transformer split in nn.distributed: the attention heads, the transformer layer and the GPT
(vocabulary-parallel embedding, head and cross-entropy) split over two ranks of a real MPI job, each rank
checking itself against the one-device model built from the same seed (tests/mpi_megatron_worker.py)."""
import numpy as np
import pytest

import gpublas
import nn
from test_distributed import HERE, mpiexec, needs_mpi


@needs_mpi
@pytest.mark.parametrize("scenario", ["layers", "gpt"])
def test_split_transformer_matches_one_device(tmp_path, scenario):
    job = mpiexec(2, str(HERE / "mpi_megatron_worker.py"), scenario, str(tmp_path))
    assert job.returncode == 0, job.stdout + job.stderr
    assert {"ok-0", "ok-1"} <= {p.name for p in tmp_path.iterdir()}
