"""Tensor parallelism (Megatron-LM's split of a layer over the ranks of a Group): ColumnParallelDense and
RowParallelDense, with their hand-written backward and one collective per operator.

    ColumnParallelDense(in, out)      rank r holds rows r*out/T ... of W (out, in) and the same part of b:
                                      forward  y_r = x W_r^T + b_r              (x whole on every rank; no collective)
                                      backward dx = sum_r dy_r W_r              (one all-reduce)
    RowParallelDense(in, out)         rank r holds columns r*in/T ... of W, and all of b:
                                      forward  y = sum_r x_r W_r^T, then + b    (one all-reduce, the bias once)
                                      backward dx_r = dy W_r                    (no collective)

A column-parallel layer then a row-parallel one (the transformer's MLP, attention's projections) passes
only the parts between them: two all-reduces per pair, one forward and one backward.

Every rank of the group builds the layer from nn's generator in the same state (nn.manual_seed alike):
the whole layer's weights are drawn as Dense draws them and each rank keeps its part, so a split model
starts as the one-device model does. state_dict() gathers the parts into the whole model's names and
shapes (collective: every rank of the group calls it) and load_state_dict() takes the whole and keeps
this rank's part, so a checkpoint moves between T = 1 and T = 2."""
import numpy as np

import gpublas

from .. import kernels as K
from ..layers.dense import Dense
from ..module import Parameter
from .group import as_group


def split_size(n, group, what):
    """n / group.size, or a ValueError naming `what` when the ranks cannot share n equally."""
    if n % group.size:
        raise ValueError(f"{what}={n} does not split over the {group.size} ranks of the tensor group "
                         f"(it must be a multiple of {group.size})")
    return n // group.size


def part(a, axis, group):
    """This rank's part of host or device array `a` along `axis` (equal parts in rank order), a view."""
    n = a.shape[axis] // group.size
    index = [slice(None)] * a.ndim
    index[axis] = slice(group.rank * n, (group.rank + 1) * n)
    return a[tuple(index)]


class Sharded:
    """Mixin for a Module split over `self.group`: `shard_axes` names the entries that are split and the
    axis each is split along; the others are whole (replicated) on every rank."""
    shard_axes = {}

    def _full_state(self, name, host):
        axis = self.shard_axes.get(name)
        return host if axis is None else self.group.all_gather_host(host, axis)

    def _full_shape(self, name, shape):
        shape = list(shape)
        if name in self.shard_axes:
            shape[self.shard_axes[name]] *= self.group.size
        return tuple(shape)

    def _local_state(self, name, full):
        axis = self.shard_axes.get(name)
        return full if axis is None else part(np.asarray(full), axis, self.group)

    def _keep_part(self, name):
        """Replaces parameter `name` (drawn whole) by this rank's part of it."""
        p = getattr(self, name)
        if p is not None and name in self.shard_axes:
            setattr(self, name, Parameter(part(p.data.get(), self.shard_axes[name], self.group)))


class ColumnParallelDense(Sharded, Dense):
    """Dense(in_features, out_features) with its output features split over the ranks of `group` (a
    Group, Grid or communicator; default every rank). Takes the whole input (..., in_features); returns
    this rank's part (..., out_features / T), or the whole output with gather_output=True (an all-gather
    forward; backward then takes this rank's part of dy, no collective). An activation is applied to
    each part (elementwise, so as to the whole)."""
    shard_axes = {"weight": 0, "bias": 0}

    def __init__(self, in_features, out_features, bias=True, gather_output=False, group=None, *,
                 activation=None, dtype=np.float32):
        g = as_group(group)
        split_size(int(out_features), g, "ColumnParallelDense: out_features")
        super().__init__(in_features, out_features, bias, activation=activation, dtype=dtype)
        self._split(g, gather_output)

    @classmethod
    def split(cls, dense, group=None, gather_output=False):
        """Turns a built Dense into this layer in place (its class and parameters), keeping this rank's part
        of its weights (nn.distributed.parallelize's "colwise"); returns it."""
        g = as_group(group)
        split_size(dense.out_features, g, "ColumnParallelDense: out_features")
        dense.__class__ = cls
        dense._split(g, gather_output)
        return dense

    def _split(self, group, gather_output):
        self.group, self.gather_output = group, bool(gather_output)
        self._keep_part("weight")
        self._keep_part("bias")
        self.full_out_features, self.out_features = self.out_features, self.out_features // group.size

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.full_out_features} ({self.out_features} on "
                f"each of {self.group.size} ranks), bias={self.bias is not None}, gather_output={self.gather_output}"
                + (f", activation={self.activation!r}" if self.activation else ""))

    def forward(self, x):
        # x: (..., in) whole -> y: (..., out / T), or (..., out) gathered
        y = super().forward(x)
        return self.group.all_gather(y, axis=-1) if self.gather_output else y

    def backward(self, dy):
        # dy: (..., out / T), or (..., out) when gathered -> dx: (..., in), summed over the ranks
        if self.gather_output:
            dy = gpublas.ascontiguousarray(part(dy, dy.ndim - 1, self.group))
        return self.group.all_reduce(gpublas.ascontiguousarray(super().backward(dy)))


