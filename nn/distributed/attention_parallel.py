"""Megatron-LM's attention split: the heads divided among the ranks of a tensor group.

    rank r of T holds heads r H/T ... (r+1) H/T - 1 of H:
      in_proj_weight (3E, E)   the q, k and v rows of its heads: (3 E/T, E)     column-parallel by head
      in_proj_bias (3E,)       the same rows                       (3 E/T,)
      out_proj (E, E)          RowParallelDense: columns r E/T ...  (E, E/T), its bias whole
    forward   x (whole) -> q, k, v of its heads -> fused attention on them -> out_proj's partial product,
              all-reduced (the one collective forward)
    backward  dy (whole) -> out_proj (no collective) -> attention -> dx of its heads' projections, all-reduced
              (the one collective backward)

nn's MultiheadAttention runs unchanged on the local heads (its projections, head split, fused kernels and
merge work on num_heads * head_dim, here E / T); this class adds the two collectives, the split state_dict
(the whole model's in_proj_weight gathered by q, k and v blocks) and the dropout seeds of the parallel region.

Dropout as Megatron's RNG tracker draws it: where an activation is whole on every rank (the embeddings, the
residual branches after a row-parallel layer) the ranks draw the same mask (every rank's seed comes from nn's
generator in the same state); inside the parallel region (the attention probabilities of a rank's heads, the
feed-forward's hidden units) each rank draws its own: own_draws() moves those seeds by the tensor rank (rank 0
keeps its seed, so T = 1 is the one-device model to the bit).
"""
import numpy as np

import gpublas

from ..layers.multihead import MultiheadAttention
from ..module import Parameter
from .group import as_group
from .tensor_parallel import RowParallelDense, Sharded, part, split_size

_TENSOR_SEED_STRIDE = 0xD1B54A32D192ED03   # apart from DataParallel's per-rank stride (comm._SEED_STRIDE)
_PACKED = ("in_proj_weight", "in_proj_bias")  # q, k and v blocks, each split by head


def own_draws(module, group):
    """Gives each rank of `group` its own dropout seed in `module` (a Dropout, a layer's attention) and the
    device-drawing layers under it: seed ^ (tensor rank x stride); rank 0's is unchanged."""
    for m in module.modules():
        if hasattr(m, "seed") and hasattr(m, "counter"):   # nn's DeviceDraw layers
            m.seed = (m.seed ^ (group.rank * _TENSOR_SEED_STRIDE)) % 2 ** 63


def _blocks(a):
    """(3n, ...) as (3, n, ...): the q, k and v blocks of a packed projection."""
    return a.reshape((3, a.shape[0] // 3) + a.shape[1:])


class ParallelMultiheadAttention(Sharded, MultiheadAttention):
    """MultiheadAttention with its heads divided among the ranks of `group` (num_heads a multiple of the
    group's size). Made from a built MultiheadAttention by split() (nn.distributed.parallelize's "heads"),
    which keeps this rank's part of its weights; takes and returns what MultiheadAttention does, whole on every
    rank. need_weights all-gathers the heads' weights (an extra collective, only when asked)."""
    shard_axes = {"in_proj_weight": 0, "in_proj_bias": 0, "q_proj_weight": 0, "k_proj_weight": 0,
                  "v_proj_weight": 0}

    @classmethod
    def split(cls, mha, group=None):
        """Turns a built MultiheadAttention into this layer in place; returns it."""
        if mha.bias_k is not None or mha.add_zero_attn:
            raise NotImplementedError(f"{mha.describe()}: add_bias_kv and add_zero_attn are not split over a tensor "
                                      "group; build the layer without them for tensor parallelism")
        g = as_group(group)
        local = split_size(mha.num_heads, g, "MultiheadAttention: num_heads")
        mha.__class__ = cls
        mha.group, mha.full_num_heads, mha.num_heads = g, mha.num_heads, local
        for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias"):
            p = getattr(mha, name, None)
            if p is not None:
                setattr(mha, name, Parameter(mha._local_state(name, p.data.get())))
        RowParallelDense.split(mha.out_proj, g)
        own_draws(mha, g)   # the attention probabilities of this rank's heads: a mask of its own
        return mha

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.full_num_heads} ({self.num_heads} on each of "
                f"{self.group.size} ranks), dropout={self.dropout}")

    # the whole model's state: in_proj's q, k and v blocks each gathered along the heads
    def _full_state(self, name, host):
        if name in _PACKED:
            return self.group.all_gather_host(_blocks(host), 1).reshape((-1,) + host.shape[1:])
        return super()._full_state(name, host)

    def _local_state(self, name, full):
        if name in _PACKED:
            full = np.asarray(full)
            return np.ascontiguousarray(part(_blocks(full), 1, self.group)).reshape((-1,) + full.shape[1:])
        return super()._local_state(name, full)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        # query, key, value: whole, MultiheadAttention's layouts -> (y whole, weights (B, H, Tq, Tk) gathered or None)
        attn_mask = self._local_mask(attn_mask, query)
        y, w = super().forward(query, key, value, key_padding_mask, need_weights, attn_mask, False, is_causal)
        if w is not None:   # (B, H/T, Tq, Tk) (unbatched (H/T, Tq, Tk)): every head's, in head order
            w = self.group.all_gather(w, axis=-3)
            w = w.mean(axis=-3) if average_attn_weights else w
        return y, w

    def _local_mask(self, mask, query):
        """A per-head attn_mask (B * H, Tq, Tk) cut to this rank's heads; any other mask as given."""
        shape = getattr(mask, "shape", None)
        if shape is None or len(shape) != 3 or shape[0] % self.full_num_heads:
            return mask
        B, H, h0 = shape[0] // self.full_num_heads, self.num_heads, self.group.rank * self.num_heads
        rows = mask.reshape((B, self.full_num_heads) + tuple(shape[1:]))[:, h0:h0 + H]
        ascontiguous = gpublas.ascontiguousarray if isinstance(mask, gpublas.DeviceArray) else np.ascontiguousarray
        return ascontiguous(rows).reshape((B * H,) + tuple(shape[1:]))

    def backward(self, dy):
        # dy: y's shape (whole) -> the inputs' gradients, each the sum over ranks of its heads' projections'
        grads = super().backward(dy)
        if isinstance(grads, tuple):
            return tuple(self.group.all_reduce(gpublas.ascontiguousarray(g)) for g in grads)
        return self.group.all_reduce(gpublas.ascontiguousarray(grads))
