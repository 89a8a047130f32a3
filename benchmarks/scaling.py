"""scaling: data-parallel training of nn's digits CNN over MPI ranks (nn.distributed), and the model-parallel
rows (split "columns": AlexNet's two-column CNN, benchmarks/scaling_columns.py).

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m benchmarks scaling      # as root: see docs/distributed.md

For each global batch B: the step time with one rank (rank 0 alone trains on B while the other ranks
wait without spinning) and with all N ranks (DataParallel, B / N images per rank), samples/s, the
share of the N-rank step spent in MPI calls (waiting for the slowest rank included), the speedup and
the scaling efficiency (speedup / N). A step is forward, loss, backward (with the gradient
reduction) and an SGD update on random 8x8 images. Before timing, the N-rank gradient of a global
batch is checked against one rank's gradient of the whole batch; after it, that every rank holds
bit-identical parameters. Without mpiexec (one rank) only the one-rank rows are measured.
"""
import hashlib
import os
import statistics
import time

import numpy as np

import gpublas

from . import scaling_tp
from .harness import Report, parse_size

DESCRIPTION = "data-parallel digits CNN on 1 and N MPI ranks: samples/s, share in MPI, efficiency (mpiexec)"
LR, MOMENTUM = 0.01, 0.9


def batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, n).astype(np.int32)


def step(net, crit, opt, x, y):
    crit(net(x), y)
    opt.zero_grad()
    net.backward(crit.backward())
    opt.step()


def timed_steps(ctx, net, x, y, comm, stats=None):
    """Median ms per step over ctx.repeats samples of `k` steps; each sample is the slowest rank's
    time. Returns (ms, MPI ms, CPU ms), the last two per step and averaged over ranks."""
    import nn
    crit, opt = nn.SoftmaxCrossEntropy(), nn.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    k = 3 if ctx.quick else 10
    for _ in range(ctx.warmup):
        step(net, crit, opt, x, y)
    samples, comm_ms, cpu_ms = [], [], []
    for _ in range(ctx.repeats):
        comm.Barrier()
        before = stats["comm_s"] if stats else 0.0
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(k):
            step(net, crit, opt, x, y)
        gpublas.synchronize()
        t, c = (time.perf_counter() - t0) * 1e3 / k, (time.process_time() - c0) * 1e3 / k
        samples.append(comm.allreduce(t, op=_mpi().MAX))
        comm_ms.append(comm.allreduce(((stats["comm_s"] if stats else 0.0) - before) * 1e3 / k) / comm.Get_size())
        cpu_ms.append(comm.allreduce(c) / comm.Get_size())
    return statistics.median(samples), statistics.median(comm_ms), statistics.median(cpu_ms)


def _mpi():
    from mpi4py import MPI
    return MPI


def alone_on_rank0(fn, comm):
    """fn() on rank 0 while the other ranks sleep in a polled Ibarrier (a blocking wait would spin
    on a core); fn's result is broadcast."""
    out = fn() if comm.Get_rank() == 0 else None
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.002)
    return comm.bcast(out, root=0)


def check_gradients(report, dist, model, B):
    """The N-rank reduced gradient of one global batch against one rank's gradient of the whole batch
    (in eval mode, so that dropout does not draw different masks)."""
    import nn
    x, y = batch(B, seed=1)
    ref_net = model().eval()
    crit = nn.SoftmaxCrossEntropy()
    crit(ref_net(x), y)
    ref_net.backward(crit.backward())
    ref = {k: p.grad.get() for k, p in ref_net.named_parameters()}
    net = dist.DataParallel(model().eval())
    mine = np.array_split(np.arange(B), dist.world_size())[dist.rank()]
    crit(net(x[mine]), y[mine])
    net.backward(crit.backward())
    ok = True
    for k, p in net.named_parameters():
        scale = float(np.abs(ref[k]).max()) + 1e-12
        ok &= report.check(f"batch {B}: {dist.world_size()}-rank gradient {k} = 1 rank's", p.grad.get(), ref[k],
                           rtol=1e-4, atol=1e-5 * scale)
    return dist.all_sum(0.0 if ok else 1.0) == 0


def fingerprint(net):
    h = hashlib.sha256()
    for v in net.state_dict().values():
        h.update(np.ascontiguousarray(v).tobytes())
    return h.hexdigest()


