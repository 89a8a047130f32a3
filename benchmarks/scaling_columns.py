"""scaling's model-parallel rows for AlexNet's two-column CNN (nn.distributed.ColumnAlexNet): the step with
both columns on rank 0 alone (T = 1) and with a column on each of ranks 0 and 1 (T = 2), one thread per
rank on the sim, and the bytes each rank hands to MPI per step beside the count the layer shapes give.
Before timing, the T = 2 network's float64 forward and input gradient are checked against T = 1's."""
import numpy as np

import gpublas

WIDTH = 8   # conv1's maps per column, as nn.examples.alexnet


def expected_bytes(B, width, itemsize):
    """Per rank and step at T = 2 on 8x8 images (w maps a column, h = 8 w units): forward all-gathers of
    this rank's half of conv3's, fc6's, fc7's and fc8's inputs and of fc8's logits; backward the
    reduce-scatters of those four inputs' whole gradients and the all-reduce of the image's."""
    w, h = width, 8 * width
    halves = [2 * w * 2 * 2, 2 * w * 2 * 2, h, h]          # per column: conv2 pooled, conv5 flattened, fc6, fc7
    forward = sum(halves) + 5                               # + this rank's 5 of the 10 logits
    backward = 2 * sum(halves) + 8 * 8                      # the whole dx of each, the image's gradient
    return B * (forward + backward) * itemsize


def run_columns(report, ctx, dist, comm, timed_steps, batch, alone_on_rank0, sizes):
    """Adds the rows (split "columns") to `report`; ranks beyond the first two wait."""
    import nn
    from mpi4py import MPI
    N, r = comm.Get_size(), comm.Get_rank()
    if N < 2:
        report.skip("columns", "the two-column CNN needs 2 ranks: mpiexec -n 2")
        return
    pair = comm.Split(0 if r < 2 else MPI.UNDEFINED, r)
    solo = MPI.COMM_SELF

    def model(group, dtype=np.float32):
        nn.manual_seed(0)
        return dist.ColumnAlexNet(image=8, width=WIDTH, group=group, dtype=dtype)

    def on_pair(fn):
        """fn() on ranks 0 and 1 while the others wait without spinning; rank 0's result, everywhere."""
        return alone_on_rank0(lambda: None, comm) if pair == MPI.COMM_NULL else comm.bcast(
            _then_wait(fn(), comm), root=0)

    def exact():      # a column per rank against both on this rank, float64
        x, _ = batch(4, seed=2)
        one, two = model(dist.Group(solo), np.float64), model(dist.Group(pair), np.float64)
        xd = gpublas.to_device(x.astype(np.float64))
        dy = gpublas.to_device(np.random.default_rng(3).normal(size=(4, 10)))
        return two(xd).get(), one(xd).get(), two.backward(dy).get(), one.backward(dy).get()

    got = on_pair(exact)
    if got is not None:
        report.check("columns: 2-rank logits = 1 rank's", got[0], got[1], rtol=1e-12, atol=1e-12)
        report.check("columns: 2-rank image gradient = 1 rank's", got[2], got[3], rtol=1e-10, atol=1e-12)

    def paired(x, y):
        g = dist.Group(pair)
        net = model(g)
        stats = {"comm_s": 0.0}
        ms, comm_ms, cpu = timed_steps(ctx, _Counted(net, g, stats), x, y, pair, stats)
        g.reset_stats()
        timed_once(net, x, y)
        return ms, comm_ms, cpu, g.stats["bytes"]

    for B in sizes:
        x, y = batch(B)
        ms1, _, cpu1 = alone_on_rank0(lambda: timed_steps(ctx, model(dist.Group(solo)), x, y, solo), comm)
        ms, comm_ms, cpu, nbytes = on_pair(lambda: paired(x, y))
        for t, (step_ms, c_ms, c_cpu, n) in ((1, (ms1, 0.0, cpu1, 0)), (2, (ms, comm_ms, cpu, nbytes))):
            report.add(split="columns", batch=B, ranks=t, per_rank=B, step_ms=step_ms, samples_per_s=B / step_ms * 1e3,
                       comm_ms=c_ms, comm_pct=100 * c_ms / step_ms, speedup=ms1 / step_ms,
                       efficiency=ms1 / step_ms / t, cpu_ms=c_cpu, cpu_speedup=cpu1 / c_cpu,
                       mib_per_step=n / 2 ** 20, expected_mib=expected_bytes(B, WIDTH, 4) / 2 ** 20 if t > 1 else 0.0)
    report.note("split columns: AlexNet's two-column CNN (width 8), the whole batch on each rank of the pair; "
                "MiB/step: what each rank handed to MPI in one step, beside the count from the layer shapes")


def _then_wait(value, comm):
    """Ranks 0 and 1 join the others' polled barrier (alone_on_rank0's) after their work."""
    req = comm.Ibarrier()
    req.Wait()
    return value


def timed_once(net, x, y):
    import nn
    crit = nn.SoftmaxCrossEntropy()
    crit(net(x), y)
    net.backward(crit.backward())


class _Counted:
    """The network as timed_steps drives it, with the seconds its Group spent in MPI added to `stats`."""

    def __init__(self, net, group, stats):
        self.net, self.group, self.stats = net, group, stats

    def __call__(self, x):
        return self._counting(self.net, x)

    def backward(self, dy):
        return self._counting(self.net.backward, dy)

    def _counting(self, fn, arg):
        before = self.group.stats["seconds"]
        out = fn(arg)
        self.stats["comm_s"] += self.group.stats["seconds"] - before
        return out

    def parameters(self):
        return self.net.parameters()
