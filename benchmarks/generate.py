"""generate: GPT text generation, tokens/s with and without the key/value cache (nn.models.GPT.generate,
use_cache=True / False) and with the decode step replayed as a graph (use_graph) or run eagerly, over the context
length, beside transformers' GPT2LMHeadModel.generate (use_cache=True, greedy) of the same weights
(save_pretrained -> from_pretrained) in the same run.

Greedy decoding (top_k=1), batch 1. The step rows' time per token is one decode step at position `context`, as
generate runs it (harness.measure, host clock): `cached` one position through the blocks against `context` cached
keys (the prefill done before timing), the head on it, the argmax and the token read back, launched eagerly;
`cached, graph` the same step replayed (nn/models/gpt_decode.py; both set the position first, one 8-byte copy);
`uncached` the forward of the whole window and the same draw. The generate rows, nn's (`generate, graph`) and
transformers', are timed alike: the time of a generate of 1 + N tokens less that of 1 token (timed back to back),
over N, the median of 5 such differences, N = 4 x the step rows' N where the block holds it (nn's includes the
eager first step and the capture). Before timing, the graphed run's tokens are
checked equal to the eager cached run's and those to the uncached run's. On a GPU the model is GPT-2 small's shape (12 layers, C = 768,
V = 50257, block 1024); the simulator runs a small model of the same code (2 layers, C = 128); transformers runs
on torch's device (the CPU on the simulator: another device, shown for scale).
"""
import statistics
import tempfile
import time

import numpy as np

import gpublas

from .harness import HostClock, Report, measure, progress

try:
    import nn
    from nn.models import gpt_decode as G
    from nn.models.gpt_generate import sample
except ImportError as e:  # pragma: no cover
    nn = None
    NN_MISSING = f"{type(e).__name__}: {e}"

DESCRIPTION = "GPT generation tokens/s with and without the KV cache, over the context, beside transformers"


def config(ctx):
    """(vocab, block, layers, heads, C), the contexts and the N tokens timed per row."""
    model = ctx.pick(gpu=(50257, 1024, 12, 12, 768), sim=(256, 1024, 2, 4, 128), quick=(64, 128, 1, 2, 32))
    contexts = [int(s) for s in ctx.sizes] or ctx.pick(gpu=(64, 128, 256, 512, 960), sim=(64, 256, 512, 960),
                                                       quick=(16, 64))
    return model, contexts, ctx.pick(gpu=32, sim=16, quick=3)


def _per_token(fn, n, repeats):
    """Seconds per decoded token: fn(1 + n) - fn(1) over n, the median of `repeats` such differences, the two
    timed back to back (a slow moment of a shared machine then falls on both: the prefill they share is most of
    a run at long contexts)."""
    def timed(k):
        t = time.perf_counter()
        fn(k)
        return time.perf_counter() - t
    fn(1)
    return max(statistics.median(timed(1 + n) - timed(1) for _ in range(repeats)), 1e-9) / n


def _transformers(model, dtype):
    """(GPT2LMHeadModel of model's weights, torch) or (None, why)."""
    try:
        import torch
        import transformers
    except ImportError as e:
        return None, f"{type(e).__name__}: {e}"
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        hf = transformers.GPT2LMHeadModel.from_pretrained(d, dtype=torch.float32).eval()
    if gpublas.backend() == "cuda" and torch.cuda.is_available():
        hf = hf.cuda()
    hf.generation_config.pad_token_id = 0
    return hf, torch


def _step(model, prompt, graph):
    """One greedy decode step at position len(prompt) (the prefill done here), eager or replayed."""
    dec = G.Decoder(model, 1, model.dtype, greedy=True, graph=graph)
    logits = dec.prefill(prompt)
    dec.feed(logits.argmax(axis=-1))
    context = prompt.shape[1]

    def step():
        dec.seek(context)
        dec.step()
        return dec.next_tokens()
    step()
    return step


