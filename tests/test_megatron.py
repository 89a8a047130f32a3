"""Megatron-LM's transformer split in nn.distributed: the attention heads, the transformer layer and the GPT
(vocabulary-parallel embedding, head and cross-entropy) split over two ranks of a real MPI job, each rank
checking itself against the one-device model built from the same seed (tests/mpi_megatron_worker.py)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from test_distributed import HERE, ROOT, mpiexec, needs_mpi


@needs_mpi
@pytest.mark.parametrize("scenario", ["layers", "gpt"])
def test_split_transformer_matches_one_device(tmp_path, scenario):
    job = mpiexec(2, str(HERE / "mpi_megatron_worker.py"), scenario, str(tmp_path))
    assert job.returncode == 0, job.stdout + job.stderr
    assert {"ok-0", "ok-1"} <= {p.name for p in tmp_path.iterdir()}


def summary(text):
    """(val loss, train loss) from the example's last line."""
    line = text.strip().splitlines()[-1]
    m = re.match(r"gpt: val loss ([\d.]+) after 3 steps, .* \(train loss ([\d.]+),", line)
    assert m, line
    return float(m.group(1)), float(m.group(2))


@needs_mpi
def test_example_split_over_two_and_four_ranks_trains_as_one_process(tmp_path):
    """mpiexec -n 2 ... --tensor-parallel 2 and -n 4 ... --tensor-parallel 2 --distributed train the weights one
    process trains (float32 sums in another order), print its losses and say how the ranks were split."""
    args = ["-m", "nn.examples.gpt", "--quiet", "--steps", "3", "--batch-size", "4", "--n-layer", "1", "--n-embd",
            "32", "--n-head", "2", "--block-size", "16"]
    one = subprocess.run([sys.executable, *args, "--save", str(tmp_path / "one.npz")], capture_output=True,
                         text=True, env=dict(os.environ, GPUBLAS_BACKEND="sim"), cwd=ROOT)
    assert one.returncode == 0, one.stderr
    with np.load(tmp_path / "one.npz") as f:
        want = {k: f[k] for k in f.files}
    for n, extra, split in ((2, [], "(tensor 2 x data 1)"), (4, ["--distributed"], "(tensor 2 x data 2)")):
        path = tmp_path / f"split{n}.npz"
        job = mpiexec(n, *args, "--tensor-parallel", "2", *extra, "--save", str(path))
        assert job.returncode == 0, job.stdout + job.stderr
        assert job.stdout.count("gpt: val loss") == 1 and f"on {n} ranks {split}" in job.stdout, job.stdout
        np.testing.assert_allclose(summary(job.stdout), summary(one.stdout), atol=2e-3)
        with np.load(path) as f:
            assert list(f.files) == list(want)
            for k in f.files:
                np.testing.assert_allclose(f[k], want[k], rtol=0, atol=2e-5, err_msg=k)
