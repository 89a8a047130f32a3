"""A character-level LSTM learning the Zen of Python (the text of `import this`, shipped with Python).

    python -m nn.examples.lstm        # sim backend, 2-core AMD EPYC: 8 s wall, 7-8 s of CPU

Embedding(V -> 16) + LSTM(16 -> 64) + Dense(64 -> V) predicts the next character of random 24-character windows (32 per step),
softmax cross-entropy over every step, SGD with momentum and gradient clipping. Prints the loss as it
falls and a sample generated one character at a time from the trained model. --precision bf16 / fp16
runs the LSTM's and the head's GEMMs in 16 bits (nn.autocast; the cell state stays FP32).
"""
import contextlib
import functools
import io
import math
import sys
import time

import numpy as np

import nn

import gpublas
from nn.kernels import loss_track

from .graphed import GraphedStep, add_graph_flag, training_parts
from .precision import Precision, add_precision_flag
from .training import add_distributed_flag, add_quiet_flag, describe_device, parser, setup_distributed


def zen():
    """The Zen of Python, decoded from the rot13 text in the standard library's `this` module
    (importing it prints the text; that output is swallowed)."""
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return "".join(this.d.get(ch, ch) for ch in this.s)


class CharModel(nn.Module):
    """Character ids (T, N) -> Embedding -> LSTM -> Dense -> logits (T*N, V)."""

    def __init__(self, vocab, hidden, embed=16):
        super().__init__()
        self.vocab, self.hidden = vocab, hidden
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden)
        self.head = nn.Dense(hidden, vocab)

    def forward(self, x, state=None):
        # x: (T, N) integer ids; logits: (T*N, V); state: (h, c) of (1, N, H)
        out, state = self.lstm(self.embed(x), state)
        T, N, H = out.shape
        return self.head(out.reshape(T * N, H)), state

    def backward(self, dlogits):
        # dlogits: (T*N, V) -> None (ids have no gradient); adds every weight's gradient
        T, N = self.lstm.cache[1]
        return self.embed.backward(self.lstm.backward(self.head.backward(dlogits).reshape(T, N, self.hidden)))


def sample(model, stoi, itos, start, length, temperature, rng):
    """Feeds `start`, then draws `length` characters one at a time, carrying the LSTM state."""
    V = len(itos)
    model.eval()
    logits, state = model(np.array([stoi[c] for c in start])[:, None])
    out = []
    for _ in range(length):
        z = logits.get()[-1].astype(np.float64) / temperature    # host-side sampler, not a training path
        p = np.exp(z - z.max())
        ch = int(rng.choice(V, p=p / p.sum()))
        out.append(itos[ch])
        logits, state = model(np.array([[ch]]), state)
    model.train()
    return start + "".join(out)


def _windows(rng, data, T, N):
    """Random windows of T characters (T, N) and the characters after each (T*N,)."""
    idx = rng.integers(0, len(data) - T - 1, N)[None, :] + np.arange(T)[:, None]
    return data[idx], data[idx + 1].reshape(-1)


def _nonfinite(loss, step):
    print(f"lstm: loss became {loss} at step {step}; stopping (try a smaller --lr)", file=sys.stderr)


def _train_eager(model, crit, opt, sched, windows, args, bar):
    """The steps with the loss read every step; returns (first loss, smoothed last) or None on NaN."""
    first = smooth = None
    precision = Precision(args.precision)
    for step in range(1, args.steps + 1):
        x, y = windows()
        with precision.autocast():
            logits, _ = model(x)
        loss = crit(logits, y)
        if not math.isfinite(loss):
            return _nonfinite(loss, step)
        opt.zero_grad()
        precision.backward(model, crit.backward(), opt)   # fp16: scaled, then unscaled before clipping
        nn.clip_grad_norm(opt.params, args.clip, on_device=True)
        precision.step(opt)                               # fp16: skipped on an inf/NaN gradient
        sched.step()
        first = loss if first is None else first
        smooth = loss if smooth is None else 0.9 * smooth + 0.1 * loss
        bar.set_postfix(loss=f"{smooth:.3f}", refresh=False)
        bar.update(1)
        if (step % 50 == 0 or step == args.steps) and not args.quiet:
            bar.write(f"step {step:4d}  loss {smooth:.3f}")
    return first, smooth


