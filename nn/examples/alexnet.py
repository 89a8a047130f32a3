"""AlexNet's two-column CNN (nn.distributed.ColumnAlexNet) on the 8x8 digits, or on MNIST with --data:
a column per rank, exchanging maps only where AlexNet does (conv3 and the dense layers).

    mpiexec -n 2 python -m nn.examples.alexnet                       # a column on each of 2 ranks
    mpiexec -n 4 python -m nn.examples.alexnet                       # 2 columns x 2 data-parallel ranks
    python -m nn.examples.alexnet                                    # both columns on one process
    mpiexec -n 2 python -m nn.examples.alexnet --data ~/data/mnist --limit 5000 --epochs 2

Ranks form a grid (nn.distributed.init_grid): groups of --tensor-parallel consecutive ranks split the
columns (default 2 where the world is even, else 1), and DataParallel averages the gradients over the
groups, each taking its part of every global batch. SGD with Nesterov momentum and a cosine schedule,
as the digits example; the summary line last, printed by rank 0.
"""
import os
import sys

import nn

from .training import add_quiet_flag, describe_device, parser, run


class DataRanks:
    """The data-parallel side of a grid, as examples/training.run expects nn.distributed: ranks, the shard
    of an epoch and sums over the data group (the ranks of one tensor group see the same batches)."""

    def __init__(self, dist, grid):
        self.dist, self.grid = dist, grid

    def world_size(self):
        return self.grid.data_size

    def rank(self):
        return self.grid.data_rank

    def shard(self, n, epoch, seed):
        return self.dist.shard(n, epoch, seed, comm=self.grid.data)

    def all_sum(self, value):
        return self.dist.all_sum(value, comm=self.grid.data)


def load(args):
    if args.data:
        from .mnist import load as load_mnist
        return load_mnist(args.data, args.limit)
    from .digits import load as load_digits
    return load_digits(seed=args.seed)


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--data", help="a folder with MNIST's four IDX files (default: the 8x8 digits)")
    p.add_argument("--limit", type=int, help="with --data: the first LIMIT training images only")
    p.add_argument("--epochs", type=int, default=20, help="passes over the training images")
    p.add_argument("--batch-size", type=int, default=32, help="images per step (global, over the data ranks)")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate (SGD, Nesterov momentum 0.9)")
    p.add_argument("--width", type=int, default=8, help="conv1's maps per column (AlexNet's 48 at 224x224)")
    p.add_argument("--dropout", type=float, default=0.25, help="dropout after fc6 and fc7")
    p.add_argument("--tensor-parallel", type=int, help="ranks that split the two columns: 1 or 2 "
                   "(default 2 where the number of ranks is even)")
    p.add_argument("--seed", type=int, default=0, help="seeds the weights, the test split and the shuffles")
    p.add_argument("--save", help="write the trained weights (the one-device names and shapes) to this .npz")
    add_quiet_flag(p)
    args = p.parse_args(argv)
    import nn.distributed as dist

    world = dist.world_size()
    tensor = args.tensor_parallel or (2 if world % 2 == 0 else 1)
    if tensor not in (1, 2):
        raise SystemExit(f"--tensor-parallel {tensor}: the network has two columns (1 or 2 ranks hold them)")
    grid = dist.init_grid(tensor=tensor)
    if args.batch_size % grid.data_size:
        raise SystemExit(f"--batch-size {args.batch_size} must be a multiple of the {grid.data_size} data-parallel "
                         "groups (each takes an equal part of every global batch)")
    if not dist.is_main():
        args.quiet = True
        sys.stdout = open(os.devnull, "w")
    if not args.quiet:
        print(describe_device(), flush=True)
    data = load(args)
    image = data[0].shape[-1]
    nn.manual_seed(args.seed)
    net = dist.ColumnAlexNet(image=image, width=args.width, dropout=args.dropout, group=grid.tensor)
    opt = nn.SGD(net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = nn.CosineLR(opt, T_max=args.epochs)
    crit = nn.SoftmaxCrossEntropy()
    nn.prefetch(net, crit, opt)
    if not args.quiet:
        print(f"alexnet: {len(data[0])} train / {len(data[2])} test {image}x{image} images, two columns on "
              f"{grid.tensor_size} rank(s) x {grid.data_size} data-parallel, "
              f"{sum(p.data.size for p in net.parameters())} parameters on this rank", flush=True)
    model = dist.DataParallel(net, comm=grid.data)
    dist.reset_collective_stats(net)
    s = run(model, crit, opt, data, epochs=args.epochs, batch_size=args.batch_size, seed=args.seed, schedule=sched,
            name="alexnet", quiet=args.quiet, dist=DataRanks(dist, grid))
    traffic = dist.collective_stats(net)
    if args.save:
        dist.save(net, args.save)
    print(f"alexnet: test accuracy {s['test_accuracy']:.4f} ({len(data[2])} images) after {args.epochs} epochs, "
          f"final train loss {s['final_loss']:.4f}, {s['seconds']:.1f} s on {world} ranks (columns on "
          f"{grid.tensor_size} x data {grid.data_size}; rank 0 sent {traffic['collectives']} collectives, "
          f"{traffic['bytes'] / 2 ** 20:.1f} MiB, between the columns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