def run(ctx):
    report = Report("scaling", ctx)
    try:
        import nn
        import nn.distributed as dist
        from nn.examples import digits
    except ImportError as e:
        report.skip("scaling", f"{type(e).__name__}: {e}")
        return report
    comm = dist.MPI.COMM_WORLD
    N = comm.Get_size()
    solo = comm.Split(0 if comm.Get_rank() == 0 else dist.MPI.UNDEFINED, 0)   # rank 0 alone
    sizes = [parse_size(s) for s in ctx.sizes] or ctx.pick(gpu=[256, 1024], sim=[32, 128], quick=[32])

    def model():
        nn.manual_seed(0)
        return digits.model()

    for B in sizes:
        if B % N:
            report.skip(f"batch {B}", f"not a multiple of the {N} ranks")
            continue
        if not check_gradients(report, dist, model, B):
            continue
        x, y = batch(B)
        one, _, cpu1 = alone_on_rank0(lambda: timed_steps(ctx, model(), x, y, solo), comm) \
            if N > 1 else timed_steps(ctx, model(), x, y, comm)
        base = report.add(split="data", batch=B, ranks=1, per_rank=B, step_ms=one, samples_per_s=B / one * 1e3,
                          comm_ms=0.0, comm_pct=0.0, speedup=1.0, efficiency=1.0, cpu_ms=cpu1, cpu_speedup=1.0)
        if N == 1:
            continue
        net = dist.DataParallel(model())
        mine = np.array_split(np.arange(B), N)[dist.rank()]
        ms, comm_ms, cpu = timed_steps(ctx, net, x[mine], y[mine], comm, net.stats)
        prints = comm.allgather(fingerprint(net))
        report.check_equal(f"batch {B}: parameters bit-identical on {N} ranks", np.array(prints),
                           np.array(prints[:1] * N))
        sps = B / ms * 1e3
        report.add(split="data", batch=B, ranks=N, per_rank=B // N, step_ms=ms, samples_per_s=sps, comm_ms=comm_ms,
                   comm_pct=100 * comm_ms / ms, speedup=sps / base["samples_per_s"],
                   efficiency=sps / base["samples_per_s"] / N, cpu_ms=cpu, cpu_speedup=cpu1 / cpu)
    if N > 1:   # the model-parallel rows: AlexNet's columns over ranks 0 and 1
        from .scaling_columns import run_columns
        run_columns(report, ctx, dist, comm, timed_steps, batch, alone_on_rank0, sizes)
    report.columns = [("split", "split", "s"), ("batch", "global batch", "d"), ("ranks", "ranks", "d"), ("per_rank", "per rank", "d"),
                      ("step_ms", "step ms", ".2f"), ("samples_per_s", "samples/s", ".0f"),
                      ("comm_ms", "MPI ms", ".2f"), ("comm_pct", "% in MPI", ".1f"),
                      ("speedup", "speedup", ".2f"), ("efficiency", "efficiency", ".2f"),
                      ("cpu_ms", "CPU ms/rank", ".2f"), ("cpu_speedup", "CPU speedup", ".2f"),
                      ("mib_per_step", "MiB/step", ".3f"), ("expected_mib", "expected MiB", ".3f")]
    report.note(f"{N} rank(s), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; MPI time includes "
                "waiting for the slowest rank; a step's time is the slowest rank's")
    report.note("CPU ms/rank: CPU time a rank uses per step (MPI waits included); CPU speedup = 1 rank's / N ranks' "
                "per rank: the speedup if every rank had an idle core of its own (on a busy host the wall figures "
                "fall short of it)")
    if N == 1:
        report.skip("N ranks", "one rank: run under mpiexec, e.g. OMP_NUM_THREADS=1 mpiexec -n 2 python -m "
                                "benchmarks scaling")
    best = [r for r in report.rows if r["ranks"] > 1 and r["split"] == "data"]
    if best:
        report.summary.update(ranks=N, best_speedup=max(r["speedup"] for r in best),
                              best_efficiency=max(r["efficiency"] for r in best))
    return scaling_tp.extend(report, ctx)   # the tensor-parallel GPT rows (benchmarks/scaling_tp.py)


def draw(plt, report):
    data_rows = [r for r in report.rows if r.get("split", "data") == "data"]
    batches = sorted({r["batch"] for r in data_rows})
    ranks = sorted({r["ranks"] for r in data_rows})
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / len(ranks)
    for i, n in enumerate(ranks):
        rows = {r["batch"]: r for r in data_rows if r["ranks"] == n}
        xs = [j + i * width for j, b in enumerate(batches) if b in rows]
        bars = ax.bar(xs, [rows[b]["samples_per_s"] for b in batches if b in rows], width,
                      label=f"{n} rank{'s' if n > 1 else ''}")
        if n > 1:
            ax.bar_label(bars, [f"x{rows[b]['speedup']:.2f} (CPU x{rows[b]['cpu_speedup']:.2f})" for b in batches
                                if b in rows], fontsize=8)
            comp = [rows[b]["step_ms"] - rows[b]["comm_ms"] for b in batches if b in rows]
            bx.bar(xs, comp, width, label=f"{n} ranks: compute")
            bx.bar(xs, [rows[b]["comm_ms"] for b in batches if b in rows], width, bottom=comp,
                   label=f"{n} ranks: in MPI")
        else:
            bx.bar(xs, [rows[b]["step_ms"] for b in batches if b in rows], width, label="1 rank")
    for a in (ax, bx):
        a.set_xticks([j + width * (len(ranks) - 1) / 2 for j in range(len(batches))])
        a.set_xticklabels([f"batch {b}" for b in batches])
        a.legend(fontsize=8)
    ax.set_ylabel("samples/s")
    ax.set_title("digits CNN: throughput (label: speedup over 1 rank; with an idle core per rank)", fontsize=9)
    bx.set_ylabel("ms per step")
    bx.set_title("step time: compute vs MPI", fontsize=9)
    return fig
