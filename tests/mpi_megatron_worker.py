"""What each rank runs in tests/test_megatron.py (launched by mpiexec): python mpi_megatron_worker.py SCENARIO
OUTDIR. Each rank builds the one-device model from the same seed beside the split one and checks itself in
float64, so a failed assertion aborts the job with its traceback.

layers:  ParallelMultiheadAttention (self- and cross-attention, need_weights, a per-head mask) and the
         TransformerEncoderLayer split by parallelize: outputs, input gradients, every gathered parameter
         gradient, one all-reduce per attention forward and one backward, two and two per layer (a decoder
         layer three and five); the vocabulary-parallel cross-entropy against nn.CrossEntropyLoss (an
         ignore_index inside the vocabulary), the embedding with a padding row; the scaling suite's GPT rows
         (quick) and their checks.
gpt:     the GPT at T = 2 against T = 1: logits (this rank's columns), loss with ignored targets, every
         gathered gradient, all-reduces and bytes per step against Megatron's count, two AdamW steps, the
         state_dict (a T = 2 checkpoint loads at T = 1 and back, dist.save), dropout's masks (the same where
         the activation is whole, a rank's own inside the split), bad sizes a named error on every rank.
"""
import sys
from pathlib import Path

import numpy as np

import gpublas
import nn
import nn.distributed as dist

TOL = dict(rtol=1e-12, atol=1e-13)
V, C, H, L, B, T = 10, 8, 2, 2, 3, 5   # vocabulary, n_embd, heads, layers, batch, positions


def host(a):
    return a.get() if isinstance(a, gpublas.DeviceArray) else np.asarray(a)


def close(a, b, what=""):
    np.testing.assert_allclose(host(a), host(b), err_msg=what, **TOL)


def gathered_grads(model):
    """{name: the whole model's gradient}: each split parameter's grad gathered as state_dict gathers data."""
    return {name: m._full_state(local, p.grad.get()) for name, p, m, local in model._named_state(owners=True)}


def same_grads(tp, ref):
    grads = gathered_grads(tp)
    assert list(grads) == [n for n, _ in ref.named_parameters()]
    for name, p in ref.named_parameters():
        close(grads[name], p.grad, name)


def counted(g, fn):
    """(fn's result, the collectives and bytes it sent)."""
    g.reset_stats()
    out = fn()
    return out, (g.stats["collectives"], g.stats["bytes"])


