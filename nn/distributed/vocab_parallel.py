"""Megatron-LM's vocabulary split: an embedding table and its cross-entropy with the vocabulary's rows divided
among the ranks of a tensor group, so that neither the table nor the (B, T, V) logits is ever whole on a rank.

    rank r of T holds rows lo = r V/T ... hi = (r+1) V/T - 1 of the (V, D) table
    VocabParallelEmbedding   y = sum over ranks of (weight_r[id - lo] where lo <= id < hi, else 0): one lookup
                             of this rank's rows, the others' ids zeroed, then one all-reduce (B*T*D); backward
                             adds dy to this rank's rows only (dy is whole on every rank: no collective)
    VocabParallelCrossEntropy  logits (N, V/T): this rank's columns; the row max all-reduced (MAX), then the
                             sum of exp(x - max) and the label's logit (found on the one rank that holds it, 0
                             elsewhere) all-reduced together (SUM of a (2, N) array); loss = log sum - (x_label -
                             max). Its gradient softmax - onehot is this rank's columns: no collective backward.

A GPT's LM head tied to the table (logits = x wte^T) is then vocabulary-parallel too: each rank's logits are
x wte_r^T, the columns of its rows (nn/distributed/parallelize.py's TensorParallelGPT).

Both are written with gpublas' elementwise and reduction kernels and nn's embedding kernels (the same lookup
and deterministic scatter-add as nn.Embedding); the ids' and labels' range is checked on the host (host
arrays, as nn.Embedding and nn.CrossEntropyLoss check them); int32 ids already on the device are not read back,
and one outside [0, V) gives a zero row here (nn.Embedding's NaN and IndexError need the whole table).
"""
import numpy as np

import gpublas

from .. import kernels as K
from ..layers.embedding import Embedding
from ..loss import SoftmaxCrossEntropy
from .group import as_group
from .tensor_parallel import Sharded, split_size


class VocabParallelEmbedding(Sharded, Embedding):
    """nn.Embedding(num_embeddings, embedding_dim) with its rows divided among the ranks of `group`
    (num_embeddings a multiple of its size): takes ids of the whole vocabulary (...) and returns (..., D)
    whole on every rank. Built whole from nn's generator, as nn.Embedding draws it, then cut; split() turns
    a built nn.Embedding into one in place (nn.distributed.parallelize's "vocab")."""
    shard_axes = {"weight": 0}

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, group=None, *, dtype=np.float32):
        g = as_group(group)
        split_size(int(num_embeddings), g, "VocabParallelEmbedding: num_embeddings")
        super().__init__(num_embeddings, embedding_dim, padding_idx, dtype=dtype)
        self._split(g)

    @classmethod
    def split(cls, embedding, group=None):
        """Turns a built nn.Embedding into this layer in place, keeping this rank's rows; returns it."""
        g = as_group(group)
        split_size(embedding.num_embeddings, g, "Embedding: num_embeddings")
        embedding.__class__ = cls
        embedding._split(g)
        return embedding

    def _split(self, group):
        n = self.num_embeddings // group.size
        self.group, self.vocab_start, self.vocab_end = group, group.rank * n, (group.rank + 1) * n
        self._keep_part("weight")
        pad = self.padding_idx
        self.local_padding = pad - self.vocab_start if pad is not None and self.vocab_start <= pad < self.vocab_end \
            else None

    def extra_repr(self):
        return (super().extra_repr() + f", rows [{self.vocab_start}, {self.vocab_end}) on rank {self.group.rank} of "
                f"{self.group.size}")

    def forward(self, x):
        # x: (...) ids in [0, V); weight: this rank's rows [lo, hi) of the (V, D) table -> y: (..., D) whole
        idx, shape = self._indices(x)
        lo, D = self.vocab_start, self.embedding_dim
        mine = (idx >= lo) & (idx < self.vocab_end)
        local = gpublas.where(mine, idx - lo, 0)            # another rank's id: any row of ours, zeroed below
        y = K.embedding_forward(self.weight.data, local, gpublas.empty((idx.size, D), self.dtype))
        y = self.group.all_reduce(gpublas.where(mine[:, None], y, 0))   # each id's row from the rank holding it
        self.idx, self.shape = gpublas.where(mine, local, -1), shape   # cached: our row of each id, -1: none
        return y.reshape(shape + (D,))

    def backward(self, dy):
        # dy: (..., D) whole (the same on every rank) -> None; adds this rank's rows of dweight
        idx = self._cached("idx")
        dy = self._grad_input(dy, self.shape + (self.embedding_dim,), self.weight.dtype)
        # y[i] = weight[id_i]  =>  dL/dweight[lo + k] = the sum of dy[i] over the i with id_i = lo + k
        # (an index of -1, another rank's id, matches no row)
        K.embedding_backward(dy.reshape(idx.size, self.embedding_dim), idx, self.weight.grad, self.local_padding)
        return None


