"""What each rank runs in tests/test_distributed.py (launched by mpiexec): python mpi_worker.py
SCENARIO OUTDIR [WIRE].

train: every rank seeds nn differently, wraps the same model in DataParallel (tiny buckets, so there
       are several), trains STEPS steps on its part of an odd global batch (uneven split), and writes
       its parameters after construction and after training, its shard of an epoch and a checkpoint.
raise: rank 1 raises in the middle of training while the others go on into the gradient reduction.
buffers: a module whose buffers (a device array and a host counter) each rank changes in forward;
       DataParallel broadcasts rank 0's at construction and before every training forward.
"""
import sys
from pathlib import Path

import numpy as np

import gpublas
import nn
import nn.distributed as dist

STEPS, BATCH, LR = 3, 11, 0.1


def model():
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Dense(12, 5), nn.Tanh(), nn.Dense(5, 3)).double()


def data():
    rng = np.random.default_rng(7)
    return rng.normal(size=(STEPS, BATCH, 1, 4, 4)), rng.integers(0, 3, (STEPS, BATCH)).astype(np.int32)


def train(net, parts, opt, crit, X, y, fail_rank=None):
    for s in range(STEPS):
        if dist.rank() == fail_rank and s == 1:
            raise RuntimeError("rank 1 fails on purpose")
        idx = parts[dist.rank()]
        crit(net(X[s, idx]), y[s, idx])
        opt.zero_grad()
        net.backward(crit.backward())
        opt.step()


class Buffered(nn.Module):
    """Dense(2, 1) with buffers that forward records (what it saw) and then overwrites per rank."""

    def __init__(self, r):
        super().__init__()
        self.dense = nn.Dense(2, 1)
        self.stat, self.count, self.seen = gpublas.full((3,), r + 1.0), np.array(r), []

    def named_buffers(self, prefix=""):
        return [("stat", self.stat), ("count", self.count)]

    def forward(self, x):
        self.seen.append([*self.stat.get(), float(self.count)])
        self.stat.fill(10.0 * (dist.rank() + 1))
        self.count += dist.rank() + 1
        return self.dense(x)


def buffers(out):
    net = dist.DataParallel(Buffered(dist.rank()))
    for _ in range(2):
        net(np.ones((1, 2), np.float32))
    net.eval()(np.ones((1, 2), np.float32))     # eval: no broadcast, each rank sees its own update
    np.save(out / f"seen-{dist.rank()}.npy", np.array(net.module.seen))


def main(scenario, out, wire=None):
    out, r = Path(out), dist.rank()
    if scenario == "buffers":
        return buffers(out)
    nn.manual_seed(100 + r)                     # different on every rank: the broadcast must fix it
    net = dist.DataParallel(model(), bucket_bytes=200)
    if wire:
        for b in net.buckets:
            b.wire = dist.Wire(b.buf, mode=wire)
    np.savez(out / f"init-{r}.npz", **net.state_dict())
    X, y = data()
    parts = np.array_split(np.arange(BATCH), dist.world_size())
    opt = nn.SGD(net.parameters(), lr=LR, momentum=0.9)
    train(net, parts, opt, nn.SoftmaxCrossEntropy(), X, y, fail_rank=1 if scenario == "raise" else None)
    np.savez(out / f"final-{r}.npz", **net.state_dict())
    np.save(out / f"shard-{r}.npy", dist.shard(11, epoch=3, seed=5))
    dist.save(net, out / f"ckpt-{r}.npz")
    np.save(out / f"buckets-{r}.npy", np.array([len(net.buckets), net.stats["steps"]]))


if __name__ == "__main__":
    main(*sys.argv[1:])
