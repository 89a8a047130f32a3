"""--graph for the examples: a training step captured once per batch shape with gpublas.graph and
replayed, so a step costs the host one call per captured part instead of one per launch.

A step is a list of parts, each a function of the batch's static device arrays (x, y), run in
order; a part marked eager always runs in Python (MPI's all-reduce with --distributed, which a graph
cannot hold), the others are captured. The first call for a batch shape runs every part eagerly
(it compiles the kernels and fills the memory pool; a graph cannot compile), the second captures
each captured part into its own Graph, and every call replays them. Everything that changes from
step to step lives in device memory (the learning rate, the optimizer's step count, dropout's
counter, the running loss), so replays give what eager steps give, bit for bit.
"""
import numpy as np

import gpublas


def add_graph_flag(parser):
    parser.add_argument("--graph", action="store_true",
                        help="capture the training step once per batch shape (gpublas.graph) and replay it: "
                             "the same results as eager steps, less host time per step")


def training_parts(model, forward_backward, update):
    """GraphedStep's parts for a training step written as forward_backward(x, y) (loss, zero_grad and the
    bare module's backward) and update(x, y) (clipping, the optimizer): both captured together, or with
    a DataParallel model captured apart, around the eager buffer broadcast before forward and the
    gradient all-reduce after backward (weighted by the len(y) rows of the loss, as its backward does)."""
    if getattr(model, "module", model) is model:
        return [(True, lambda x, y: (forward_backward(x, y), update(x, y)))]
    return [(False, lambda x, y: model.broadcast_buffers() if model.size > 1 else None), (True, forward_backward),
            (False, lambda x, y: model.reduce_gradients(len(y))), (True, update)]


class GraphedStep:
    """Calls `parts` [(captured, fn(x, y))] on a batch given as host arrays (copied into static device
    arrays, one pair per shape), eagerly the first time for a shape, then as replayed graphs."""

    def __init__(self, parts):
        if not hasattr(gpublas, "graph"):
            raise SystemExit("--graph needs gpublas.graph, which this gpublas does not have")
        self.parts = list(parts)
        self.slots = {}   # (x shape, x dtype, y shape, y dtype) -> _Slot

    def __call__(self, xh, yh):
        xh, yh = np.ascontiguousarray(xh), np.ascontiguousarray(yh)
        key = (xh.shape, xh.dtype.str, yh.shape, yh.dtype.str)
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = _Slot(gpublas.empty(xh.shape, xh.dtype), gpublas.empty(yh.shape, yh.dtype))
        slot.x.set(xh)
        slot.y.set(yh)
        if slot.runs == 0:
            for _, fn in self.parts:
                fn(slot.x, slot.y)
        else:
            if slot.graphs is None:
                slot.graphs = [self._capture(fn, slot) if captured else None for captured, fn in self.parts]
            for (_, fn), g in zip(self.parts, slot.graphs):
                if g is None:
                    fn(slot.x, slot.y)
                else:
                    g.replay()
        slot.runs += 1

    @staticmethod
    def _capture(fn, slot):
        with gpublas.graph() as g:
            fn(slot.x, slot.y)
        return g


class _Slot:
    __slots__ = ("x", "y", "runs", "graphs")

    def __init__(self, x, y):
        self.x, self.y, self.runs, self.graphs = x, y, 0, None
