"""parallelize(model, group): a built model split over the ranks of a tensor group in place, each rank keeping
its part of the weights the model already holds (PyTorch's torch.distributed.tensor.parallel.parallelize_module
with a plan keyed by the submodules' names; Megatron-LM's split of the transformer).

    nn.manual_seed(0)
    model = nn.models.GPT(vocab_size=96, block_size=64, n_layer=2, n_head=4, n_embd=64)   # whole, on every rank
    dist.parallelize(model, grid.tensor)     # or GPT(..., tensor_parallel=grid.tensor)
    logits, loss = model(x, y)               # logits: this rank's V/T columns; loss: the whole vocabulary's

Styles (the values of a plan):
    "colwise"  Dense -> ColumnParallelDense (output features split; dx all-reduced backward)
    "rowwise"  Dense -> RowParallelDense (input features split; y all-reduced forward)
    "heads"    MultiheadAttention -> ParallelMultiheadAttention (heads split: q, k, v rows column-parallel,
               out_proj row-parallel; own dropout masks per rank)
    "own_rng"  a dropout inside the parallel region: each rank draws its own mask
    "gpt"      GPT -> TensorParallelGPT: wte vocabulary-parallel (VocabParallelEmbedding), the tied LM head
               with it, the loss VocabParallelCrossEntropy
default_plan(model) is the default: every MultiheadAttention "heads", every transformer layer's linear1 "colwise",
its dropout "own_rng" and linear2 "rowwise", a GPT "gpt"; LayerNorms, position embeddings and the residual
dropouts stay whole (the same on every rank). With nn.manual_seed alike on every rank the split model computes
what the one-device model computes; state_dict() gathers to its names and shapes.

A module changes class in place (as torch.distributed.fsdp's fully_shard does), so its place in its parent,
its names and the draws of nn's generator are those of the built model. Four all-reduces of (B, T, E) per
transformer block and step: the two row-parallel outputs forward, the two column-parallel inputs' gradients
backward; a GPT adds one forward (the embedding) and one backward (the head's dx), and the loss two small ones.
"""
import numpy as np

from .. import init
from ..layers.dense import Dense
from ..layers.dropout import Dropout
from ..layers.embedding import Embedding
from ..layers.multihead import MultiheadAttention
from ..layers.transformer import TransformerDecoderLayer, TransformerEncoderLayer
from ..models import gpt as _gpt
from ..models.gpt import GPT
from .attention_parallel import ParallelMultiheadAttention, own_draws
from .group import as_group
from .tensor_parallel import ColumnParallelDense, RowParallelDense
from .vocab_parallel import VocabParallelCrossEntropy, VocabParallelEmbedding


class TensorParallelGPT(GPT):
    """A GPT split over the ranks of `group` (made by parallelize or GPT(..., tensor_parallel=group)):
    forward(idx, targets) returns this rank's logits (B, T, V/T) (columns r V/T ...) and the whole vocabulary's
    mean loss (VocabParallelCrossEntropy); backward as GPT's. Its state_dict is the one-device GPT's
    (collective); gathered() is that GPT on every rank, which generates and writes GPT-2's files."""

    @classmethod
    def split(cls, model, group=None):
        """Turns a built GPT into this in place: wte vocabulary-parallel, and with it the tied head."""
        g = as_group(group)
        VocabParallelEmbedding.split(model.wte, g)
        model.__class__ = cls
        model.group = g
        return model

    def extra_repr(self):
        return super().extra_repr() + f", tensor_parallel={self.group.size}"

    def _head_backward(self, d2, x2):
        # logits_r = x wte_r^T on each rank  =>  dL/dx = the sum over ranks of dlogits_r wte_r: one all-reduce
        return self.group.all_reduce(super()._head_backward(d2, x2))

    def _criterion(self):
        return VocabParallelCrossEntropy(self.group, ignore_index=-1)

    def gathered(self):
        """The one-device GPT with this model's weights, on every rank (a collective: each rank calls it). nn's
        generator is left as it was (the whole model's draws are overwritten)."""
        state = self.state_dict()
        rng = init.generator().bit_generator
        saved = rng.state
        try:
            whole = GPT(self.vocab_size, self.block_size, self.n_layer, self.n_head, self.n_embd, self.drop.p,
                        self.ln_f.bias is not None, dtype=self.dtype)
        finally:
            rng.state = saved
        return whole.load_state_dict(state)

    def _whole_only(self, what):
        raise NotImplementedError(f"{self.describe()}: {what} needs the whole model: use model.gathered() (the "
                                  "one-device GPT, on every rank)")

    def generate(self, *args, **kwargs):
        self._whole_only("generate")

    def save_pretrained(self, *args, **kwargs):
        self._whole_only("save_pretrained")

    def save_llmc(self, *args, **kwargs):
        self._whole_only("save_llmc")

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        raise NotImplementedError("TensorParallelGPT.from_pretrained: load with nn.models.GPT.from_pretrained, "
                                  "then dist.parallelize(model, group)")

    from_llmc = from_pretrained


