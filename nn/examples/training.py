"""The training loop the image examples share: minibatch SGD with a tqdm bar, evaluation in eval
mode, a stop with a message naming the step when the loss turns NaN, and the header line naming the
backend and device. With --distributed (under mpiexec) each rank trains on its shard of every epoch
in batches of batch_size / ranks, so the global batch and the learning rate stay those of one process."""
import argparse
import math
import os
import sys
import time

import numpy as np

import gpublas

from .precision import Precision


class NonFiniteLoss(RuntimeError):
    pass


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help with every option's default, unless its text already gives it (or there is none)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)):
            return text
        return text + " (default: %(default)s)"


def parser(doc):
    """The examples' argument parser: the module docstring's first line, every option with its default."""
    return argparse.ArgumentParser(description=doc.splitlines()[0], formatter_class=HelpFormatter)


def add_quiet_flag(p):
    p.add_argument("--quiet", action="store_true", help="print only the summary line (no progress bar, no "
                                                        "per-epoch lines)")


def describe_device():
    info = gpublas.device_info()
    return f"backend: {gpublas.backend()} | device: {info.get('name', '?')}"


def add_distributed_flag(parser):
    parser.add_argument("--distributed", action="store_true",
                        help="data-parallel training over the MPI ranks (run under mpiexec -n N); "
                             "--batch-size and --lr stay global")


def setup_distributed(args):
    """nn.distributed when args.distributed, else None. Ranks other than 0 print nothing to stdout
    and show no progress bar, so the job's output is that of one process."""
    if not args.distributed:
        return None
    import nn.distributed as dist
    if args.batch_size % dist.world_size():
        raise SystemExit(f"--batch-size {args.batch_size} must be a multiple of the {dist.world_size()} ranks "
                         "(each rank takes an equal part of every global batch)")
    if not dist.is_main():
        args.quiet = True
        sys.stdout = open(os.devnull, "w")
    return dist


def batches(n, batch_size, rng=None):
    order = rng.permutation(n) if rng is not None else np.arange(n)
    for i in range(0, n, batch_size):
        yield order[i:i + batch_size]


def train_epoch(model, crit, opt, X, y, batch_size, rng, bar=None, step=0, graphed=None, precision=None):
    """One pass over (X, y) in shuffled minibatches; returns (mean loss, steps done so far). With
    `graphed` (classifier_step's) the steps are replayed graphs and the loss is read once, at the end.
    `precision` (examples/precision.py; None: fp32) sets the forward's autocast and the loss scaling."""
    model.train()
    if graphed is not None:
        return _graphed_epoch(graphed, X, y, batch_size, rng, bar, step)
    precision = precision or Precision()
    total, count = 0.0, 0
    for idx in batches(len(X), batch_size, rng):
        with precision.autocast():
            loss = crit(model(X[idx]), y[idx])
        step += 1
        if not math.isfinite(loss):
            raise NonFiniteLoss(f"loss became {loss} at step {step}; stopping (try a smaller --lr)")
        opt.zero_grad()
        precision.backward(model, crit.backward(), opt)
        precision.step(opt)
        total += loss * len(idx)
        count += len(idx)
        if bar is not None:
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            bar.update(1)
    return total / max(count, 1), step


def classifier_step(model, crit, opt, precision=None):
    """A GraphedStep for train_epoch: loss, zero_grad, backward and the optimizer step, with the loss
    summed over the epoch on the device (`.acc`, float64, as train_epoch sums the floats). With a
    DataParallel model the gradient all-reduce (and the buffer broadcast before forward) run eagerly
    between the captured parts, as they run inside DataParallel's forward and backward. The forward
    runs in `precision`'s autocast (bf16 can be captured; fp16's loss scaling cannot: check_graph)."""
    from nn.kernels import loss_track
    from .graphed import GraphedStep, training_parts

    net = getattr(model, "module", model)
    acc = gpublas.zeros((1,), np.float64)
    precision = precision or Precision()
    precision.check_graph(True)

    def forward_backward(x, y):
        with precision.autocast():
            logits = net(x)
        loss_track(crit(logits, y, on_device=True), acc, 1.0, float(len(y)))
        opt.zero_grad()
        net.backward(crit.backward())

    def update(x, y):
        opt.step()

    step = GraphedStep(training_parts(model, forward_backward, update))
    step.acc = acc
    return step


def _graphed_epoch(graphed, X, y, batch_size, rng, bar, step):
    graphed.acc.fill(0)
    count = 0
    for idx in batches(len(X), batch_size, rng):
        graphed(X[idx], y[idx])
        step += 1
        count += len(idx)
        if bar is not None:
            bar.update(1)
    total = float(graphed.acc.get()[0])
    if not math.isfinite(total):
        raise NonFiniteLoss(f"loss became {total} by step {step}; stopping (try a smaller --lr)")
    if bar is not None:
        bar.set_postfix(loss=f"{total / max(count, 1):.4f}", refresh=False)
    return total / max(count, 1), step


def accuracy(model, X, y, batch_size=256, dist=None, precision=None):
    """Fraction of correct argmax predictions, the model in eval mode (each rank counts its part), in
    `precision`'s autocast as it trained."""
    model.eval()
    correct, mine = 0, np.arange(len(X))
    if dist is not None:
        mine = np.array_split(mine, dist.world_size())[dist.rank()]
    for idx in batches(len(mine), batch_size):
        with (precision or Precision()).autocast():
            logits = model(X[mine[idx]]).get()
        correct += int((logits.argmax(axis=1) == y[mine[idx]]).sum())
    model.train()
    correct = dist.all_sum(correct) if dist is not None else correct
    return correct / max(len(X), 1)


