"""gpt2: training tokens/s of GPT-2 small (124M parameters: 12 layers, 12 heads, C = 768, V = 50257,
T = 1024) as nn.models.GPT, under nn.autocast(bfloat16) (--precision fp16 for float16 with loss scaling), AdamW
with nanoGPT's groups and gradient clipping; an eager step and, with --graph, the same step captured once
and replayed (nn.examples.graphed, as `python -m nn.examples.gpt --graph` runs it); against PyTorch eager
(benchmarks/train_torch.py's twin of the model: the same weights, torch.autocast with the same dtype,
torch.optim.AdamW) on the same GPU in the same run, and the graph row also against PyTorch's step captured in a
CUDA graph (torch.cuda.CUDAGraph, AdamW with capturable=True) and replayed.

A step is zero_grad, forward, cross-entropy over (B, T, V), backward, clip_grad_norm(1.0), AdamW; the loss
stays on the device (nothing is read back inside the timed steps). Before timing, the first step's loss is
checked against the FP32 loss (16-bit rounding) and, where PyTorch imports, against the twin's first loss
from the same weights and batch. The simulator runs a tiny GPT of the same shape of code (--quick smaller
still): GPT-2 small is a GPU figure.
"""
import statistics

import numpy as np

import gpublas

from . import train_torch
from .harness import DeviceClock, Report, parse_size

try:
    import nn
    from nn.examples import gpt as gpt_example
    from nn.examples.graphed import GraphedStep, training_parts
    from nn.examples.precision import Precision
except ImportError as e:  # the suite reports itself skipped without nn
    nn = None
    NN_MISSING = f"{type(e).__name__}: {e}"

DESCRIPTION = "GPT-2 small training tokens/s, eager and --graph, against PyTorch eager (bf16 by default)"
LR = 6e-4


def config(ctx):
    """(vocab, T, layers, heads, C, batch): GPT-2 small on a GPU; --sizes B sets the batch."""
    V, T, L, H, C = ctx.pick(gpu=(50257, 1024, 12, 12, 768), sim=(128, 64, 2, 4, 64), quick=(64, 16, 1, 2, 32))
    B = parse_size(ctx.sizes[0]) if ctx.sizes else ctx.pick(gpu=8, sim=2, quick=2)
    return V, T, L, H, C, B


def make_step(net, precision, graph):
    """step(x, y) on host batches: nn.examples.gpt's training step (step_parts), eager or captured and replayed."""
    opt = net.configure_optimizers(weight_decay=0.1, learning_rate=LR, betas=(0.9, 0.95))
    forward_backward, update = gpt_example.step_parts(net, opt, precision, {})
    if graph:
        return GraphedStep(training_parts(net, forward_backward, update))
    return lambda xh, yh: (forward_backward(gpublas.to_device(xh), gpublas.to_device(yh)), update(None, None))


def time_ours(ctx, net, state, x, y, precision, graph):
    """Median ms of a step (events around it on the device), from the weights `state`."""
    net.load_state_dict(state)
    step = make_step(net, Precision(precision), graph)
    clock = DeviceClock()
    for _ in range(ctx.warmup + (2 if graph else 0)):   # a graphed step: eager once, then the capture
        step(x, y)
    times = []
    for _ in range(ctx.repeats):
        clock.start()
        step(x, y)
        times.append(clock.stop())
    return statistics.median(times)


def first_loss(net, state, x, y, precision):
    net.load_state_dict(state)
    with Precision(precision).autocast():
        logits = net(gpublas.to_device(x))
    return float(nn.CrossEntropyLoss()(logits, gpublas.to_device(y)))


def torch_peer(ctx, net, state, x, y, precision, device, graph=False):
    """{"ms", "first_loss"} of the same step in PyTorch eager on `device` (None: torch does not import); graph=True
    (CUDA) adds the step captured in a CUDA graph and replayed (train_torch.graph_timing: "graph_ms" or
    "graph_error"), from a second twin whose AdamW keeps its step count on the device (capturable=True)."""
    try:
        import torch
    except ImportError:
        return None
    net.load_state_dict(state)
    tx, ty = torch.from_numpy(x).long().to(device), torch.from_numpy(y).long().to(device)
    if device != "cuda":   # off the GPU only the first loss is compared (torch's optimizers import slowly)
        model = train_torch.torch_gpt(net, device)
        with torch.no_grad():
            return {"first_loss": torch.nn.functional.cross_entropy(model(tx).flatten(0, 1), ty.flatten()).item(),
                    "ms": None}
    low = getattr(torch, train_torch.AUTOCAST[precision]) if precision in train_torch.AUTOCAST else None

    def twin(capturable):
        """(optimizer, body): a twin of net and its step from forward to the update (no zero_grad, no read-back)."""
        model = train_torch.torch_gpt(net, device)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                lr=LR, betas=(0.9, 0.95), eps=1e-8, capturable=capturable)

        def body():  # a captured autocast keeps no cast cache (PyTorch's CUDA-graph notes: cache_enabled=False)
            with torch.autocast(device, dtype=low or torch.bfloat16, enabled=low is not None,
                                cache_enabled=not capturable):
                logits = model(tx)
            loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), ty.flatten())
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # as step_parts
            opt.step()
            return loss
        return opt, body

    opt, body = twin(False)

    def step():
        opt.zero_grad()
        return body()

    out = {"first_loss": step().item(), "ms": train_torch.median_ms(ctx, step, device)}
    if graph:
        g_opt, g_body = twin(True)
        out.update(train_torch.graph_timing(ctx, lambda: g_opt.zero_grad(set_to_none=True), g_body))
    return out