def _train_graphed(model, crit, opt, sched, windows, args, bar):
    """The same steps as replayed graphs (GraphedStep), the smoothed loss kept on the device and read
    every 50 steps; with DataParallel the all-reduce runs eagerly between the captured parts."""
    net = getattr(model, "module", model)
    smooth = gpublas.zeros((1,), np.float64)
    state, mix = {}, [0.0, 1.0]    # the first step sets smooth = loss, the others smooth it
    precision = Precision(args.precision)
    precision.check_graph(True)    # bf16 can be captured, fp16's loss scaling cannot

    def forward_backward(x, y):   # each captured part uses only its own or persistent arrays
        with precision.autocast():
            logits, _ = net(x)
        state["loss"] = crit(logits, y, on_device=True)
        loss_track(state["loss"], smooth, *mix)
        opt.zero_grad()
        net.backward(crit.backward())

    def update(x, y):
        nn.clip_grad_norm(opt.params, args.clip, on_device=True)
        opt.step()

    graphed, first = GraphedStep(training_parts(model, forward_backward, update)), None
    for step in range(1, args.steps + 1):
        graphed(*windows())
        sched.step()
        if first is None:
            first, mix[:] = float(state["loss"].get()[0]), [0.9, 0.1]
        bar.update(1)
        if step % 50 == 0 or step == args.steps:
            value = float(smooth.get()[0])
            if not math.isfinite(value):
                return _nonfinite(value, step)
            bar.set_postfix(loss=f"{value:.3f}", refresh=False)
            if not args.quiet:
                bar.write(f"step {step:4d}  loss {value:.3f}")
    return first, value


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--steps", type=int, default=250, help="training steps")
    p.add_argument("--seq-len", type=int, default=24, help="characters per training window")
    p.add_argument("--batch-size", type=int, default=32, help="windows per step (global, over all ranks)")
    p.add_argument("--hidden", type=int, default=64, help="LSTM hidden units")
    p.add_argument("--lr", type=float, default=2.0, help="learning rate (SGD, momentum 0.9, cosine schedule)")
    p.add_argument("--clip", type=float, default=5.0, help="max global gradient norm")
    p.add_argument("--seed", type=int, default=0, help="seeds the weights, the windows and the sample")
    add_quiet_flag(p)
    add_distributed_flag(p)
    add_graph_flag(p)
    add_precision_flag(p)
    args = p.parse_args(argv)
    Precision(args.precision).check_graph(args.graph)
    dist = setup_distributed(args)
    ranks = 1 if dist is None else dist.world_size()

    if not args.quiet:
        print(describe_device(), flush=True)
    nn.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed if dist is None else [args.seed, dist.rank()])  # each rank its windows
    text = zen()
    itos = sorted(set(text))
    stoi = {c: i for i, c in enumerate(itos)}
    data = np.array([stoi[c] for c in text], np.int32)
    V, T, N = len(itos), args.seq_len, args.batch_size // ranks
    if not args.quiet:
        print(f"lstm: {len(text)} characters of the Zen of Python, vocabulary {V}, chance loss ln V = "
              f"{math.log(V):.3f}", flush=True)
    model = CharModel(V, args.hidden)
    model = model if dist is None else dist.DataParallel(model)
    crit = nn.SoftmaxCrossEntropy()
    opt = nn.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    nn.prefetch(model, crit, opt)  # every kernel module compiles now, in the background, on every core
    sched = nn.CosineLR(opt, T_max=args.steps)
    start = time.perf_counter()
    windows = functools.partial(_windows, rng, data, T, N)
    train = _train_graphed if args.graph else _train_eager
    from tqdm import tqdm
    with tqdm(total=args.steps, desc="lstm", unit="step", file=sys.stderr, disable=args.quiet) as bar:
        result = train(model, crit, opt, sched, windows, args, bar)
    if result is None:
        if ranks > 1:
            dist.abort(1)
        return 1
    first, smooth = result
    seconds = time.perf_counter() - start
    if dist is not None:  # each rank smoothed the loss of its own windows
        first, smooth = dist.all_sum(first) / ranks, dist.all_sum(smooth) / ranks
    if (dist is None or dist.is_main()) and not args.quiet:
        print("sample:\n" + sample(model, stoi, itos, "Beautiful is ", 160, 0.5, rng))
    print(f"lstm: loss {first:.3f} -> {smooth:.3f} (chance {math.log(V):.3f}) in {args.steps} steps, {seconds:.1f} s"
          + ("" if dist is None else f" on {ranks} ranks") + ("" if args.precision == "fp32" else f", {args.precision}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
