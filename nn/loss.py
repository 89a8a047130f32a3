"""Losses: `loss = crit(output, target)` returns a Python float (the batch mean) and keeps the
gradient, which `crit.backward()` returns; `crit(output, target, on_device=True)` returns the mean as a
one-element DeviceArray instead, with no read-back (a captured training step reads it once per print).
Each is one fused kernel computing the per-element loss and its gradient together, then a fixed-order sum."""
import numpy as np

import gpublas

from . import step_kernels as K
from .module import Module


class _Loss(Module):
    is_loss = True

    def __init__(self):
        super().__init__()
        self.grad = None

    def backward(self, dloss=1.0):
        """d(loss)/d(output), scaled by dloss (1 by default)."""
        grad = self._cached("grad")
        if dloss != 1.0:
            grad = K.scale_inplace(grad.copy(), float(dloss))
        return grad

    def _input(self, x):
        """As Module's, with float16/bfloat16 outputs widened to float32 first: losses are computed
        in FP32 (torch.autocast's rule for its losses), and their gradient is float32."""
        x = super()._input(x)
        return x.astype(np.float32) if x.dtype in gpublas.dtypes.HALVES else x

    @staticmethod
    def _value(total, on_device):
        return total if on_device else float(total.get()[0])


class SoftmaxCrossEntropy(_Loss):
    """Mean over the batch of -log softmax(logits)[label]; logits (N, C), labels (N,) integers in [0, C).
    Host labels are checked (a clear ValueError); int32 labels already on the device are used as they
    are, with no read-back: a label outside [0, C) makes its row's loss, and so the mean, NaN."""

    def forward(self, logits, labels, on_device=False):
        # logits: (N, C); labels: (N,) int; loss: scalar; grad: (N, C)
        logits = self._input(logits)
        if logits.ndim != 2 or logits.shape[0] < 1:
            raise ValueError(f"{self.describe()}: expected logits (N, C), got {logits.shape}")
        N, C = logits.shape
        labels = self._labels(labels, N, C)
        grad = gpublas.empty_like(logits)
        rows = K.softmax_xent_forward(logits, labels, grad, gpublas.empty((N,), logits.dtype))
        total = K.sum_scaled(rows, gpublas.empty((1,), logits.dtype), 1.0 / N)
        # cached: only the gradient (softmax - onehot) / N, computed in the same pass as the loss
        self.grad = grad
        return self._value(total, on_device)

    def _labels(self, labels, N, C):
        if isinstance(labels, gpublas.DeviceArray) and labels.dtype == np.int32 and labels.shape == (N,):
            return labels
        host = labels.get() if isinstance(labels, gpublas.DeviceArray) else np.asarray(labels)
        if host.shape != (N,):
            raise ValueError(f"{self.describe()}: expected labels ({N},) for logits ({N}, {C}), got {host.shape}")
        if not np.issubdtype(host.dtype, np.integer):
            raise ValueError(f"{self.describe()}: labels must be integers, got {host.dtype}")
        bad = (host < 0) | (host >= C)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{self.describe()}: labels must be in [0, {C}); label[{i}] = {int(host[i])}")
        return gpublas.to_device(host.astype(np.int32))


class MSELoss(_Loss):
    """Mean over all elements of (pred - target)^2."""

    def forward(self, pred, target, on_device=False):
        # pred, target: the same shape; loss: scalar; grad: pred's shape
        pred = self._input(pred)
        target = gpublas.to_device(np.asarray(target, pred.dtype)) if not isinstance(target, gpublas.DeviceArray) \
            else target
        if target.shape != pred.shape:
            raise ValueError(f"{self.describe()}: target shape {target.shape} does not match prediction {pred.shape}")
        if target.dtype != pred.dtype:
            raise TypeError(f"{self.describe()}: target dtype {target.dtype} does not match prediction {pred.dtype}")
        grad = gpublas.empty_like(pred)
        sq = K.mse_forward(pred, target, grad, gpublas.empty_like(pred))
        total = K.sum_scaled(sq, gpublas.empty((1,), pred.dtype), 1.0 / max(1, pred.size))
        self.grad = grad  # cached: only the gradient 2 (pred - target) / n
        return self._value(total, on_device)


CrossEntropyLoss = SoftmaxCrossEntropy
