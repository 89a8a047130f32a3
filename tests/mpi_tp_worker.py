"""What each rank runs in tests/test_tensor_parallel.py (launched by mpiexec): python mpi_tp_worker.py
SCENARIO OUTDIR [WIRE]. Each rank checks itself against the one-device model it also builds (same seed),
so a failed assertion aborts the job with its traceback.

layers:  the Megatron pair ColumnParallelDense -> RowParallelDense (and their gather_output /
         input_is_parallel=False forms) against Dense -> Dense: outputs, dx, gradients, one collective per
         operator, state_dict gathered and loaded back, dist.save from rank 0, Group's collectives.
grid:    init_grid(tensor=2) on 4 ranks: the groups' members; a size that does not divide the world;
         the two-column CNN split over each tensor group and DataParallel over the data groups, against
         one process training on the whole batch.
alexnet: the two-column CNN with a column per rank against both columns on one rank: outputs, dx,
         gradients and three SGD steps, the exchanges counted, checkpoints between the two.
"""
import sys
from pathlib import Path

import numpy as np

import gpublas
import nn
import nn.distributed as dist

TOL = dict(rtol=1e-12, atol=1e-13)


def close(a, b):
    np.testing.assert_allclose(a.get() if isinstance(a, gpublas.DeviceArray) else a,
                               b.get() if isinstance(b, gpublas.DeviceArray) else b, **TOL)


def gathered_grads(model):
    """{name: the whole model's gradient}: each sharded parameter's grad gathered as its data is."""
    return {name: m._full_state(local, p.grad.get()) for name, p, m, local in model._named_state(owners=True)}


def layers(out, wire):
    g = dist.Group(wire=wire)
    rng = np.random.default_rng(5)
    x, dy = rng.normal(size=(3, 4, 7)), rng.normal(size=(3, 4, 5))

    nn.manual_seed(3)
    ref = nn.Sequential(nn.Dense(7, 6, activation="gelu"), nn.Dense(6, 5)).double()
    nn.manual_seed(3)
    tp = nn.Sequential(dist.ColumnParallelDense(7, 6, activation="gelu", group=g),
                       dist.RowParallelDense(6, 5, group=g)).double()
    assert tp[0].weight.shape == (3, 7) and tp[1].weight.shape == (5, 3) and tp[1].bias.shape == (5,)
    state = tp.state_dict()                     # gathered: the one-device names and shapes
    assert list(state) == list(ref.state_dict())
    for k, v in ref.state_dict().items():
        np.testing.assert_array_equal(state[k], v)   # drawn whole, then split: the same weights

    g.reset_stats()
    y = tp(gpublas.to_device(x))
    assert g.stats["collectives"] == 1 and g.stats["bytes"] == 3 * 4 * 5 * 8   # the row layer's all-reduce
    close(y, ref(gpublas.to_device(x)))
    dx = tp.backward(gpublas.to_device(dy))
    assert g.stats["collectives"] == 2                                          # the column layer's dx
    close(dx, ref.backward(gpublas.to_device(dy)))
    grads = gathered_grads(tp)
    for name, p in ref.named_parameters():
        close(grads[name], p.grad.get())

    # the other forms: whole output gathered; a row layer that takes the whole input
    x8 = rng.normal(size=(3, 4, 8))
    nn.manual_seed(4)
    ref2 = nn.Dense(8, 6).double()
    nn.manual_seed(4)
    col = dist.ColumnParallelDense(8, 6, gather_output=True, group=g).double()
    nn.manual_seed(4)
    row = dist.RowParallelDense(8, 6, input_is_parallel=False, group=g).double()
    for layer in (col, row):
        ref2.zero_grad()
        close(layer(gpublas.to_device(x8)), ref2(gpublas.to_device(x8)))
        d = rng.normal(size=(3, 4, 6))
        close(layer.backward(gpublas.to_device(d)), ref2.backward(gpublas.to_device(d)))
        grads = gathered_grads(layer)
        close(grads["weight"], ref2.weight.grad.get())
        close(grads["bias"], ref2.bias.grad.get())

    # a checkpoint of the whole model loads into the split one, and dist.save writes the whole from rank 0
    nn.manual_seed(99)
    other = nn.Sequential(nn.Dense(7, 6, activation="gelu"), nn.Dense(6, 5)).double()
    tp.load_state_dict(other.state_dict())
    close(tp(gpublas.to_device(x)), other(gpublas.to_device(x)))
    dist.save(tp, out / "tp.npz")
    if g.rank == 0:
        with np.load(out / "tp.npz") as f:
            for k, v in other.state_dict().items():
                np.testing.assert_array_equal(f[k], v)
    try:
        tp.load_state_dict({**other.state_dict(), "1.weight": np.zeros((5, 3))})
        raise AssertionError("a part-sized weight loaded as the whole")
    except ValueError as e:
        assert "(5, 6)" in str(e), e

    # Group's collectives on device arrays, along an inner axis
    a = gpublas.to_device(np.arange(12.0).reshape(2, 3, 2) + 100 * g.rank)
    both = g.all_gather(a, axis=1)
    expect = np.concatenate([np.arange(12.0).reshape(2, 3, 2) + 100 * r for r in range(g.size)], axis=1)
    np.testing.assert_array_equal(both.get(), expect)
    rs = g.reduce_scatter(gpublas.to_device(expect), axis=1)   # the sum over ranks of `expect`, this rank's part
    np.testing.assert_array_equal(rs.get(), g.size * expect[:, 3 * g.rank:3 * (g.rank + 1)])
    m = g.all_reduce(gpublas.to_device(np.array([1.0, -2.0]) * (g.rank + 1)), op="max")
    np.testing.assert_array_equal(m.get(), [g.size, -2.0])
    try:
        dist.ColumnParallelDense(7, 5, group=g)
        raise AssertionError("5 output features split over 2 ranks")
    except ValueError as e:
        assert "out_features=5" in str(e) and "multiple of 2" in str(e), e
    (out / f"ok-{g.rank}").write_text("ok")