class VocabParallelCrossEntropy(SoftmaxCrossEntropy):
    """nn.CrossEntropyLoss (the mean over the labels that are not ignore_index) of logits whose last axis is
    split over the ranks of `group`: logits (..., V/T), this rank's columns r V/T ... (r+1) V/T - 1, labels
    (...) ids of the whole vocabulary. Returns the same mean on every rank; backward() returns this rank's
    columns of the gradient. Two all-reduces of (N,) and (2, N) forward, none backward."""

    def __init__(self, group=None, ignore_index=-100):
        super().__init__(ignore_index)
        self.group = as_group(group)

    def extra_repr(self):
        return f"ignore_index={self.ignore_index}, ranks={self.group.size}"

    def forward(self, logits, labels, on_device=False):
        # logits: (..., V/T) this rank's columns; labels: (...) ints in [0, V); loss: scalar; grad: logits' shape
        logits, g = self._input(logits), self.group
        if logits.ndim < 2 or logits.shape[0] < 1:
            raise ValueError(f"{self.describe()}: expected logits (N, V/T) or (N, ..., V/T), got {logits.shape}")
        shape, Vr = logits.shape, logits.shape[-1]
        x = logits if logits.ndim == 2 else logits.reshape(-1, Vr)
        labels, scale = self._labels(labels, shape[:-1], Vr * g.size, x.dtype)
        if scale is None:
            scale = K.xent_scale(labels, self.ignore_index, gpublas.empty((1,), x.dtype))
        m = g.all_reduce(x.max(axis=1), "max")             # (N,): the row max over the whole vocabulary
        z = x - m[:, None]                                 # (N, V/T), <= 0: exp never overflows
        e = gpublas.exp(z)
        kept = labels != self.ignore_index
        # the label's column, on the rank whose range holds it (a one-hot of this rank's columns; none elsewhere;
        # an ignored row's is weighted by 0 below)
        hit = gpublas.arange(Vr, dtype=np.int32)[None, :] == (labels - g.rank * Vr)[:, None]
        # each rank's sum of exps and label logit (minus the max), summed over ranks in one all-reduce
        sums = g.all_reduce(gpublas.stack([e.sum(axis=1), gpublas.where(hit, z, 0).sum(axis=1)]))
        s, zt = sums[0], sums[1]
        w = kept * scale                                   # (N,): 1 / the count on kept rows, 0 on ignored ones
        # loss_n = logsumexp(x_n) - x_n[label] = log s_n - (x_n[label] - m_n); the rows sum to the mean
        total = K.sum_scaled((gpublas.log(s) - zt) * w, gpublas.empty((1,), x.dtype))
        # dL/dx = (softmax(x) - onehot(label)) / count, softmax = e / s: this rank's columns, no collective
        grad = (e / s[:, None] - hit) * w[:, None]
        self.grad = grad.reshape(shape) if len(shape) != 2 else grad   # cached: only the gradient
        return self._value(total, on_device)
