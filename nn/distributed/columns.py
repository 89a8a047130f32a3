"""AlexNet's split (Krizhevsky, Sutskever and Hinton, 2012): a network of `columns` parallel columns,
each layer's kernels divided among them, the columns spread over the ranks of a Group (columns / T each).

A layer reads, per column, one of:
    "input"  the whole input, the same on every rank (the first layer, on the images): no collective
             forward; backward all-reduces dx (each rank's columns add their part of it).
    "own"    only its own column's maps of the layer before (AlexNet's conv2, conv4, conv5): no
             collective either way. On one device this is a grouped convolution (PyTorch's
             Conv2d(groups=columns)), and that is the layout of its weight: (out, in / columns, kh, kw).
    "all"    every column's maps (AlexNet's conv3 and the dense layers): forward all-gathers the ranks'
             maps along the channel (feature) axis; backward reduce-scatters dx, its adjoint.
and gives its own columns' maps, or with gather_output=True every column's (the logits at the end).

Each rank holds its columns' rows of the whole weight (out_channels are ordered column by column), drawn
from nn's generator whole as the one-device layer draws them: with nn.manual_seed alike on every rank,
the split network starts equal to the same network on one rank, and state_dict() (collective) gives the
one-device names and shapes. A rank's maps are its columns' maps side by side along the channel axis,
so the ranks' maps gathered in rank order are the one-device maps."""
import math

import numpy as np

import gpublas

from .. import init
from ..layers.conv import Conv2d, pair
from ..layers.dense import Dense
from ..module import Module, Parameter
from .group import as_group
from .tensor_parallel import Sharded, part, split_size

READS = ("input", "own", "all")