class RowParallelDense(Sharded, Dense):
    """Dense(in_features, out_features) with its input features split over the ranks of `group`. Takes
    this rank's part of the input (..., in_features / T) (input_is_parallel=True, the output of a
    ColumnParallelDense), or the whole input, of which it keeps its part (input_is_parallel=False;
    backward then all-gathers dx). Returns the whole output on every rank: the ranks' partial products
    all-reduced, then the bias (whole on every rank) added once."""
    shard_axes = {"weight": 1}
    _fused_bias = False

    def __init__(self, in_features, out_features, bias=True, input_is_parallel=True, group=None, *,
                 dtype=np.float32):
        g = as_group(group)
        split_size(int(in_features), g, "RowParallelDense: in_features")
        super().__init__(in_features, out_features, bias, dtype=dtype)
        self._split(g, input_is_parallel)

    @classmethod
    def split(cls, dense, group=None, input_is_parallel=True):
        """Turns a built Dense (no activation: it would act on the partial sums) into this layer in place,
        keeping this rank's columns of its weight ("rowwise"); returns it."""
        g = as_group(group)
        split_size(dense.in_features, g, "RowParallelDense: in_features")
        if dense.activation:
            raise ValueError(f"RowParallelDense.split: {dense.describe()} has an activation, which does not "
                             "commute with the sum over ranks")
        dense.__class__ = cls
        dense._split(g, input_is_parallel)
        return dense

    def _split(self, group, input_is_parallel):
        self.group, self.input_is_parallel = group, bool(input_is_parallel)
        self._keep_part("weight")
        self.full_in_features, self.in_features = self.in_features, self.in_features // group.size

    def extra_repr(self):
        return (f"in_features={self.full_in_features} ({self.in_features} on each of {self.group.size} ranks), "
                f"out_features={self.out_features}, bias={self.bias is not None}, "
                f"input_is_parallel={self.input_is_parallel}")

    def forward(self, x):
        # x: (..., in / T), or (..., in) whole -> y: (..., out) whole
        if not self.input_is_parallel:
            x = self._input(x)
            if x.shape[-1] != self.full_in_features:
                raise ValueError(f"{self.describe()}: expected input (..., {self.full_in_features}), got {x.shape}")
            x = gpublas.ascontiguousarray(part(x, x.ndim - 1, self.group))
        y = self.group.all_reduce(gpublas.ascontiguousarray(super().forward(x)))
        if self.bias is not None:
            b = self.bias.data if self.bias.dtype == y.dtype else self.bias.data.astype(y.dtype)
            K.bias_act_forward(y, b, y, self.out_features, 1, K.act_code(None))
        return y

    def backward(self, dy):
        # dy: (..., out) whole -> dx: (..., in / T), or (..., in) gathered; adds dW (out, in / T), db (out,)
        if self.bias is not None:
            flat = self._grad_input(dy, self.lead + (self.out_features,), self.x.dtype)
            # y = sum_r x_r W_r^T + b  =>  dL/db = sum over the batch of dy (the same on every rank)
            K.bias_grad_sum(flat.reshape(-1, self.out_features), self.bias.grad, self.out_features, 1)
        dx = super().backward(dy)
        return dx if self.input_is_parallel else self.group.all_gather(dx, axis=-1)


def split_parameters(model):
    """(split, whole): `model`'s Parameters of which a rank holds a part, and those it holds whole."""
    split, whole = [], []
    for _, v, m, local in model._named_state(owners=True):
        if isinstance(v, Parameter):
            (split if isinstance(m, Sharded) and local in m.shard_axes else whole).append(v)
    return split, whole


def clip_grad_norm(model, max_norm, on_device=False):
    """nn.clip_grad_norm for a model split over a tensor group (model: the Module, not a list: it says which
    parameters are split): the L2 norm of the whole model's gradient, each split parameter's sum of squares
    summed over the ranks (one all-reduce of the slots) and each whole one counted once (it is the same on
    every rank), so that every rank scales its gradients by the one-device coefficient. Returns the norm as
    nn.clip_grad_norm does. A model of one dtype (float32 or float64) only."""
    groups = _groups(model)
    if len(groups) > 1:
        raise ValueError(f"clip_grad_norm: {type(model).__name__} is split over {len(groups)} groups; one expected")
    split, whole = split_parameters(model)
    params = split + whole
    dtype = params[0].dtype
    if dtype not in (np.float32, np.float64) or any(p.dtype != dtype for p in params):
        raise TypeError(f"clip_grad_norm: parameters of one dtype, float32 or float64, wanted; got "
                        f"{sorted({str(p.dtype) for p in params})}")
    sums = gpublas.empty((len(params),), dtype)
    for i, p in enumerate(params):
        K.sumsq(p.grad, sums, i)
    if groups and split:
        groups[0].all_reduce(sums[:len(split)])       # slot i: the whole parameter's sum of squares
    clip = gpublas.empty((2,), np.float64)
    K.clip_coef(sums if dtype == np.float32 else None, sums if dtype == np.float64 else None, float(max_norm), clip)
    for p in params:
        K.clip_scale(p.grad, clip)
    return clip[0:1] if on_device else float(clip.get()[0])


def collective_stats(model):
    """The sum of `stats` over the distinct Groups of `model`'s parallel layers: {"collectives", "bytes",
    "seconds"}; reset_collective_stats(model) starts a new count (e.g. at each step)."""
    total = {"collectives": 0, "bytes": 0, "seconds": 0.0}
    for g in _groups(model):
        for k in total:
            total[k] += g.stats[k]
    return total


def reset_collective_stats(model):
    for g in _groups(model):
        g.reset_stats()


def _groups(model):
    seen = {}
    for m in model.modules():
        g = getattr(m, "group", None)
        if g is not None and hasattr(g, "stats"):
            seen[id(g)] = g
    return list(seen.values())