def run(ctx):
    report = Report("gpt2", ctx)
    if nn is None:
        report.skip("gpt2", f"nn not available ({NN_MISSING})")
        return report
    V, T, L, H, C, B = config(ctx)
    nn.manual_seed(0)
    net = nn.models.GPT(V, T, L, H, C)
    state = {k: v.copy() for k, v in net.state_dict().items()}
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, V, (B, T)).astype(np.int32) for _ in range(2))
    precision = ctx.precision if ctx.precision in ("bf16", "fp16") else "bf16"   # GPT-2 small trains in 16 bits
    label = f"GPT L={L} H={H} C={C} T={T} V={V} ({net.num_parameters() / 1e6:.1f}M), batch {B}"
    loss32 = first_loss(net, state, x, y, "fp32")
    ok = report.check(f"{label}: {precision} loss = fp32 loss", np.array([first_loss(net, state, x, y, precision)]),
                      np.array([loss32]), rtol=2 ** -6, atol=0)
    ok &= report.check(f"{label}: initial loss near ln(V)", np.array([loss32]), np.array([np.log(V)]), rtol=0.1, atol=0)
    device = train_torch.device() or "cpu"
    graphs = (ctx.graph or ctx.simulated) and precision == "bf16"   # the graph rows (fp16: see below)
    peer = torch_peer(ctx, net, state, x, y, "fp32" if device == "cpu" else precision, device,
                      graph=graphs and device == "cuda")
    if peer is not None:
        ok &= report.check(f"{label}: PyTorch twin's first loss", np.array([peer["first_loss"]]),
                           np.array([loss32]), rtol=2 ** -5 if device == "cuda" else 1e-4, atol=0)
    if not ok:
        return report
    # fp16's GradScaler decides on the host each step, which a graph cannot hold (Precision.check_graph)
    for graph in (False, True) if graphs else (False,):
        ms = time_ours(ctx, net, state, x, y, precision, graph)
        row = report.add(model=label, step="graph" if graph else "eager", precision=precision, step_ms=ms,
                         tokens_per_s=B * T / ms * 1e3)
        if peer is not None and peer["ms"]:
            row.update(torch_step_ms=peer["ms"], torch_tokens_per_s=B * T / peer["ms"] * 1e3, vs_torch=peer["ms"] / ms)
        if graph and peer is not None and "graph_ms" in peer:   # replayed against replayed
            row.update(torch_graph_step_ms=peer["graph_ms"], torch_graph_tokens_per_s=B * T / peer["graph_ms"] * 1e3,
                       vs_torch_graph=peer["graph_ms"] / ms)
    if peer is not None and "graph_error" in peer:
        report.note(f"PyTorch's CUDA graph capture failed ({peer['graph_error']})")
    report.columns = [("model", "model", "s"), ("step", "step", "s"), ("precision", "precision", "s"),
                      ("step_ms", "step ms", ".2f"), ("tokens_per_s", "tokens/s", ".0f"),
                      ("torch_tokens_per_s", "PyTorch eager tokens/s", ".0f"), ("vs_torch", "x PyTorch", ".2f"),
                      ("torch_graph_tokens_per_s", "PyTorch graph tokens/s", ".0f"),
                      ("vs_torch_graph", "x PyTorch graph", ".2f")]
    report.note("a step = zero_grad + forward + cross-entropy + backward + clip_grad_norm(1.0) + AdamW; random tokens")
    report.note("graph: the step captured once and replayed (nn.examples.graphed), as `nn.examples.gpt --graph`")
    if device != "cuda":
        report.skip("PyTorch step time", "needs a GPU machine with PyTorch (off the GPU only its first loss is compared)")
    return report


def draw(plt, report):
    rows = report.rows
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = [f"gpublas {r['step']}" for r in rows]
    values = [r["tokens_per_s"] for r in rows]
    if rows[0].get("torch_tokens_per_s"):
        names.append("PyTorch eager")
        values.append(rows[0]["torch_tokens_per_s"])
    replayed = [r["torch_graph_tokens_per_s"] for r in rows if r.get("torch_graph_tokens_per_s")]
    if replayed:
        names.append("PyTorch CUDA graph")
        values.append(replayed[0])
    ax.barh(names, values)
    ax.set_xlabel(f"tokens/s ({rows[0]['precision']})")
    ax.set_title(rows[0]["model"], fontsize=9)
    fig.tight_layout()
    return fig
