"""A character-level GPT trained on the Python standard library's own source (no download).

    python -m nn.examples.gpt            # sim backend: a minute or so on 2 cores

nn.models.GPT (2 pre-norm causal blocks, 4 heads, n_embd 64, context 64) learns to predict the next
character of random 64-character windows of a fixed, sorted list of standard-library modules (the first
90 % of their text for training, the rest for validation), AdamW with nanoGPT's weight-decay groups, a
cosine learning rate and gradient clipping. Prints the train loss as it falls, the validation loss against
the loss of predicting the characters' frequencies, and a sample generated from the trained model.
--save / --load keep the weights (nn.save's PyTorch names); --sample generates from a loaded checkpoint
without training (with the KV cache, printing tokens/s); --graph replays the captured step; --precision bf16 /
fp16 runs the Dense layers' GEMMs in 16 bits (nn.autocast). --init DIR fine-tunes a transformers GPT-2 directory
(GPT.from_pretrained; with a tokenizer.json there the tokenizers package encodes the text, else characters are
the tokens) and --export DIR writes the result as one (GPT.save_pretrained, tokenizer.json copied).
--distributed (under mpiexec) draws one global batch of windows a step and gives each rank its own slice.
--tensor-parallel T (under mpiexec -n T) splits every layer over T ranks (Megatron-LM's heads, MLP and vocabulary
split, nn.distributed.parallelize); with --distributed and -n T*D, D data-parallel replicas of that split.
"""
import math
import os
import shutil
import sys
import sysconfig
import time

import numpy as np

import gpublas
import nn

from .graphed import GraphedStep, add_graph_flag, training_parts
from .precision import Precision, add_precision_flag
from .training import add_distributed_flag, add_quiet_flag, describe_device, parser, setup_distributed

# the corpus: standard-library modules present in every CPython 3.10+, in this order
MODULES = ("abc.py", "bisect.py", "colorsys.py", "copy.py", "fnmatch.py", "genericpath.py", "glob.py",
           "heapq.py", "keyword.py", "linecache.py", "opcode.py", "queue.py", "sched.py", "shlex.py",
           "string.py", "textwrap.py")
CHARS = "\n" + "".join(chr(c) for c in range(32, 127))   # printable ASCII; anything else becomes '?'


