"""AlexNet's two-column network, scaled to small images: the layers and exchange points of Krizhevsky et
al. (2012), section 3.5 and figure 2, with each column on its own rank (or both on one).

    layer     reads                       per column (width w, h = 8 w)     8x8 digits      28x28 MNIST
    conv1     the image                   k3 (k5 on 28x28), w maps, ReLU    pool -> 4x4     pool -> 14x14
    conv2     its own column's conv1      k3, 2w maps, ReLU                 pool -> 2x2     pool -> 7x7
    conv3     both columns' conv2         k3, 3w maps, ReLU
    conv4     its own column's conv3      k3, 3w maps, ReLU
    conv5     its own column's conv4      k3, 2w maps, ReLU                                 pool -> 3x3
    fc6       both columns' conv5         h units, ReLU, dropout
    fc7       both columns' fc6           h units, ReLU, dropout
    fc8       both columns' fc7           classes / 2 logits, gathered: every rank has all the logits

On two ranks the exchanges are four all-gathers forward (conv3, fc6, fc7, fc8's input) and one of the
logits, and backward their adjoints (reduce-scatters) plus one all-reduce of the image's gradient
(conv1's dx, which a classifier discards). The local response normalisation of the original is left
out (later work found it adds little); ReLU, max-pooling and dropout are as there. The ReLU layers start from
He et al.'s init (uniform within sqrt(6 / fan-in)): with PyTorch's default (within 1 / sqrt(fan-in)) the
eight layers leave the loss at ln 10 for epochs."""
import math

import numpy as np

from ..layers.activation import Flatten
from ..layers.container import Sequential
from ..layers.dropout import Dropout
from ..layers.pool import MaxPool2d
from .columns import ColumnConv2d, ColumnDense
from .comm import _SEED_STRIDE
from .group import as_group


class ColumnAlexNet(Sequential):
    """The two-column CNN for `image` x `image` inputs of `in_channels` (8: the digits; 28: MNIST) on the
    ranks of `group` (1 or 2 ranks for columns=2). Built from nn's generator as one device builds it
    (nn.manual_seed alike on every rank); each rank's Dropout layers get their own seed."""

    def __init__(self, image=8, in_channels=1, classes=10, width=8, dropout=0.0, columns=2, group=None,
                 dtype=np.float32):
        g = as_group(group)
        if image not in (8, 28):
            raise ValueError(f"ColumnAlexNet: image={image}; sized for 8 (the digits) or 28 (MNIST)")
        c, w, h = columns, width, 8 * width
        k1, side = (3, 2) if image == 8 else (5, 3)
        kw = dict(columns=c, group=g, dtype=dtype, activation="relu", gain=math.sqrt(6.0))  # He's init for ReLU
        layers = [ColumnConv2d(in_channels, c * w, k1, padding=k1 // 2, reads="input", **kw), MaxPool2d(2),
                  ColumnConv2d(c * w, c * 2 * w, 3, padding=1, reads="own", **kw), MaxPool2d(2),
                  ColumnConv2d(c * 2 * w, c * 3 * w, 3, padding=1, reads="all", **kw),
                  ColumnConv2d(c * 3 * w, c * 3 * w, 3, padding=1, reads="own", **kw),
                  ColumnConv2d(c * 3 * w, c * 2 * w, 3, padding=1, reads="own", **kw)]
        if image == 28:
            layers.append(MaxPool2d(2))
        layers += [Flatten(),
                   ColumnDense(c * 2 * w * side * side, c * h, reads="all", **kw), Dropout(dropout),
                   ColumnDense(c * h, c * h, reads="all", **kw), Dropout(dropout),
                   ColumnDense(c * h, classes, reads="all", gather_output=True, columns=c, group=g, dtype=dtype)]
        super().__init__(*layers)
        self.group = g
        for m in self.modules():
            if isinstance(m, Dropout):   # columns are different units: different masks on different ranks
                m.seed = (m.seed + g.rank * _SEED_STRIDE) % 2 ** 63
