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


@needs_mpi
def test_two_column_cnn_a_column_per_rank_matches_both_on_one(tmp_path):
    job = mpiexec(2, str(HERE / "mpi_tp_worker.py"), "alexnet", str(tmp_path))
    assert job.returncode == 0, job.stdout + job.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok-0", "ok-1"]


def test_two_columns_on_one_rank_are_torchs_grouped_alexnet():
    """Both columns on one rank compute what PyTorch computes with Conv2d(groups=2) for the layers that
    read their own column (AlexNet as Caffe and torchvision's first version wrote it), from the same
    state_dict; and a column layer refuses what does not split."""
    dist = pytest.importorskip("nn.distributed", reason="needs mpi4py")
    torch = pytest.importorskip("torch")
    T = torch.nn
    nn.manual_seed(1)
    net = dist.ColumnAlexNet(image=8, width=2).double()
    c, w, h = 2, 2, 16
    twin = T.Sequential(
        T.Conv2d(1, c * w, 3, padding=1), T.ReLU(), T.MaxPool2d(2),
        T.Conv2d(c * w, c * 2 * w, 3, padding=1, groups=2), T.ReLU(), T.MaxPool2d(2),
        T.Conv2d(c * 2 * w, c * 3 * w, 3, padding=1), T.ReLU(),
        T.Conv2d(c * 3 * w, c * 3 * w, 3, padding=1, groups=2), T.ReLU(),
        T.Conv2d(c * 3 * w, c * 2 * w, 3, padding=1, groups=2), T.ReLU(), T.Flatten(),
        T.Linear(c * 2 * w * 4, c * h), T.ReLU(), T.Linear(c * h, c * h), T.ReLU(), T.Linear(c * h, 10)).double()
    state = net.state_dict()
    twin.load_state_dict({k: torch.tensor(v) for k, v in zip(twin.state_dict(), state.values())})
    x = np.random.default_rng(0).normal(size=(3, 1, 8, 8))
    xt = torch.tensor(x, requires_grad=True)
    out = twin(xt)
    np.testing.assert_allclose(net(gpublas.to_device(x)).get(), out.detach().numpy(), rtol=1e-12, atol=1e-14)
    dy = np.random.default_rng(1).normal(size=(3, 10))
    out.backward(torch.tensor(dy))
    np.testing.assert_allclose(net.backward(gpublas.to_device(dy)).get(), xt.grad.numpy(), rtol=1e-11, atol=1e-13)
    for (name, p), tp in zip(net.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(p.grad.get(), tp.grad.numpy(), rtol=1e-11, atol=1e-13, err_msg=name)
    mnist = dist.ColumnAlexNet(image=28, width=1)            # sized for MNIST: a third pooling before fc6
    assert mnist(np.zeros((2, 1, 28, 28), np.float32)).shape == (2, 10) and mnist[9].in_features == 2 * 2 * 9
    with pytest.raises(ValueError, match="in features=5 do not divide among 2 columns"):
        dist.ColumnConv2d(5, 4, 3, reads="own")
    with pytest.raises(ValueError, match="reads='both'"):
        dist.ColumnDense(4, 4, reads="both")


@needs_mpi
def test_alexnet_example_on_two_ranks_saves_the_one_device_model(tmp_path):
    dist = pytest.importorskip("nn.distributed", reason="needs mpi4py")
    from nn.examples.digits import load
    job = mpiexec(2, "-m", "nn.examples.alexnet", "--epochs", "1", "--quiet", "--dropout", "0",
                  "--save", str(tmp_path / "w.npz"), timeout=300)
    assert job.returncode == 0, job.stdout + job.stderr
    lines = job.stdout.strip().splitlines()
    assert len(lines) == 1 and "on 2 ranks (columns on 2 x data 1;" in lines[0], lines   # --quiet: rank 0's summary
    printed = float(lines[0].split("test accuracy ")[1].split()[0])
    # the checkpoint holds the one-device names and shapes: both columns load on one process and score
    # what the two ranks scored (up to an image whose argmax float32 rounding may flip)
    net = nn.load(dist.ColumnAlexNet(image=8, width=8), tmp_path / "w.npz").eval()
    _, _, Xte, yte = load(seed=0)
    assert abs((net(Xte).get().argmax(1) == yte).mean() - printed) <= 1.5 / len(yte)
    bad = mpiexec(2, "-m", "nn.examples.alexnet", "--tensor-parallel", "3", "--quiet", timeout=120)
    assert bad.returncode != 0 and "two columns (1 or 2 ranks hold them)" in bad.stderr
