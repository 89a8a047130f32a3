"""The digits CNN, scaled to MNIST (28x28), on the standard IDX files.

    python -m nn.examples.mnist --data ~/data/mnist            # the folder with the four IDX files
    python -m nn.examples.mnist --data ~/data/mnist --limit 5000 --epochs 2   # a quick run on the sim

The folder must hold train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
t10k-labels-idx1-ubyte (each may be gzipped, and '.' may replace the '-' before 'idx').
"""
import glob
import os
import sys

import numpy as np

import nn

from .idx import read_idx
from .graphed import add_graph_flag
from .precision import FP32Dense, add_precision_flag
from .training import add_distributed_flag, add_quiet_flag, describe_device, fit_and_report, parser, setup_distributed

FILES = {"train_images": "train-images", "train_labels": "train-labels", "test_images": "t10k-images",
         "test_labels": "t10k-labels"}


def find(folder, stem):
    hits = sorted(glob.glob(os.path.join(glob.escape(folder), stem + "[-.]idx*")))
    if not hits:
        raise FileNotFoundError(f"mnist: no {stem}-idx*-ubyte[.gz] file in {folder}")
    return hits[0]


def load(folder, limit=None):
    """(X_train, y_train, X_test, y_test): X float32 (N, 1, 28, 28) in [0, 1], y int32."""
    arrays = {k: read_idx(find(folder, stem)) for k, stem in FILES.items()}
    out = []
    for part in ("train", "test"):
        X, y = arrays[f"{part}_images"], arrays[f"{part}_labels"]
        if X.ndim != 3 or y.ndim != 1 or len(X) != len(y):
            raise ValueError(f"mnist: {part} images {X.shape} and labels {y.shape} do not pair up")
        if limit:
            X, y = X[:limit], y[:limit]
        out += [(X.astype(np.float32) / 255.0)[:, None], y.astype(np.int32)]
    return tuple(out)


def model(h, w, dropout=0.25):
    """Conv(1->16) ReLU Pool -> Conv(16->32) ReLU Pool -> Flatten Dropout -> Dense(.., 128) ReLU -> Dense(128, 10)."""
    flat = 32 * (h // 2 // 2) * (w // 2 // 2)
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(dropout),
        nn.Dense(flat, 128), nn.ReLU(),
        FP32Dense(128, 10))   # the logits in FP32 under --precision bf16 / fp16 (precision.py)


def main(argv=None):
    p = parser(__doc__)
    p.add_argument("--data", required=True, help="folder with the MNIST IDX files")
    p.add_argument("--epochs", type=int, default=3, help="passes over the training images")
    p.add_argument("--batch-size", type=int, default=64, help="images per step (global, over all ranks)")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate (SGD, Nesterov momentum 0.9)")
    p.add_argument("--limit", type=int, help="use only the first LIMIT images of each split (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seeds the weights and the shuffles")
    p.add_argument("--save", help="write the trained weights to this .npz (default: not saved)")
    add_quiet_flag(p)
    add_distributed_flag(p)
    add_graph_flag(p)
    add_precision_flag(p)
    args = p.parse_args(argv)
    dist = setup_distributed(args)

    if not args.quiet:
        print(describe_device(), flush=True)
    nn.manual_seed(args.seed)
    data = load(args.data, args.limit)
    net = model(*data[0].shape[2:])
    opt = nn.SGD(net.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = nn.StepLR(opt, step_size=max(1, args.epochs // 2), gamma=0.3)
    if not args.quiet:
        print(f"mnist: {len(data[0])} train / {len(data[2])} test images", flush=True)
    return fit_and_report("mnist", net, opt, data, args, schedule=sched, dist=dist)


if __name__ == "__main__":
    sys.exit(main())