def grid(out, wire):
    gr = dist.init_grid(tensor=2)
    r = dist.rank()
    assert (gr.tensor_size, gr.data_size) == (2, 2)
    members_t = gr.tensor.comm.allgather(r)
    members_d = gr.data.allgather(r)
    assert members_t == [r - r % 2, r - r % 2 + 1] and members_d == [r % 2, r % 2 + 2]
    assert (gr.tensor_rank, gr.data_rank) == (r % 2, r // 2)
    try:
        dist.init_grid(tensor=3)
        raise AssertionError("tensor=3 on 4 ranks")
    except ValueError as e:
        assert "tensor=3" in str(e) and "4 ranks" in str(e), e
    # a 2 x 2 grid trains as one process on the whole batch: columns over the tensor group, DataParallel
    # over the data group (each data rank its half of the batch)
    X, y = data()
    ref, ref_opt = columns_model(dist.Group(dist.MPI.COMM_SELF))
    net, opt = columns_model(gr.tensor)
    dp = dist.DataParallel(net, comm=gr.data)
    half = slice(gr.data_rank * 3, (gr.data_rank + 1) * 3)
    for s in range(2):
        step(ref, ref_opt, X[s], y[s])
        step(dp, opt, X[s, half], y[s, half])
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(net.state_dict()[k], v, rtol=1e-10, atol=1e-12)
    (out / f"ok-{r}").write_text("ok")


def data():
    rng = np.random.default_rng(11)
    return rng.normal(size=(3, 6, 1, 8, 8)), rng.integers(0, 10, (3, 6)).astype(np.int32)


def columns_model(group):
    nn.manual_seed(21)
    net = dist.ColumnAlexNet(image=8, width=2, group=group).double()
    return net, nn.SGD(net.parameters(), lr=0.1, momentum=0.9)


def step(net, opt, X, y):
    crit = nn.SoftmaxCrossEntropy()
    crit(net(gpublas.to_device(X)), y)
    opt.zero_grad()
    return net.backward(crit.backward())


def alexnet(out, wire):
    g = dist.Group(wire=wire)
    X, y = data()
    ref, ref_opt = columns_model(dist.Group(dist.MPI.COMM_SELF))   # both columns on this rank
    net, opt = columns_model(g)                                       # a column per rank
    assert net[2].weight.shape == (4, 2, 3, 3) and ref[2].weight.shape == (8, 2, 3, 3)
    for k, v in ref.state_dict().items():
        np.testing.assert_array_equal(net.state_dict()[k], v)
    for s in range(3):
        g.reset_stats()
        close(net(gpublas.to_device(X[s])), ref(gpublas.to_device(X[s])))
        # forward: conv3, fc6, fc7 and fc8 gather their input, fc8 its output
        assert g.stats["collectives"] == 5, g.stats
        g.reset_stats()
        dx, dx_ref = step(net, opt, X[s], y[s]), step(ref, ref_opt, X[s], y[s])
        # backward: four reduce-scatters and conv1's all-reduce of the image gradient
        assert g.stats["collectives"] == 5 + 5, g.stats
        close(dx, dx_ref)
        grads = gathered_grads(net)
        for name, p in ref.named_parameters():
            close(grads[name], p.grad.get())
        opt.step()
        ref_opt.step()
    for k, v in ref.state_dict().items():
        close(net.state_dict()[k], v)
    # a one-rank checkpoint loads into the split network and back
    nn.manual_seed(5)
    other = dist.ColumnAlexNet(image=8, width=2, group=dist.Group(dist.MPI.COMM_SELF)).double()
    net.load_state_dict(other.state_dict())
    close(net(gpublas.to_device(X[0])), other(gpublas.to_device(X[0])))
    ref.load_state_dict(net.state_dict())
    close(ref(gpublas.to_device(X[1])), other(gpublas.to_device(X[1])))
    (out / f"ok-{g.rank}").write_text("ok")


if __name__ == "__main__":
    scenario, outdir = sys.argv[1], Path(sys.argv[2])
    {"layers": layers, "grid": grid, "alexnet": alexnet}[scenario](outdir, sys.argv[3] if len(sys.argv) > 3 else None)