class _ColumnLayer(Sharded, Module):
    """A layer of `columns` columns, this rank's columns run by plain nn layers (`self.pieces`, not
    registered: their parameters are views of this layer's weight and bias)."""
    shard_axes = {"weight": 0, "bias": 0}
    axis, ndim = 1, 4   # the channel axis of the maps, which are NCHW (ColumnDense: the last, any ndim)

    def __init__(self, in_features, out_features, weight_tail, fan_in_tail, bias, columns, reads, gather_output,
                 group, dtype, make_piece, gain=1.0):
        super().__init__()
        g = as_group(group)
        if reads not in READS:
            raise ValueError(f"{type(self).__name__}: reads={reads!r}; expected one of {READS}")
        local_columns = split_size(int(columns), g, f"{type(self).__name__}: columns")
        per_out = _per_column(out_features, columns, f"{type(self).__name__}: out features")
        per_in = _per_column(in_features, columns, f"{type(self).__name__}: in features") if reads == "own" \
            else int(in_features)
        self.group, self.columns, self.reads, self.gather_output = g, int(columns), reads, bool(gather_output)
        self.in_features, self.out_features, self.per_in, self.per_out = int(in_features), int(out_features), per_in, per_out
        # the whole layer drawn as the one-device layer draws it: PyTorch's init (fan-in of one column), the
        # weights' bound times `gain` (sqrt(6): He et al.'s for ReLU layers, without which AlexNet's eight
        # layers pass on too small a signal to learn from)
        bound = 1.0 / math.sqrt(per_in * fan_in_tail)
        self.weight = Parameter(part(init.uniform((out_features, per_in) + weight_tail, gain * bound), 0, g).astype(dtype))
        self.bias = Parameter(part(init.uniform((out_features,), bound), 0, g).astype(dtype)) if bias else None
        with init.fork_rng():  # the pieces' own init is discarded: they train this layer's weight
            # "own": a piece per column, each on its own maps; otherwise one piece for every local column
            n = local_columns if reads == "own" else 1
            pieces = [make_piece(per_in, per_out * local_columns // n) for _ in range(n)]
        object.__setattr__(self, "pieces", pieces)

    def _bind(self):
        """Points each piece's parameters at its rows of this layer's (they may have been replaced since:
        Module.to, load_state_dict)."""
        rows = self.weight.shape[0] // len(self.pieces)
        for i, piece in enumerate(self.pieces):
            piece.weight = Parameter.part_of(self.weight, slice(i * rows, (i + 1) * rows))
            piece.bias = None if self.bias is None else Parameter.part_of(self.bias, slice(i * rows, (i + 1) * rows))

    def _split(self, a, n):
        """a's n equal parts along the channel axis, each contiguous."""
        step = a.shape[self.axis] // n
        index = [slice(None)] * a.ndim
        out = []
        for i in range(n):
            index[self.axis] = slice(i * step, (i + 1) * step)
            out.append(gpublas.ascontiguousarray(a[tuple(index)]))
        return out

    def forward(self, x):
        # x: this rank's columns' maps (N, C / T, ...) ("own", "all"), or the whole input (N, C, ...) ("input")
        self._bind()
        x = self._input(x)
        if self.ndim is not None and x.ndim != self.ndim:
            raise ValueError(f"{self.describe()}: expected input (N, C, H, W), got {x.shape}")
        if self.reads == "all":
            x = self.group.all_gather(x, axis=self.axis)
        if len(self.pieces) == 1:
            y = self.pieces[0](x)
        else:
            y = gpublas.concatenate([p(xi) for p, xi in zip(self.pieces, self._split(x, len(self.pieces)))], axis=self.axis)
        # y: this rank's columns' maps (N, C_out / T, ...), or every column's with gather_output
        return self.group.all_gather(y, axis=self.axis) if self.gather_output else y

    def backward(self, dy):
        if self.gather_output:
            dy = gpublas.ascontiguousarray(part(dy, self.axis, self.group))
        if len(self.pieces) == 1:
            dx = self.pieces[0].backward(dy)
        else:
            dx = gpublas.concatenate([p.backward(d) for p, d in zip(self.pieces, self._split(dy, len(self.pieces)))],
                                     axis=self.axis)
        if self.reads == "all":
            return self.group.reduce_scatter(dx, axis=self.axis)      # sum over ranks, this rank's channels
        if self.reads == "input":
            return self.group.all_reduce(gpublas.ascontiguousarray(dx))
        return dx

    def extra_repr(self):
        return (f"{self.in_features}, {self.out_features}, columns={self.columns} ({self.columns // self.group.size} "
                f"on each of {self.group.size} ranks), reads={self.reads!r}, gather_output={self.gather_output}")


def _per_column(n, columns, what):
    if int(n) % int(columns):
        raise ValueError(f"{what}={n} do not divide among {columns} columns")
    return int(n) // int(columns)


class ColumnConv2d(_ColumnLayer):
    """Conv2d(in_channels, out_channels, kernel_size, ...) of `columns` columns (see the module's text for
    `reads`); NCHW maps; `gain` scales the bound of the weights' uniform init. One device's twin: torch.nn.Conv2d(..., groups=columns) for reads="own", a plain
    Conv2d otherwise."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True, *, columns=2,
                 reads="own", gather_output=False, activation=None, group=None, dtype=np.float32, gain=1.0):
        kh, kw = pair(kernel_size, "kernel_size")
        super().__init__(in_channels, out_channels, (kh, kw), kh * kw, bias, columns, reads, gather_output, group,
                         dtype, lambda i, o: Conv2d(i, o, (kh, kw), stride, padding, bias, activation=activation,
                                                    dtype=dtype), gain)


class ColumnDense(_ColumnLayer):
    """Dense(in_features, out_features) of `columns` columns on (..., features) (see the module's text)."""
    axis, ndim = -1, None

    def __init__(self, in_features, out_features, bias=True, *, columns=2, reads="all", gather_output=False,
                 activation=None, group=None, dtype=np.float32, gain=1.0):
        super().__init__(in_features, out_features, (), 1, bias, columns, reads, gather_output, group, dtype,
                         lambda i, o: Dense(i, o, bias, activation=activation, dtype=dtype), gain)