def corpus_text():
    """The modules' text and the file count."""
    root = sysconfig.get_paths()["stdlib"]
    texts = []
    for name in sorted(MODULES):
        path = os.path.join(root, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    return "".join(texts), len(texts)


def corpus():
    """The modules' text (characters outside CHARS as '?'), as int32 ids into CHARS, and the file count."""
    text, files = corpus_text()
    return encode_chars(text), files


def encode_chars(text):
    lut = np.full(0x110000, CHARS.index("?"), np.int32)
    lut[[ord(c) for c in CHARS]] = np.arange(len(CHARS))
    return lut[np.frombuffer(text.encode("utf-32-le"), np.uint32)]


class Tokens:
    """The text's tokens: characters (CHARS), or a tokenizers.Tokenizer's (--init DIR with a tokenizer.json)."""

    def __init__(self, tokenizer=None):
        self.tokenizer = tokenizer
        self.vocab = len(CHARS) if tokenizer is None else tokenizer.get_vocab_size()

    @classmethod
    def of(cls, directory):
        path = os.path.join(directory, "tokenizer.json") if directory else None
        if path is None or not os.path.exists(path):
            return cls()
        try:
            import tokenizers
        except ImportError:
            raise SystemExit(f"{path}: encoding with it needs the tokenizers package (pip install 'gpublas[hf]')")
        return cls(tokenizers.Tokenizer.from_file(path))

    def encode(self, text):
        if self.tokenizer is None:
            return encode_chars(text)
        return np.array(self.tokenizer.encode(text).ids, np.int32)

    def decode(self, ids):
        if self.tokenizer is None:   # a GPT-2 vocabulary is larger: ids past CHARS print as '?'
            return "".join(CHARS[i] if i < len(CHARS) else "?" for i in ids)
        return self.tokenizer.decode([int(i) for i in ids])


def frequency_loss(train, val, vocab=len(CHARS)):
    """Cross-entropy of predicting val's tokens by train's token frequencies (add-one smoothed)."""
    p = (np.bincount(train, minlength=vocab) + 1.0) / (train.size + vocab)
    return float(-np.log(p[val]).mean())


def windows(rng, data, T, N, rank=0, ranks=1):
    """This rank's share of N random windows (N / ranks, T) and the tokens after each: every rank draws the same
    global batch of N (one generator, one seed) and takes rows rank N / ranks .. (rank + 1) N / ranks, so that
    ranks see different windows and together the batch one process would see."""
    i = rng.integers(0, data.size - T - 1, N)[:, None] + np.arange(T)
    i = i[rank * (N // ranks):(rank + 1) * (N // ranks)]
    return data[i], data[i + 1]


def evaluate(model, crit, data, T, N, batches=4):
    """Mean loss over fixed windows of `data` (the same ones every call), in eval mode."""
    rng = np.random.default_rng(1234)
    model.eval()
    loss = float(np.mean([crit(model(x), y) for x, y in (windows(rng, data, T, N) for _ in range(batches))]))
    model.train()
    return loss


def text_of(ids):
    return "".join(CHARS[i] for i in ids)


def positive(text):
    """argparse type: an int >= 1."""
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


def sample(net, prompt, n, rng, tokens, say):
    """n tokens after prompt with the KV cache, and a line with the tokens/s."""
    start = time.perf_counter()
    ids = net.generate(prompt, n, temperature=0.8, rng=rng)[0]
    seconds = time.perf_counter() - start
    say(f"gpt: sampled {n} tokens in {seconds:.2f} s, {n / seconds:.1f} tokens/s (KV cache)", file=sys.stderr)
    return tokens.decode(ids)


def step_parts(net, opt, precision, state, crit=None, clip=None):
    """A GPT training step as GraphedStep's parts take it: forward_backward(x, y) (the forward under
    precision's autocast, the loss kept on the device in state["loss"], zero_grad, backward) and update(x, y)
    (clip_grad_norm(1.0), the optimizer step); benchmarks/gpt2.py times the same two. A tensor-parallel GPT
    passes its `crit` (vocabulary-parallel) and `clip` (the whole model's norm: clip(max_norm))."""
    crit = nn.CrossEntropyLoss() if crit is None else crit
    clip = (lambda max_norm: nn.clip_grad_norm(opt.params, max_norm, on_device=True)) if clip is None else clip

    def forward_backward(x, y):
        with precision.autocast():
            logits = net(x)                                # (B, T, V)
        state["loss"] = crit(logits, y, on_device=True)
        opt.zero_grad()
        precision.backward(net, crit.backward(), opt)

    def update(x, y):
        clip(1.0)
        precision.step(opt)

    return forward_backward, update


def train(model, net, opt, sched, data, val, args, precision, bar):
    """The training loop; returns the last smoothed train loss, or None when it stopped on a NaN."""
    rng = np.random.default_rng(args.seed)
    state = {}
    forward_backward, update = step_parts(net, opt, precision, state, args.crit(), args.clip)
    step_fn = GraphedStep(training_parts(model, forward_backward, update)) if args.graph else None
    smooth = None
    for step in range(1, args.steps + 1):
        x, y = windows(rng, data, args.block_size, args.batch_size * args.ranks, args.rank, args.ranks)
        x, y = x.astype(np.int32), y.astype(np.int32)
        if step_fn is not None:
            step_fn(x, y)
        else:
            forward_backward(gpublas.to_device(x), gpublas.to_device(y))
            if model is not net:
                model.reduce_gradients(y.size)
            update(None, None)
        sched.step()
        read = step % 10 == 0 or step % args.eval_every == 0 or step == args.steps   # a read-back: not every step
        loss = float(state["loss"].get()[0]) if read else None
        if read and model is not net:   # this rank's share of the batch: the global batch's mean over the data ranks
            loss = model.comm.allreduce(loss) / model.size
        if loss is not None:
            if not math.isfinite(loss):
                print(f"gpt: loss became {loss} at step {step}; stopping (try a smaller --lr)", file=sys.stderr)
                return None
            smooth = loss if smooth is None else 0.7 * smooth + 0.3 * loss
            bar.set_postfix(loss=f"{smooth:.3f}", refresh=False)
        bar.update(1)
        if step % args.eval_every == 0 and step != args.steps and not args.quiet:
            bar.write(f"step {step:4d}  train loss {smooth:.3f}  val loss "
                      f"{evaluate(net, args.crit(), val, args.block_size, args.batch_size * args.ranks):.3f}")
    return smooth


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--steps", type=positive, default=300, help="training steps (batches)")
    p.add_argument("--batch-size", type=int, default=16, help="windows per step (global, over all ranks)")
    p.add_argument("--block-size", type=int, default=64, help="context length T (characters per window)")
    p.add_argument("--n-layer", type=int, default=2, help="transformer blocks")
    p.add_argument("--n-head", type=int, default=4, help="attention heads per block")
    p.add_argument("--n-embd", type=int, default=64, help="embedding width C (a multiple of --n-head)")
    p.add_argument("--lr", type=float, default=3e-3, help="AdamW's peak learning rate (cosine to lr/10)")
    p.add_argument("--eval-every", type=positive, default=100, help="steps between validation-loss lines")
    p.add_argument("--seed", type=int, default=0, help="seeds the weights, the windows and the sample")
    p.add_argument("--save", metavar="PATH", help="write the trained weights (nn.save) to PATH (default: not saved)")
    p.add_argument("--load", metavar="PATH", help="start from the weights in PATH (default: GPT-2's init)")
    p.add_argument("--sample", type=int, nargs="?", const=300, default=None, metavar="CHARS",
                   help="only generate CHARS characters (300 when given bare) from the --load checkpoint, "
                        "no training")
    p.add_argument("--init", metavar="DIR", help="fine-tune the GPT-2 in this transformers directory (config.json, "
                                             "model.safetensors; tokenizer.json: its tokens, else characters)")
    p.add_argument("--export", metavar="DIR", help="write the trained model as a transformers GPT-2 directory")
    p.add_argument("--tensor-parallel", type=positive, default=1, metavar="T",
                   help="split every layer over T ranks (under mpiexec -n T; -n T*D with --distributed)")
    add_quiet_flag(p)
    add_distributed_flag(p)
    add_graph_flag(p)
    add_precision_flag(p)
    args = p.parse_args(argv)
    precision = Precision(args.precision)
    precision.check_graph(args.graph)
    if args.sample is not None and not args.load:
        raise SystemExit("--sample generates from a checkpoint: give it with --load PATH")
    dist, grid = setup_parallel(args, precision)
    ranks = 1 if dist is None else grid.data_size if grid else dist.world_size()

    say = (lambda *a, **k: None) if args.quiet else print   # --quiet: the summary line only
    say(describe_device(), flush=True)
    nn.manual_seed(args.seed)
    tokens = Tokens.of(args.init)
    text, files = corpus_text()
    data = tokens.encode(text)
    split = int(0.9 * data.size)
    train_data, val = data[:split], data[split:]
    if args.init:
        net = nn.models.GPT.from_pretrained(args.init, dtype=np.float32)
        if tokens.vocab > net.vocab_size:
            raise SystemExit(f"--init {args.init}: {tokens.vocab} tokens do not fit its vocabulary of {net.vocab_size}")
        args.block_size = min(args.block_size, net.block_size)
        net = net if grid is None else dist.parallelize(net, grid.tensor)
    else:
        net = nn.models.GPT(len(CHARS), args.block_size, args.n_layer, args.n_head, args.n_embd,
                            tensor_parallel=grid and grid.tensor)
    if args.load:
        nn.load(net, args.load)
    rng = np.random.default_rng(args.seed)
    if args.sample is not None:
        print(sample(whole(net, grid), data[None, :1], args.sample, rng, tokens, say))
        return 0
    args.crit = nn.CrossEntropyLoss if grid is None else (lambda: dist.VocabParallelCrossEntropy(grid.tensor))
    args.clip = None if grid is None else (lambda max_norm: dist.clip_grad_norm(net, max_norm, on_device=True))
    n_params = sum(v.size for v in net.state_dict().values()) if grid else net.num_parameters()
    base = frequency_loss(train_data, val, max(tokens.vocab, int(data.max()) + 1))
    unit = "characters" if tokens.tokenizer is None else "tokens"
    say(f"gpt: {data.size} {unit} of {files} standard-library modules, vocabulary {tokens.vocab}, "
          f"{n_params} parameters; predicting {unit[:-1]} frequencies: val loss {base:.3f}", flush=True)
    model = net if not args.distributed else dist.DataParallel(net, comm=grid and grid.data)
    args.batch_size //= ranks
    args.rank, args.ranks = (0, 1) if dist is None else (grid.data_rank, ranks) if grid else (dist.rank(), ranks)
    opt = net.configure_optimizers(weight_decay=0.1, learning_rate=args.lr, betas=(0.9, 0.95))
    sched = nn.CosineLR(opt, T_max=max(args.steps, 1), eta_min=args.lr / 10)
    from gpublas.runtime import compiler
    pending = nn.prefetch(net, nn.CrossEntropyLoss(), opt)   # every kernel module compiles now, in the background
    if pending and not args.quiet:
        print(f"gpt: compiling {pending} kernel modules (once: they are kept in {compiler.cache_dir()})...",
              file=sys.stderr, flush=True)
    from tqdm import tqdm
    start = time.perf_counter()
    with tqdm(total=args.steps, desc="gpt", unit="step", file=sys.stderr, disable=args.quiet) as bar:
        smooth = train(model, net, opt, sched, train_data, val, args, precision, bar)
    if smooth is None:
        if ranks > 1:
            dist.abort(1)
        return 1
    seconds = time.perf_counter() - start
    val_loss = evaluate(net, args.crit(), val, args.block_size, args.batch_size * args.ranks)   # the global batch
    if args.save and grid is not None:
        dist.save(net, args.save)            # the split model's state gathered on every rank, written by rank 0
    elif args.save and (dist is None or dist.is_main()):
        nn.save(net, args.save)
    net = whole(net, grid)                   # generating and GPT-2's files want the whole model
    if args.export and (dist is None or dist.is_main()):
        net.save_pretrained(args.export)
        if tokens.tokenizer is not None:
            shutil.copyfile(os.path.join(args.init, "tokenizer.json"), os.path.join(args.export, "tokenizer.json"))
    if dist is None or dist.is_main():
        prompt = data[split:split + 16][None, :]
        say("sample:\n" + sample(net, prompt, 200, rng, tokens, say))
    print(f"gpt: val loss {val_loss:.3f} after {args.steps} steps, {seconds:.1f} s (train loss {smooth:.3f}, "
          f"character frequencies {base:.3f})" + ("" if dist is None else f" on {dist.world_size()} ranks")
          + ("" if grid is None else f" (tensor {grid.tensor_size} x data {grid.data_size})")
          + ("" if args.precision == "fp32" else f", {args.precision}"))
    return 0


def setup_parallel(args, precision):
    """(nn.distributed or None, its Grid or None) for --distributed / --tensor-parallel T; with T > 1 every
    rank but 0 prints nothing (as setup_distributed), and a world size T does not divide is a SystemExit."""
    if args.tensor_parallel == 1:
        return setup_distributed(args), None
    if args.graph or args.precision != "fp32":
        raise SystemExit("--tensor-parallel runs eager float32 steps (no --graph, no --precision)")
    import nn.distributed as dist
    try:
        grid = dist.init_grid(tensor=args.tensor_parallel)
    except ValueError as e:
        raise SystemExit(f"--tensor-parallel {args.tensor_parallel}: {e}")
    if grid.data_size > 1 and not args.distributed:
        raise SystemExit(f"mpiexec -n {dist.world_size()} with --tensor-parallel {grid.tensor_size} makes "
                         f"{grid.data_size} replicas: add --distributed (or run -n {grid.tensor_size})")
    if args.batch_size % grid.data_size:
        raise SystemExit(f"--batch-size {args.batch_size} must be a multiple of the {grid.data_size} data ranks")
    if not dist.is_main():
        args.quiet = True
        sys.stdout = open(os.devnull, "w")
    return dist, grid


def whole(net, grid):
    """The one-device GPT: `net`, or a split net gathered (on every rank)."""
    return net if grid is None else net.gathered()


if __name__ == "__main__":
    sys.exit(main())