def _own_rng(module, group):
    if not isinstance(module, Dropout):
        raise TypeError(f"parallelize: style 'own_rng' takes a Dropout, got {module.describe()}")
    own_draws(module, group)
    return module


STYLES = {"colwise": (Dense, ColumnParallelDense.split), "rowwise": (Dense, RowParallelDense.split),
          "heads": (MultiheadAttention, ParallelMultiheadAttention.split),
          "vocab": (Embedding, VocabParallelEmbedding.split), "own_rng": (Dropout, _own_rng),
          "gpt": (GPT, TensorParallelGPT.split)}
_DONE = (ColumnParallelDense, RowParallelDense, ParallelMultiheadAttention, VocabParallelEmbedding,
         TensorParallelGPT)


def default_plan(model):
    """{submodule name: style}: Megatron-LM's split of every transformer layer and GPT in `model`."""
    out = {}
    for name, m in model.named_modules():
        at = f"{name}." if name else ""
        if isinstance(m, _DONE):
            raise ValueError(f"parallelize: {name or 'the model'} ({type(m).__name__}) is split already")
        if isinstance(m, GPT):
            out[name] = "gpt"
        elif isinstance(m, MultiheadAttention):
            out[name] = "heads"
        elif isinstance(m, (TransformerEncoderLayer, TransformerDecoderLayer)):
            out.update({f"{at}linear1": "colwise", f"{at}dropout": "own_rng", f"{at}linear2": "rowwise"})
    return out


def _submodule(model, name):
    m = model
    for part in name.split(".") if name else ():
        if part not in m._modules:
            raise KeyError(f"parallelize: {type(model).__name__} has no submodule '{name}'")
        m = m._modules[part]
    return m


def _check_same_layout(model, group):
    """The same parameter names and shapes on every rank of the group, else ValueError on every rank."""
    layout = [(name, p.shape, str(p.dtype)) for name, p in model.named_parameters()]
    every = group.comm.allgather(layout)
    bad = [r for r, other in enumerate(every) if other != layout]
    if bad:
        mine = dict((n, s) for n, s, _ in layout)
        diff = [(n, mine.get(n), s) for n, s, _ in every[bad[0]] if mine.get(n) != s][:3]
        raise ValueError(f"parallelize: the ranks of the tensor group built different models: rank {group.rank} "
                         f"and rank(s) {bad} differ in {diff or 'their parameters'} (name, here, there); every rank "
                         "must build the same model")


def parallelize_module(model, group=None, parallelize_plan=None):
    """Splits `model`'s submodules named in `parallelize_plan` ({name: style}, "" the model itself; None:
    default_plan(model)) over the ranks of `group` (a Group, Grid or communicator), in place; returns the model.
    Sizes that do not divide by the group's size raise ValueError on every rank (each has the same model)."""
    g = as_group(group)
    todo = default_plan(model) if parallelize_plan is None else dict(parallelize_plan)
    unknown = {s for s in todo.values() if s not in STYLES}
    if unknown:
        raise ValueError(f"parallelize: unknown style(s) {sorted(unknown)}; the styles are {list(STYLES)}")
    mods = {name: _submodule(model, name) for name in todo}
    for name, style in todo.items():
        kind = STYLES[style][0]
        if not isinstance(mods[name], kind) or isinstance(mods[name], _DONE):
            raise TypeError(f"parallelize: style '{style}' takes an unsplit {kind.__name__}; "
                            f"'{name}' is {type(mods[name]).__name__}")
    _check_same_layout(model, g)
    for name, style in todo.items():
        STYLES[style][1](mods[name], g)
    return model


def parallelize(model, group=None):
    """parallelize_module(model, group, default_plan(model)): Megatron-LM's split of the model's transformer layers and
    GPT; returns the model, split in place."""
    return parallelize_module(model, group, None)


def megatron_collectives(n_layer, tokens, n_embd, itemsize=np.dtype(np.float64).itemsize, gpt=True, clipped=0):
    """What a step of a split GPT (gpt=True) or of n_layer transformer layers sends in all-reduces, per rank:
    {"forward": (count, bytes), "backward": (count, bytes)} for `tokens` = B * T rows of n_embd. Megatron-LM's
    count: per layer two all-reduces of (B, T, E) forward and two backward; a GPT's embedding (forward) and
    head (backward) one each, and the loss an (N,) MAX and a (2, N) SUM. clipped > 0 adds "clip":
    clip_grad_norm's all-reduce of one sum of squares per split parameter (that many)."""
    act = tokens * n_embd * itemsize
    fwd, bwd = (2 * n_layer, 2 * n_layer * act), (2 * n_layer, 2 * n_layer * act)
    if gpt:
        fwd = (fwd[0] + 3, fwd[1] + act + 3 * tokens * itemsize)
        bwd = (bwd[0] + 1, bwd[1] + act)
    out = {"forward": fwd, "backward": bwd}
    if clipped:
        out["clip"] = (1, clipped * itemsize)
    return out


_gpt.parallelize = parallelize   # GPT(..., tensor_parallel=group) reaches it so; nn's core never imports this