def run(ctx):
    report = Report("generate", ctx)
    if nn is None:
        report.skip("generate", NN_MISSING)
        return report
    (V, T, L, H, C), contexts, n = config(ctx)
    nn.manual_seed(0)
    model = nn.models.GPT(V, T, L, H, C).eval()
    rng = np.random.default_rng(0)
    hf, torch = _transformers(model, np.float32)
    if hf is None:
        report.skip("transformers", torch)
    repeats = 1 if ctx.quick else 5
    for context in progress(contexts, ctx, "generate"):
        prompt = rng.integers(0, V, (1, context))
        graphed = model.generate(prompt, n, top_k=1)
        cached = model.generate(prompt, n, top_k=1, use_graph=False)
        plain = model.generate(prompt, n, top_k=1, use_cache=False)
        if not (report.check_equal(f"graphed tokens context={context}", graphed, cached)
                and report.check_equal(f"cached tokens context={context}", cached, plain)):
            continue
        whole_n = max(1, min(4 * n, T - context - 1))   # the generate rows' tokens: all within the block
        paths = [("cached", _step(model, prompt, False)), ("cached, graph", _step(model, prompt, True)),
                 ("uncached", lambda: sample(model(prompt)[:, -1, :], 1.0, 1, None, rng).get()),
                 ("generate, graph", lambda k: model.generate(prompt, k, top_k=1))]
        agree = None
        if hf is not None:
            ids = torch.tensor(prompt, device=hf.device)

            def hf_generate(k):
                with torch.no_grad():
                    out = hf.generate(ids, max_new_tokens=k, min_new_tokens=k, do_sample=False, use_cache=True)
                if hf.device.type == "cuda":
                    torch.cuda.synchronize()
                return out
            agree = float(np.mean(hf_generate(n).cpu().numpy()[0, context:] == cached[0, context:]))
            paths.append((f"transformers ({hf.device.type})", hf_generate))
        base = {}
        for path, fn in paths:
            whole = path.startswith(("generate", "transformers"))
            s = _per_token(fn, whole_n, repeats) if whole else measure(fn, ctx, HostClock()).median_ms / 1e3
            base.setdefault("cached", s)
            report.add(context=context, path=path, ms_per_token=1e3 * s, tokens_per_s=1.0 / s,
                       x_cached=s / base["cached"], agree=agree if path.startswith("transformers") else None)
    _summarize(report, contexts)
    return report


def _summarize(report, contexts):
    by = {(r["context"], r["path"]): r["ms_per_token"] for r in report.rows}
    first, last = contexts[0], contexts[-1]
    if (first, "cached") in by and (last, "cached") in by:
        report.summary["cached_growth"] = round(by[(last, "cached")] / by[(first, "cached")], 3)
    mid = [c for c in contexts if (c, "uncached") in by and (c, "cached") in by]
    report.summary["uncached_over_cached"] = {c: round(by[(c, "uncached")] / by[(c, "cached")], 2) for c in mid}
    for mine in ("cached", "cached, graph", "generate, graph"):
        report.summary[f"transformers_over_{mine.replace(', ', '_')}"] = {
            c: round(v / by[(c, mine)], 2) for (c, p), v in by.items() if p.startswith("transformers") and (c, mine) in by}
    report.columns = [("context", "context", "d"), ("path", "path", "s"), ("ms_per_token", "ms/token", ".3f"),
                      ("tokens_per_s", "tokens/s", ".1f"), ("x_cached", "x cached", ".2f"),
                      ("agree", "greedy agree", "")]
    report.table_rows = [dict(r, agree="" if r["agree"] is None else f"{r['agree']:.2f}") for r in report.rows]
    report.note("ms/token: one decode step at position `context` (the generate rows: a generate of 1 + N tokens less "
                "one of 1 token, over N, median of 5, quick: 1), batch 1, greedy; x cached: this path's time per token over the cached one's; greedy "
                "agree: the share of transformers' tokens equal to ours (float32: near-ties may differ)")
    if report.ctx.simulated:
        report.note("sim: nn runs on the simulator (CUDA C on the CPU); transformers on torch's CPU kernels")


def draw(plt, report):
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, path in enumerate(sorted({r["path"] for r in report.rows})):
        sel = sorted((r for r in report.rows if r["path"] == path), key=lambda r: r["context"])
        ax.plot([r["context"] for r in sel], [r["tokens_per_s"] for r in sel], marker="o", color=f"C{i}", label=path)
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("tokens/s (decode)")
    ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig

