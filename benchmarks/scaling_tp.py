"""scaling's tensor-parallel rows: the GPT split over T = 2 ranks (Megatron-LM's heads, MLP and vocabulary
split, nn.distributed.parallelize) against T = 1, one thread per rank on the simulator.

    OMP_NUM_THREADS=1 mpiexec -n 2 python -m benchmarks scaling      # the scaling suite calls extend()

For each n_embd: the step time of one rank training the whole GPT (rank 0 alone; the other ranks wait without
spinning) and of two ranks training the split one on the same batch, the speedup, the seconds a step spends in
the tensor group's collectives, the all-reduces and bytes a rank sends per step beside Megatron-LM's count (per
transformer block two all-reduces of (B, T, E) forward and two backward, plus the GPT's embedding, head and
loss), and a rank's share of the parameters and of the peak device memory. A step is nn.examples.gpt's:
forward, cross-entropy, backward, the gradient clipped to norm 1 (the whole model's norm), AdamW. Before timing,
the split model's loss is checked against the whole one's on the same batch, and the counted traffic against
the formula. Without mpiexec (one rank) only the T = 1 rows are measured.
"""
import gc
import os
import statistics
import time

import numpy as np

import gpublas

from .formatting import table
from .harness import Report, parse_size

DESCRIPTION = "tensor-parallel GPT (Megatron's split) on 1 and 2 MPI ranks: step time, all-reduces and bytes"
VOCAB, LAYERS, HEADS = 96, 2, 4
COLUMNS = [("n_embd", "n_embd", "d"), ("tensor", "T", "d"), ("step_ms", "step ms", ".1f"),
           ("speedup", "speedup", ".2f"), ("comm_ms", "collectives ms", ".1f"),
           ("collectives", "all-reduces/step", "d"), ("mib_per_step", "MiB/step", ".3f"),
           ("megatron_mib", "Megatron MiB (blocks)", ".3f"), ("params_share", "params/rank", ".3f"),
           ("peak_share", "peak mem/rank", ".3f"), ("cpu_ms", "CPU ms/rank", ".1f"),
           ("cpu_speedup", "CPU speedup", ".2f")]


def shape(ctx):
    """(batch, positions): the tokens of a step."""
    return ctx.pick(gpu=(8, 256), sim=(4, 64), quick=(2, 16))


def build(n_embd, T, group):
    """The GPT of this size from seed 0 (split over `group` when given), its optimizer and step."""
    import nn
    from nn.examples import gpt as example
    from nn.examples.precision import Precision
    import nn.distributed as dist
    nn.manual_seed(0)
    net = nn.models.GPT(VOCAB, T, LAYERS, HEADS, n_embd, tensor_parallel=group)
    opt = net.configure_optimizers(weight_decay=0.1, learning_rate=1e-3)
    crit = nn.CrossEntropyLoss() if group is None else dist.VocabParallelCrossEntropy(group)
    clip = None if group is None else (lambda max_norm: dist.clip_grad_norm(net, max_norm, on_device=True))
    state = {}
    forward_backward, update = example.step_parts(net, opt, Precision("fp32"), state, crit, clip)

    def step(x, y):
        forward_backward(x, y)
        update(None, None)
        return state["loss"]
    return net, step


def batch(B, T, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, VOCAB, (2, B, T), dtype=np.int32)
    return gpublas.to_device(x), gpublas.to_device(y)


def measure(ctx, n_embd, comm, group):
    """{step_ms, cpu_ms, comm_ms, collectives, bytes, params, peak} of the GPT's step on the ranks of `comm`
    (group: its tensor group, or None for the whole model on one rank), and its first loss."""
    import nn.distributed as dist
    B, T = shape(ctx)
    gc.collect()
    base = gpublas.memory_stats()["bytes_in_use"]
    gpublas.reset_peak_memory_stats()
    net, step = build(n_embd, T, group)
    x, y = batch(B, T)
    first = float(step(x, y).get()[0])
    peak = gpublas.memory_stats()["peak_bytes_in_use"] - base
    for _ in range(ctx.warmup - 1):
        step(x, y)
    k = 2 if ctx.quick else 5
    samples, comm_ms, cpu_ms, counts = [], [], [], []
    for _ in range(ctx.repeats):
        comm.Barrier()
        if group is not None:
            group.reset_stats()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(k):
            step(x, y)
        gpublas.synchronize()
        t, c = (time.perf_counter() - t0) * 1e3 / k, (time.process_time() - c0) * 1e3 / k
        samples.append(comm.allreduce(t, op=_mpi().MAX))
        cpu_ms.append(comm.allreduce(c) / comm.Get_size())
        stats = group.stats if group is not None else {"seconds": 0.0, "collectives": 0, "bytes": 0}
        comm_ms.append(comm.allreduce(stats["seconds"] * 1e3 / k) / comm.Get_size())
        counts.append((stats["collectives"] // k, stats["bytes"] // k))
    params = sum(p.data.size for p in net.parameters())
    split = len(dist.split_parameters(net)[0]) if group is not None else 0
    del net, step
    return dict(step_ms=statistics.median(samples), cpu_ms=statistics.median(cpu_ms),
                comm_ms=statistics.median(comm_ms), collectives=counts[-1][0], bytes=counts[-1][1], params=params,
                split=split, peak=peak), first


def _mpi():
    from mpi4py import MPI
    return MPI


def on_rank0(fn, comm):
    """fn() on rank 0 while the other ranks wait in a polled Ibarrier (no spinning core); its result broadcast."""
    out = fn() if comm.Get_rank() == 0 else None
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.002)
    return comm.bcast(out, root=0)


def run(ctx):
    report = Report("scaling", ctx)
    try:
        import nn.distributed as dist
    except ImportError as e:
        report.skip("tensor-parallel GPT", f"{type(e).__name__}: {e}")
        return report
    world = dist.MPI.COMM_WORLD
    N, r = world.Get_size(), world.Get_rank()
    solo = world.Split(0 if r == 0 else dist.MPI.UNDEFINED, 0)
    pair = world.Split(0 if r < 2 else dist.MPI.UNDEFINED, r)
    sizes = [parse_size(s) for s in ctx.sizes] or ctx.pick(gpu=[512, 1024, 2048], sim=[128, 256, 512], quick=[64])
    B, T = shape(ctx)
    for C in sizes:
        one, loss1 = on_rank0(lambda: measure(ctx, C, solo, None), world)
        report.add(n_embd=C, tensor=1, step_ms=one["step_ms"], speedup=1.0, comm_ms=0.0, collectives=0,
                   mib_per_step=0.0, megatron_mib=0.0, params_share=1.0, peak_share=1.0, cpu_ms=one["cpu_ms"],
                   cpu_speedup=1.0)
        if N == 1:
            continue
        two, loss2 = (measure(ctx, C, pair, dist.Group(pair)) if r < 2 else ({}, None))
        two, loss2 = world.bcast((two, loss2), root=0)
        report.check(f"n_embd {C}: the split GPT's first loss = the whole one's", loss2, loss1, rtol=1e-4)
        want = dist.megatron_collectives(LAYERS, B * T, C, itemsize=4, clipped=two["split"])
        count = sum(v[0] for v in want.values()), sum(v[1] for v in want.values())
        report.check_equal(f"n_embd {C}: all-reduces and bytes per step = Megatron's count",
                           np.array([two["collectives"], two["bytes"]]), np.array(count))
        report.add(n_embd=C, tensor=2, step_ms=two["step_ms"], speedup=one["step_ms"] / two["step_ms"],
                   comm_ms=two["comm_ms"], collectives=two["collectives"], mib_per_step=two["bytes"] / 2**20,
                   megatron_mib=4 * LAYERS * B * T * C * 4 / 2**20, params_share=two["params"] / one["params"],
                   peak_share=two["peak"] / one["peak"], cpu_ms=two["cpu_ms"],
                   cpu_speedup=one["cpu_ms"] / two["cpu_ms"])
    report.columns = COLUMNS
    report.note(f"GPT: vocabulary {VOCAB}, {LAYERS} layers, {HEADS} heads, batch {B} x {T} positions, float32, "
                f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; T = 1: rank 0 alone, T = 2: ranks 0 "
                "and 1; a step's time is the slower rank's")
    report.note("MiB/step: what a rank hands to all-reduces in a step (2 per block forward, 2 backward, the "
                "embedding's, the head's, the loss's two small ones and the gradient norm's); Megatron MiB (blocks): "
                "4 x layers x B x T x n_embd x 4 bytes, the blocks' share of it")
    report.note("collectives ms: a step's time inside the tensor group's all-reduces, waiting for the slower rank "
                "included; CPU speedup = 1 rank's CPU time / a rank's at T = 2: the speedup if each rank had an idle "
                "core of its own (on a busy host the wall figures fall short of it)")
    if N == 1:
        report.skip("T = 2", "one rank: run under mpiexec, e.g. OMP_NUM_THREADS=1 mpiexec -n 2 python -m benchmarks "
                             "scaling")
    return report


def extend(report, ctx):
    """Runs the GPT rows and adds them to `report` (the scaling suite's): their checks, skips and notes, the
    table as a note, the rows under summary["gpt_tensor_parallel"] (the suite's own rows and plot unchanged)."""
    gpt = run(ctx)
    report.checks += gpt.checks
    report.skipped += gpt.skipped
    report.summary["gpt_tensor_parallel"] = gpt.rows
    if gpt.rows:
        report.note("tensor-parallel GPT (nn.distributed.parallelize):\n" + table(COLUMNS, gpt.rows))
    report.notes += gpt.notes
    return report
