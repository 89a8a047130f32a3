"""train: time per training step of nn's digits CNN and of an LSTM sequence classifier, split per
layer into forward and backward, and samples/s against a NumPy implementation of the same step on
the host CPU (nn/reference/layers.py's layers, the ones the tests use), and against PyTorch when torch
imports (on the GPU, or its CPU build beside the sim).

A step is zero_grad, forward, softmax cross-entropy, backward and an SGD update (momentum 0.9).
Before timing, one forward + backward with the same weights and batch is checked against the NumPy
step: the loss and every parameter gradient. Data are random (images in [0, 1), labels in [0, 10)):
timing needs shapes, not a data set. Device segments are timed with events recorded between the
layers, so nothing synchronizes inside a step. With --precision bf16 or fp16 the step is timed again
under nn.autocast of that dtype (STEP bf16 / STEP fp16; fp16 with nn.amp.GradScaler), its loss first
checked against the FP32 loss to 16-bit precision; PyTorch's peer (benchmarks/train_torch.py) then runs
under torch.autocast with the same dtype (and torch's GradScaler for fp16), so the ratio is like for like.
"""
import statistics
import time

import numpy as np

import gpublas

from . import train_torch
from .harness import Report, parse_size, progress

try:
    import nn
    from nn.reference import layers as ref
    from nn.examples import digits
    from nn.reference.gpt import NpGPT
except ImportError as e:  # nn lands separately; the suite reports itself skipped without it
    nn = digits = ref = None
    NN_MISSING = f"{type(e).__name__}: {e}"

DESCRIPTION = "training step time per layer (forward/backward) vs a NumPy step (and PyTorch on a GPU)"
LR, MOMENTUM = 0.01, 0.9
HALF = {"bf16": gpublas.bfloat16, "fp16": np.float16}   # --precision -> the autocast dtype


def numpy_twin(layers, state):
    """NpModel for nn layers [(name, module)] with their weights `state` (host copies)."""
    out = []
    for name, m in layers:
        w = {k.split(".", 1)[1]: state[k].copy() for k in state if k.split(".", 1)[0] == name}
        if isinstance(m, nn.Conv2d):
            if m.dilation != (1, 1):
                raise NotImplementedError("the NumPy reference has no dilated convolution")
            layer = ref.NpConv2d(w["weight"], w.get("bias"), m.stride, m.padding)
        elif isinstance(m, nn.MaxPool2d):
            if m.kernel_size != m.stride or m.padding != (0, 0) or m.kernel_size[0] != m.kernel_size[1]:
                raise NotImplementedError("the NumPy reference pools square non-overlapping windows only")
            layer = ref.NpMaxPool2d(m.kernel_size[0])
        elif isinstance(m, nn.Dense):
            if m.activation:
                raise NotImplementedError("the NumPy reference has no fused Dense activation")
            layer = ref.NpDense(w["weight"], w.get("bias"))
        elif isinstance(m, (nn.ReLU, nn.Tanh, nn.Sigmoid)):
            layer = ref.NpAct(type(m).__name__.lower())
        elif isinstance(m, nn.Flatten):
            layer = ref.NpFlatten()
        elif isinstance(m, nn.Dropout) and m.p == 0:
            layer = ref.NpIdentity()
        elif isinstance(m, LastStateLSTM):
            layer = ref.NpLSTM(w)
        elif isinstance(m, GPTRows):
            layer = NpGPT(w, m.n_layer, m.n_head)
        else:
            raise NotImplementedError(f"no NumPy reference for {m.describe()}")
        out.append((name, layer))
    return ref.NpModel(out, LR, MOMENTUM)


# -- the nn models ---------------------------------------------------------------------------------
if nn is not None:
    class LastStateLSTM(nn.Module):
        """A one-layer nn.LSTM whose output is the last hidden state h_T: (T, N, I) -> (N, H)."""

        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.lstm = nn.LSTM(input_size, hidden_size)
            self.d_out = None

        def describe(self):
            return f"LSTM({self.lstm.input_size}, {self.lstm.hidden_size})"

        def forward(self, x):
            # x: (T, N, I) -> h_T: (N, H)
            out, (h_n, _) = self.lstm(x)
            if self.d_out is None or self.d_out.shape != out.shape:
                self.d_out = gpublas.zeros(out.shape, out.dtype)  # no loss on the other steps' outputs
            return h_n[0]

        def backward(self, dy):
            # dy: (N, H); the loss sees h_T only: its gradient enters as d_hn, every d_out[t] is zero
            return self.lstm.backward(self.d_out, d_hn=dy.reshape(1, *dy.shape))
    class GPTRows(nn.models.GPT):
        """nn.models.GPT with its logits as rows (B*T, V) for the step's softmax cross-entropy on (B*T,) labels."""

        def describe(self):
            return f"GPT(L={self.n_layer}, H={self.n_head}, C={self.n_embd}, V={self.vocab_size})"

        def forward(self, idx):
            # idx: (B, T) -> logits (B*T, V)
            return super().forward(idx).reshape(-1, self.vocab_size)

        def backward(self, dy):
            B, T, V = self.bt
            return super().backward(dy.reshape(B, T, V))