def layers(out):
    g = dist.Group()
    rng = np.random.default_rng(7)
    x = gpublas.to_device(rng.normal(size=(T, B, C)))      # (T, B, E): batch_first=False, PyTorch's default
    kv = gpublas.to_device(rng.normal(size=(T + 1, B, C)))
    dy = gpublas.to_device(rng.normal(size=(T, B, C)))
    nn.manual_seed(1)
    ref = nn.MultiheadAttention(C, 2 * H).double()
    nn.manual_seed(1)
    tp = dist.parallelize(nn.MultiheadAttention(C, 2 * H).double(), g)
    assert type(tp) is dist.ParallelMultiheadAttention and tp.num_heads == H and tp.in_proj_weight.shape == (12, C)
    for k, v in ref.state_dict().items():
        np.testing.assert_array_equal(tp.state_dict()[k], v)
    (y, w), n = counted(g, lambda: tp(x, x, x, need_weights=False, is_causal=True))
    assert w is None and n == (1, T * B * C * 8)         # out_proj's all-reduce
    close(y, ref(x, x, x, need_weights=False, is_causal=True)[0])
    dx, n = counted(g, lambda: tp.backward(dy))
    assert n == (1, T * B * C * 8)                        # the q, k, v projections' dx
    close(dx, ref.backward(dy))
    same_grads(tp, ref)
    # cross-attention with a per-head mask (B * heads, Tq, Tk) and the heads' weights gathered
    mask = rng.normal(size=(B * 2 * H, T, T + 1))
    ref.zero_grad()
    tp.zero_grad()
    for avg in (True, False):
        y, w = tp(x, kv, kv, attn_mask=gpublas.to_device(mask), average_attn_weights=avg)
        y0, w0 = ref(x, kv, kv, attn_mask=gpublas.to_device(mask), average_attn_weights=avg)
        close(y, y0)
        close(w, w0)
    for d, d0 in zip(tp.backward(dy), ref.backward(dy)):
        close(d, d0)
    same_grads(tp, ref)

    # a post-norm encoder layer (ReLU) split by the default plan: 2 all-reduces forward, 2 backward
    nn.manual_seed(2)
    ref = nn.TransformerEncoderLayer(C, H, 4 * C, dropout=0.0).double()
    nn.manual_seed(2)
    tp = dist.parallelize(nn.TransformerEncoderLayer(C, H, 4 * C, dropout=0.0).double(), g)
    assert dist.default_plan(ref) == {"self_attn": "heads", "linear1": "colwise", "dropout": "own_rng",
                                      "linear2": "rowwise"}
    y, n = counted(g, lambda: tp(x))
    assert n == (2, 2 * T * B * C * 8)
    close(y, ref(x))
    dx, n = counted(g, lambda: tp.backward(dy))
    assert n == (2, 2 * T * B * C * 8)
    close(dx, ref.backward(dy))
    same_grads(tp, ref)

    # a decoder layer: the cross-attention's dq, dk and dv each all-reduced (3 forward, 5 backward)
    nn.manual_seed(3)
    ref = nn.TransformerDecoderLayer(C, H, 4 * C, dropout=0.0).double()
    nn.manual_seed(3)
    tp = dist.parallelize(nn.TransformerDecoderLayer(C, H, 4 * C, dropout=0.0).double(), g)
    y, n = counted(g, lambda: tp(x, kv, tgt_is_causal=True))
    assert n[0] == 3
    close(y, ref(x, kv, tgt_is_causal=True))
    dx, n = counted(g, lambda: tp.backward(dy))
    assert n[0] == 5
    for d, d0 in zip(dx, ref.backward(dy)):
        close(d, d0)
    same_grads(tp, ref)

    # the vocabulary-parallel loss alone: an ignore_index inside the vocabulary (rank 0's columns), host and
    # device labels, 2-D and 3-D logits; two all-reduces forward (an (N,) MAX, a (2, N) SUM)
    logits = rng.normal(size=(2, 7, V)) * 3
    labels = rng.integers(0, V, (2, 7))
    labels[0, :3] = 3
    mine = gpublas.to_device(np.ascontiguousarray(logits[..., g.rank * V // 2:(g.rank + 1) * V // 2]))
    for lab, lg, part in ((labels, logits, mine), (gpublas.to_device(labels.astype(np.int32)), logits, mine),
                          (labels[1], logits[1], gpublas.ascontiguousarray(mine[1]))):
        crit, ref_crit = dist.VocabParallelCrossEntropy(g, ignore_index=3), nn.CrossEntropyLoss(ignore_index=3)
        loss, n = counted(g, lambda: crit(part, lab))
        assert n == (2, 3 * lab.size * 8), n
        np.testing.assert_allclose(loss, ref_crit(gpublas.to_device(lg), lab), rtol=1e-13)
        close(crit.backward(), ref_crit.backward().get()[..., g.rank * V // 2:(g.rank + 1) * V // 2])

    # the vocabulary-parallel embedding with a padding row (on rank 1): rows, gradients, one all-reduce forward
    nn.manual_seed(5)
    ref = nn.Embedding(V, 4, padding_idx=7).double()
    nn.manual_seed(5)
    tp = dist.VocabParallelEmbedding(V, 4, padding_idx=7, group=g).double()
    ids = rng.integers(0, V, (3, 6))
    ids[0, :2] = 7
    y, n = counted(g, lambda: tp(ids))
    assert n == (1, ids.size * 4 * 8)
    close(y, ref(ids))
    dy = rng.normal(size=(3, 6, 4))
    assert tp.backward(gpublas.to_device(dy)) is None
    ref.backward(gpublas.to_device(dy))
    same_grads(tp, ref)
    scaling_rows()
    (out / f"ok-{g.rank}").write_text("ok")


def scaling_rows():
    """The scaling suite's tensor-parallel GPT rows (benchmarks/scaling_tp.py, quick): T = 1 and 2, their checks
    (the loss, Megatron's count of all-reduces and bytes) passed, a rank holding about half the parameters."""
    from benchmarks import scaling_tp
    from benchmarks.harness import Context
    report = scaling_tp.run(Context(quick=True, repeats=1))
    assert report.checks_passed and len(report.checks) == 2, report.checks
    one, two = report.rows
    assert (one["tensor"], two["tensor"]) == (1, 2) and two["collectives"] == 2 * 2 * scaling_tp.LAYERS + 5
    assert 0.5 < two["params_share"] < 0.55, two


def gpt_pair(g, seed=3, **kw):
    nn.manual_seed(seed)
    ref = nn.models.GPT(V, 8, L, H, C, **kw).double()
    nn.manual_seed(seed)
    tp = nn.models.GPT(V, 8, L, H, C, tensor_parallel=g, **kw).double()
    return ref, tp


def gpt(out):
    g = dist.Group()
    rng = np.random.default_rng(11)
    idx, targets = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    targets[0, :2] = -1                                  # ignored, as nanoGPT's
    ref, tp = gpt_pair(g)
    assert type(tp) is dist.TensorParallelGPT and tp.wte.weight.shape == (V // 2, C)
    assert list(tp.state_dict()) == list(ref.state_dict())
    for k, v in ref.state_dict().items():
        np.testing.assert_array_equal(tp.state_dict()[k], v, err_msg=k)

    (logits, loss), fwd = counted(g, lambda: tp(idx, targets))
    logits0, loss0 = ref(idx, targets)
    assert logits.shape == (B, T, V // 2)
    close(logits, logits0.get()[..., g.rank * V // 2:(g.rank + 1) * V // 2])
    np.testing.assert_allclose(loss, loss0, rtol=1e-13)
    _, bwd = counted(g, lambda: tp.backward())
    ref.backward()
    same_grads(tp, ref)
    want = dist.megatron_collectives(L, B * T, C)        # Megatron's count for the split GPT
    assert fwd == want["forward"] == (2 * L + 3, (2 * L + 1) * B * T * C * 8 + 3 * B * T * 8), (fwd, want)
    assert bwd == want["backward"] == (2 * L + 1, (2 * L + 1) * B * T * C * 8), (bwd, want)
    assert dist.collective_stats(tp)["collectives"] == bwd[0]

    # training: two AdamW steps with nanoGPT's groups and the gradient clipped to norm 0.5 (the whole model's
    # norm: split parameters' squares summed over ranks, whole ones once), the same weights as one device
    norms = []
    for model, clip in ((ref, lambda: nn.clip_grad_norm(ref.parameters(), 0.5)),
                        (tp, lambda: dist.clip_grad_norm(tp, 0.5))):
        opt = model.configure_optimizers(weight_decay=0.1, learning_rate=1e-2)
        for _ in range(2):
            opt.zero_grad()
            model(idx, targets)
            model.backward()
            norms.append(clip())
            opt.step()
    assert norms[0] > 0.5
    np.testing.assert_allclose(norms[2:], norms[:2], rtol=1e-13)
    for k, v in ref.state_dict().items():
        close(tp.state_dict()[k], v, k)

    # checkpoints: T = 2 written by rank 0 loads at T = 1, a T = 1 state loads at T = 2
    dist.save(tp, out / "gpt.npz")
    nn.manual_seed(50)
    one = nn.models.GPT(V, 8, L, H, C).double()
    nn.load(one, out / "gpt.npz")
    close(one(idx, targets)[1], tp(idx, targets)[1])
    nn.manual_seed(60)
    other = nn.models.GPT(V, 8, L, H, C).double()
    tp.load_state_dict(other.state_dict())
    np.testing.assert_allclose(tp(idx, targets)[1], other(idx, targets)[1], rtol=1e-13)
    whole = tp.gathered()
    assert type(whole) is nn.models.GPT and whole.wte.weight.shape == (V, C)
    close(whole(idx)[0], other(idx)[0])

    dropout_masks(g, idx, targets)
    bad_sizes(g)
    (out / f"ok-{g.rank}").write_text("ok")


def dropout_masks(g, idx, targets):
    """Dropout 0.2: where an activation is whole the ranks draw one mask (so every rank's residual stream is the
    same), inside the split each rank its own; rank 0's seeds are the one-device model's."""
    ref, tp = gpt_pair(g, seed=4, dropout=0.2)
    assert tp.h[0].self_attn.attn.dropout_p == 0.2 and tp.h[0].dropout1.p == 0.2
    seeds = {name: m.seed for name, m in tp.named_modules() if hasattr(m, "seed")}
    ref_seeds = {name: m.seed for name, m in ref.named_modules() if hasattr(m, "seed")}
    other = g.comm.allgather(seeds)[1 - g.rank]
    for name, s in seeds.items():
        inside = name.endswith(("self_attn.attn", "self_attn.attn_unfused", ".dropout"))
        assert (s != other[name]) if inside else (s == other[name]), name
        assert g.rank != 0 or s == ref_seeds[name], name
    tp(idx, targets)
    tp.backward()
    for a in (tp.x, tp.ln_f.weight.grad):   # the final LayerNorm's output and its weight's gradient: whole
        both = g.comm.allgather(a.get())
        np.testing.assert_array_equal(both[0], both[1])
    assert np.isfinite(tp.x.get()).all()


def bad_sizes(g):
    """Heads or a vocabulary that do not split, and ranks that built different models: a named error on every
    rank, before any collective of a step."""
    for kw, what in ((dict(n_head=3, n_embd=9), "num_heads=3"), (dict(vocab_size=9), "num_embeddings=9")):
        args = {**dict(vocab_size=V, block_size=8, n_layer=1, n_head=H, n_embd=C), **kw}
        try:
            nn.models.GPT(**args, tensor_parallel=g)
            raise AssertionError(f"{kw} split over 2 ranks")
        except ValueError as e:
            assert what in str(e) and "multiple of 2" in str(e), e
    mine = nn.models.GPT(V, 8, 1, H, C + 2 * g.rank)
    try:
        dist.parallelize(mine, g)
        raise AssertionError("ranks with different models")
    except ValueError as e:
        assert "built different models" in str(e) and "wte.weight" in str(e), e


if __name__ == "__main__":
    scenario, outdir = sys.argv[1], Path(sys.argv[2])
    {"layers": layers, "gpt": gpt}[scenario](outdir)