def compile_first(model, crit, opt, X, y, precision=None, quiet=False, name="train"):
    """Before the training bar: one line saying how many kernel modules are still compiling (nn.prefetch
    started them), then one training step on copies of the model and optimizer (the originals are
    untouched), which waits for them and compiles whatever else a step launches. On an empty kernel cache
    that takes many seconds (the sim compiles each module with g++, a GPU with nvcc), which the training
    bar would otherwise show as a hung first step. Nothing is printed when every module is loaded."""
    import copy

    import nn
    from gpublas.runtime import compiler
    pending = nn.prefetch(model, crit, opt)
    if pending and not quiet:
        print(f"{name}: compiling {pending} kernel modules (once: they are kept in {compiler.cache_dir()})...",
              file=sys.stderr, flush=True)
    net, optimizer = copy.deepcopy((getattr(model, "module", model), opt))
    with (precision or Precision()).autocast():
        crit(net(X), y)
    optimizer.zero_grad()
    net.backward(crit.backward())
    optimizer.step()
    net.eval()
    with (precision or Precision()).autocast():
        net(X[:1]).get()   # the evaluation's kernels (eval mode: BatchNorm's running statistics)


def run(model, crit, opt, data, *, epochs, batch_size, seed, schedule=None, name="train", quiet=False,
        augment=None, dist=None, graph=False, precision=None):
    """Trains for `epochs`, printing one line per epoch; returns a summary dict. `augment(X, rng)`, if
    given, makes each epoch's copy of the training images (host-side data loading). With `dist`
    (nn.distributed) each rank takes its shard of every epoch and batch_size / ranks of every batch.
    With `graph` each batch shape's step is captured once and replayed (classifier_step). `precision`
    (examples/precision.py): fp32 when None, else bf16 / fp16 mixed precision."""
    from tqdm import tqdm

    Xtr, ytr, Xte, yte = data
    ranks = 1 if dist is None else dist.world_size()
    rng = np.random.default_rng(seed if dist is None else [seed, dist.rank()])
    batch_size //= ranks
    steps_per_epoch = math.ceil(math.ceil(len(Xtr) / ranks) / batch_size)
    start = time.perf_counter()
    step = 0
    history = []
    graphed = classifier_step(model, crit, opt, precision) if graph else None
    if dist is None:
        compile_first(model, crit, opt, Xtr[:batch_size], ytr[:batch_size], precision, quiet, name)
    with tqdm(total=epochs * steps_per_epoch, desc=name, unit="step", file=sys.stderr, disable=quiet) as bar:
        for epoch in range(1, epochs + 1):
            X, y, order = Xtr, ytr, rng
            if dist is not None:  # the shard is shuffled already
                mine = dist.shard(len(Xtr), epoch, seed)
                X, y, order = Xtr[mine], ytr[mine], None
            X = augment(X, rng) if augment is not None else X
            loss, step = train_epoch(model, crit, opt, X, y, batch_size, order, bar, step, graphed, precision)
            loss = loss if dist is None else dist.all_sum(loss) / ranks
            history.append(loss)
            if schedule is not None:
                schedule.step()
            if not quiet:
                bar.write(f"epoch {epoch:3d}  loss {loss:.4f}  lr {opt.lr:.4g}")
    train_s = time.perf_counter() - start
    acc = accuracy(model, Xte, yte, dist=dist, precision=precision)
    return {"test_accuracy": acc, "train_seconds": train_s, "seconds": time.perf_counter() - start,
            "final_loss": history[-1] if history else float("nan"), "losses": history, "steps": step}


def fit_and_report(name, net, opt, data, args, schedule=None, augment=None, dist=None):
    """Trains a classifier with run() (data-parallel over the ranks with `dist`), saves it when
    args.save names a file, and prints the summary line; returns the process exit status (1 when the
    loss turned NaN or infinite: under MPI that ends every rank). args.precision (default fp32) picks
    mixed precision; the saved weights are the FP32 master weights."""
    import nn  # the examples' own package; imported here so that nn's import does not load examples
    precision = Precision(getattr(args, "precision", "fp32"))
    precision.check_graph(getattr(args, "graph", False))
    crit = nn.SoftmaxCrossEntropy()
    nn.prefetch(net, crit, opt)  # every kernel module compiles now, in the background, on every core
    net = net if dist is None else dist.DataParallel(net)
    try:
        s = run(net, crit, opt, data, epochs=args.epochs, batch_size=args.batch_size,
                seed=args.seed, schedule=schedule, name=name, quiet=args.quiet, augment=augment, dist=dist,
                graph=getattr(args, "graph", False), precision=precision)
    except NonFiniteLoss as e:
        print(f"{name}: {e}", file=sys.stderr)
        if dist is not None and dist.world_size() > 1:
            dist.abort(1)  # the other ranks wait in the gradient reduction: end them too
        return 1
    if args.save:
        (nn if dist is None else dist).save(net, args.save)
    ranks = ("" if dist is None else f" on {dist.world_size()} ranks") + (", graphed" if getattr(args, "graph", False) else "")
    ranks += "" if precision.dtype is None else f", {precision.name}"
    print(f"{name}: test accuracy {s['test_accuracy']:.4f} ({len(data[2])} images) after {args.epochs} epochs, "
          f"final train loss {s['final_loss']:.4f}, {s['seconds']:.1f} s{ranks}")
    return 0