else:
    LastStateLSTM = GPTRows = type("LastStateLSTM", (), {})


def models(ctx):
    """[(name, nn layers [(name, module)], input (host), labels, batch)] for this run."""
    out = []
    rng = np.random.default_rng(0)
    batches = [parse_size(s) for s in ctx.sizes] if ctx.sizes else None
    nn.manual_seed(0)
    cnn = digits.model(dropout=0.0)  # dropout would make the step random; p = 0 keeps the shapes
    for n in batches or [ctx.pick(gpu=256, sim=32, quick=16)]:
        x = rng.uniform(0, 1, (n, 1, 8, 8)).astype(np.float32)
        out.append((f"digits CNN, batch {n}", [(str(i), m) for i, m in enumerate(cnn)], x,
                    rng.integers(0, 10, n).astype(np.int32), n))
    T, I, H = ctx.pick(gpu=(32, 32, 256), sim=(8, 16, 32), quick=(5, 8, 16))
    lstm = nn.Sequential(LastStateLSTM(I, H), nn.Dense(H, 10))
    for n in batches or [ctx.pick(gpu=64, sim=16, quick=8)]:
        x = rng.uniform(-1, 1, (T, n, I)).astype(np.float32)
        out.append((f"LSTM T={T} I={I} H={H}, batch {n}", [(str(i), m) for i, m in enumerate(lstm)], x,
                    rng.integers(0, 10, n).astype(np.int32), n))
    V, T, L, C = ctx.pick(gpu=(4096, 256, 4, 512), sim=(96, 64, 2, 64), quick=(32, 16, 1, 32))
    gpt = GPTRows(V, T, L, C // 32 if C >= 128 else 4, C)
    for n in batches or [ctx.pick(gpu=16, sim=8, quick=2)]:
        out.append((f"GPT L={L} C={C} T={T} V={V}, batch {n}", [("gpt", gpt)], rng.integers(0, V, (n, T)).astype(np.int32),
                    rng.integers(0, V, n * T).astype(np.int32), n))
    return out


def _state(layers):
    return {f"{name}.{k}": v for name, m in layers for k, v in m.state_dict().items()}


def _layer_name(m):
    return m.describe().split("(")[0]


# -- timing -----------------------------------------------------------------------------------------
def nn_step(layers, crit, opt, x, labels, marks, scaler):
    """One nn training step; records the events `marks` between segments (no synchronization except
    an enabled GradScaler's read of its inf/NaN flag in the optimizer segment, as PyTorch's)."""
    it = iter(marks)
    next(it).record()
    opt.zero_grad()
    for _, m in layers:
        x = m(x)
        next(it).record()
    crit(x, labels)  # returns the loss as a float: the one read-back of a step, as in a training loop
    next(it).record()
    dy = scaler.scale(crit.backward())
    for _, m in reversed(layers):
        dy = m.backward(dy)
        next(it).record()
    scaler.step(opt)
    scaler.update()
    next(it).record()


def segments(layers):
    return ([f"{n} fwd" for n, _ in layers] + ["loss"] + [f"{n} bwd" for n, _ in reversed(layers)]
            + ["optimizer"])


def time_nn(ctx, layers, x, labels, scaler=None):
    scaler = scaler or nn.amp.GradScaler(enabled=False)
    crit = nn.SoftmaxCrossEntropy()
    opt = nn.SGD([p for _, m in layers for p in m.parameters()], lr=LR, momentum=MOMENTUM)
    names = segments(layers)
    marks = [gpublas.Event() for _ in range(len(names) + 1)]
    dx, labels = gpublas.to_device(x), gpublas.to_device(labels)
    for _ in range(ctx.warmup):
        nn_step(layers, crit, opt, dx, labels, marks, scaler)
    samples = {n: [] for n in names}
    steps = []
    for _ in range(ctx.repeats):
        nn_step(layers, crit, opt, dx, labels, marks, scaler)
        marks[-1].synchronize()
        for n, a, b in zip(names, marks, marks[1:]):
            samples[n].append(a.elapsed_ms(b))
        steps.append(marks[0].elapsed_ms(marks[-1]))
    return {n: statistics.median(v) for n, v in samples.items()}, statistics.median(steps), steps


# -- the same step captured once and replayed (--graph) ----------------------------------------------
def graph_step(layers, crit, opt, x, labels):
    """A step with nothing read back (the loss stays on the device): what a graph can hold."""
    opt.zero_grad()
    for _, m in layers:
        x = m(x)
    loss = crit(x, labels, on_device=True)
    dy = crit.backward()
    for _, m in reversed(layers):
        dy = m.backward(dy)
    opt.step()
    return loss


def check_graph(report, label, layers, x, labels, steps=3):
    """From the same weights, `steps` eager steps and one eager step + a capture + steps - 1 replays
    must give the same losses and weights, bit for bit; the weights are put back afterwards."""
    state = {name: m.state_dict() for name, m in layers}
    params = [p for _, m in layers for p in m.parameters()]
    dx, dl = gpublas.to_device(x), gpublas.to_device(labels)
    runs = []
    for captured in (False, True):
        for name, m in layers:
            m.load_state_dict(state[name])
        opt, crit = nn.SGD(params, lr=LR, momentum=MOMENTUM), nn.SoftmaxCrossEntropy()
        losses = [graph_step(layers, crit, opt, dx, dl).get()[0]]
        if captured:
            with gpublas.graph() as g:
                loss = graph_step(layers, crit, opt, dx, dl)
            for _ in range(steps - 1):
                g.replay()
                losses.append(loss.get()[0])
            g.free()
        else:
            losses += [graph_step(layers, crit, opt, dx, dl).get()[0] for _ in range(steps - 1)]
        runs.append((np.array(losses), [p.data.get() for p in params]))
    (eager_loss, eager_w), (graph_loss, graph_w) = runs
    ok = report.check(f"{label}: replayed losses = eager", graph_loss, eager_loss, rtol=0, atol=0)
    ok &= report.check(f"{label}: replayed weights = eager", np.concatenate([w.ravel() for w in graph_w]),
                       np.concatenate([w.ravel() for w in eager_w]), rtol=0, atol=0)
    for name, m in layers:
        m.load_state_dict(state[name])
    return ok


def time_graph(ctx, layers, x, labels):
    """Median ms per replay of the step captured once (events around each replay)."""
    crit = nn.SoftmaxCrossEntropy()
    opt = nn.SGD([p for _, m in layers for p in m.parameters()], lr=LR, momentum=MOMENTUM)
    dx, dl = gpublas.to_device(x), gpublas.to_device(labels)
    graph_step(layers, crit, opt, dx, dl)  # compiled, the pool warm
    with gpublas.graph() as g:
        graph_step(layers, crit, opt, dx, dl)
    begin, end = gpublas.Event(), gpublas.Event()
    for _ in range(ctx.warmup):
        g.replay()
    steps = []
    for _ in range(ctx.repeats):
        begin.record()
        g.replay()
        end.record()
        end.synchronize()
        steps.append(begin.elapsed_ms(end))
    g.free()
    return statistics.median(steps)


def time_autocast(ctx, report, label, layers, x, labels, dtype):
    """The step's time under nn.autocast(dtype), float16 with loss scaling (None when its loss is not
    the FP32 loss to 16 bits)."""
    crit, dx, dl = nn.SoftmaxCrossEntropy(), gpublas.to_device(x), gpublas.to_device(labels)
    losses = []
    for enabled in (False, True):
        with nn.autocast(dtype, enabled=enabled):
            losses.append(crit(nn.Sequential(*(m for _, m in layers))(dx), dl))
    if not report.check(f"{label}: {np.dtype(dtype)} loss = fp32 loss", losses[1], losses[0], rtol=2 ** -6, atol=0):
        return None
    with nn.autocast(dtype):
        return time_nn(ctx, layers, x, labels, nn.amp.GradScaler(enabled=np.dtype(dtype) == np.float16))[1]


def time_numpy(ctx, twin, x, labels):
    names = segments(twin.layers)
    samples = {n: [] for n in names}
    steps = []
    for rep in range(ctx.warmup + ctx.repeats):
        stamps = []
        twin.step(x, labels, lambda name: stamps.append(time.perf_counter()))
        if rep >= ctx.warmup:
            for n, a, b in zip(names, stamps, stamps[1:]):
                samples[n].append((b - a) * 1e3)
            steps.append((stamps[-1] - stamps[0]) * 1e3)
    return {n: statistics.median(v) for n, v in samples.items()}, statistics.median(steps)


def check_step(report, label, layers, twin, x, labels):
    """One forward + backward on both sides from the same weights: loss and gradients must agree."""
    for _, m in layers:
        m.zero_grad()
    crit = nn.SoftmaxCrossEntropy()
    y = gpublas.to_device(x)
    for _, m in layers:
        y = m(y)
    loss = crit(y, labels)
    dy = crit.backward()
    for _, m in reversed(layers):
        dy = m.backward(dy)
    h = x
    for _, layer in twin.layers:
        h = layer.forward(h)
    ref_loss, d = ref.np_softmax_xent(h, labels)
    for _, layer in reversed(twin.layers):
        d = layer.backward(d)
    ok = report.check(f"{label}: loss", np.array([loss]), np.array([ref_loss]), rtol=1e-4, atol=1e-5)
    got = {f"{name}.{k}": p.grad.get() for name, m in layers for k, p in m.named_parameters()}
    for k, want in twin.grads().items():
        ok &= report.check(f"{label}: grad {k}", got[k], want, rtol=1e-3, atol=1e-4 * float(np.abs(want).max() + 1e-12))
    for _, m in layers:
        m.zero_grad()
    return ok


# -- the suite --------------------------------------------------------------------------------------
def run(ctx):
    report = Report("train", ctx)
    if nn is None:
        report.skip("train", f"nn not available ({NN_MISSING})")
        report.note("skipped: nn not available")
        return report
    torch_device = train_torch.device()
    for label, layers, x, labels, batch in progress(models(ctx), ctx, "train"):
        state = _state(layers)
        twin = numpy_twin(layers, state)
        if not check_step(report, label, layers, twin, x, labels):
            continue
        seg, step_ms, _ = time_nn(ctx, layers, x, labels)
        np_seg, np_step = time_numpy(ctx, numpy_twin(layers, state), x, labels)
        for (name, m) in layers:
            report.add(model=label, layer=f"{name} {_layer_name(m)}", fwd_ms=seg[f"{name} fwd"],
                       bwd_ms=seg[f"{name} bwd"], numpy_fwd_ms=np_seg[f"{name} fwd"],
                       numpy_bwd_ms=np_seg[f"{name} bwd"])
        report.add(model=label, layer="loss + optimizer", fwd_ms=seg["loss"], bwd_ms=seg["optimizer"],
                   numpy_fwd_ms=np_seg["loss"], numpy_bwd_ms=np_seg["optimizer"])
        row = report.add(model=label, layer="STEP", batch=batch, step_ms=step_ms,
                         samples_per_s=batch / step_ms * 1e3, numpy_step_ms=np_step,
                         numpy_samples_per_s=batch / np_step * 1e3, vs_numpy=np_step / step_ms)
        g_row = None
        if ctx.graph and check_graph(report, label, layers, x, labels):
            g_ms = time_graph(ctx, layers, x, labels)
            g_row = report.add(model=label, layer="STEP graph", batch=batch, step_ms=g_ms,
                               samples_per_s=batch / g_ms * 1e3, numpy_step_ms=np_step,
                               numpy_samples_per_s=batch / np_step * 1e3, vs_numpy=np_step / g_ms)
        rows = [("fp32", row, step_ms)]
        if ctx.precision in HALF:
            h_ms = time_autocast(ctx, report, label, layers, x, labels, HALF[ctx.precision])
            if h_ms is not None:
                rows.append((ctx.precision, report.add(
                    model=label, layer=f"STEP {ctx.precision}", batch=batch, step_ms=h_ms,
                    samples_per_s=batch / h_ms * 1e3, numpy_step_ms=np_step, numpy_samples_per_s=batch / np_step * 1e3,
                    vs_numpy=np_step / h_ms), h_ms))
        # on the CPU fp32 only: torch's CPU autocast needs what this CPU may lack (bf16 LSTM: AVX-512)
        for precision, r, ms in rows if torch_device == "cuda" else rows[:1] if torch_device else ():
            t = train_torch.time_torch(ctx, layers, state, x, labels, LR, MOMENTUM, precision, torch_device,
                                       graph=g_row is not None and precision == "fp32")
            if t is not None:
                r.update(torch_step_ms=t["ms"], torch_samples_per_s=batch / t["ms"] * 1e3, vs_torch=t["ms"] / ms,
                         torch_first_loss=t["first_loss"])
                if "graph_ms" in t:  # both replayed: nn's graph against PyTorch's CUDA graph
                    g_row.update(torch_step_ms=t["graph_ms"], torch_samples_per_s=batch / t["graph_ms"] * 1e3,
                                 vs_torch=t["graph_ms"] / g_row["step_ms"])
                elif "graph_error" in t:
                    report.note(f"{label}: PyTorch's CUDA graph capture failed ({t['graph_error']})")
    report.columns = [("model", "model", "s"), ("layer", "layer", "s"), ("fwd_ms", "fwd ms", ".4f"),
                      ("bwd_ms", "bwd ms", ".4f"), ("numpy_fwd_ms", "NumPy fwd", ".4f"),
                      ("numpy_bwd_ms", "NumPy bwd", ".4f"), ("step_ms", "step ms", ".3f"),
                      ("samples_per_s", "samples/s", ".0f"), ("numpy_samples_per_s", "NumPy samples/s", ".0f"),
                      ("vs_numpy", "x NumPy", ".2f"), ("torch_samples_per_s", "PyTorch samples/s", ".0f"),
                      ("vs_torch", "x PyTorch", ".2f")]
    report.note("'loss + optimizer' row: fwd = softmax cross-entropy (with its gradient), bwd = the SGD update")
    report.note("a step = zero_grad + forward + loss + backward + SGD(momentum 0.9); random data")
    if ctx.graph:
        report.note("STEP graph: the same step (loss kept on the device) captured once with gpublas.graph and "
                    "replayed; its losses and weights checked equal to eager steps bit for bit"
                    + ("; its PyTorch peer is PyTorch's step captured in a CUDA graph (torch.cuda.CUDAGraph) "
                       "and replayed" if torch_device == "cuda" else ""))
    if ctx.precision in HALF:
        report.note(f"STEP {ctx.precision}: the same step under nn.autocast({np.dtype(HALF[ctx.precision])}): Dense, "
                    f"Conv2d and LSTM GEMMs in 16 bits from FP32 master weights, FP32 gradients and SGD"
                    + ("; loss scaling by nn.amp.GradScaler" if ctx.precision == "fp16" else "")
                    + "; its PyTorch peer runs under torch.autocast with the same dtype"
                    + (" and torch.amp.GradScaler" if ctx.precision == "fp16" else ""))
    if torch_device is None:
        report.skip("PyTorch step", "needs PyTorch (a CUDA build on the cuda backend)")
    elif torch_device == "cpu":
        report.note("PyTorch: its CPU build on the same cores, in this process (x PyTorch: PyTorch's step time over "
                    "nn's; both take OMP_NUM_THREADS threads)")
    return report


def draw(plt, report):
    models_ = list(dict.fromkeys(r["model"] for r in report.rows))
    if not models_:
        return None
    fig, axes = plt.subplots(1, len(models_), figsize=(6 * len(models_), 4.5), squeeze=False)
    for ax, model in zip(axes[0], models_):
        rows = [r for r in report.rows if r["model"] == model and not r["layer"].startswith("STEP")]
        y = np.arange(len(rows))
        ax.barh(y - 0.2, [r["fwd_ms"] for r in rows], 0.4, label="gpublas forward")
        ax.barh(y - 0.2, [r["bwd_ms"] for r in rows], 0.4, left=[r["fwd_ms"] for r in rows], label="gpublas backward")
        ax.barh(y + 0.2, [r["numpy_fwd_ms"] + r["numpy_bwd_ms"] for r in rows], 0.4, label="NumPy fwd + bwd", alpha=0.6)
        ax.set_yticks(y)
        ax.set_yticklabels([r["layer"] for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("ms per step")
        step = next(r for r in report.rows if r["model"] == model and r["layer"] == "STEP")
        ax.set_title(f"{model}\n{step['samples_per_s']:.0f} samples/s (NumPy {step['numpy_samples_per_s']:.0f})",
                     fontsize=9)
        ax.legend(fontsize=7)
    return fig
