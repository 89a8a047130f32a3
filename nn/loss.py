"""Losses: `loss = crit(output, target)` returns a Python float (the batch mean) and keeps the
gradient, which `crit.backward()` returns; `crit(output, target, on_device=True)` returns the mean as a
one-element DeviceArray instead, with no read-back (a captured training step reads it once per print).
Each is one fused kernel computing the per-element loss and its gradient together, then a fixed-order sum."""
import math

import numpy as np

import gpublas
from gpublas.runtime import device_checks
from gpublas.runtime.stream import capturing

from . import kernels as K
from .module import Module


class _Loss(Module):
    kernel_families = ("loss", "reduce")  # nn.prefetch
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
        return x.astype(np.float32) if x.dtype in gpublas.runtime.dtypes.HALVES else x

    def _value(self, total, on_device):
        if on_device:
            return total
        if capturing() is not None:  # the read-back would fail with the generic message: say what to pass
            raise gpublas.GraphError(f"{self.describe()}: returning the loss as a float is a host read-back, "
                                     "which a graph cannot hold (captured work runs at replay); pass "
                                     "on_device=True to get it as a one-element DeviceArray and read it "
                                     "after graph.replay()")
        return float(total.get()[0])


class SoftmaxCrossEntropy(_Loss):
    """Mean of -log softmax(logits)[label] over the labels that are not ignore_index (torch's
    CrossEntropyLoss with reduction='mean'); logits (..., C), labels (...) integers in [0, C) or
    ignore_index: (N, C) with (N,), or a sequence model's (N, T, C) with (N, T). Host labels are checked (a
    clear ValueError) and counted on the host; int32 labels already on the device are used as they are,
    with no read-back (xent_scale counts them on the device): a label outside [0, C) makes its row's loss,
    and so the mean, NaN, and the kernel records it: the host's next synchronization (this loss as a float,
    a .get()) raises IndexError naming it (gpublas.runtime.device_checks; PyTorch's device-side assert on a GPU).
    Every label ignored: the mean is NaN, as torch's."""
    kernel_families = ("loss:softmax_xent_forward", "reduce")  # nn.prefetch: the cross-entropy unit on the sim

    def __init__(self, ignore_index=-100):
        super().__init__()
        self.ignore_index = int(ignore_index)

    def extra_repr(self):
        return "" if self.ignore_index == -100 else f"ignore_index={self.ignore_index}"

    def forward(self, logits, labels, on_device=False):
        # logits: (..., C); labels: (...) int; loss: scalar; grad: logits' shape
        logits = self._input(logits)
        if logits.ndim < 2 or logits.shape[0] < 1:
            raise ValueError(f"{self.describe()}: expected logits (N, C) or (N, ..., C), got {logits.shape}")
        shape, C = logits.shape, logits.shape[-1]
        logits = logits if logits.ndim == 2 else logits.reshape(-1, C)
        N = logits.shape[0]
        labels, scale = self._labels(labels, shape[:-1], C, logits.dtype)
        if scale is None:
            scale = K.xent_scale(labels, self.ignore_index, gpublas.empty((1,), logits.dtype))
        grad = gpublas.empty_like(logits)
        if self._check_site is None:   # per process: never copied or pickled (Module.__getstate__)
            self._check_site = device_checks.site(
                f"{self.describe()}: label[{{position}}] = {{value}} is outside [0, {{limit}})")
        rows = K.softmax_xent_forward(logits, labels, grad, gpublas.empty((N,), logits.dtype), scale,
                                      self.ignore_index, self._check_site)
        total = K.sum_scaled(rows, gpublas.empty((1,), logits.dtype))
        # cached: only the gradient (softmax - onehot) / count, computed in the same pass as the loss
        self.grad = grad.reshape(shape) if len(shape) != 2 else grad
        return self._value(total, on_device)

    def _labels(self, labels, shape, C, dtype):
        """The labels as int32 (n,) on the device, and 1 / the count of the non-ignored ones as a device
        array (None for device labels: counted there)."""
        n = math.prod(shape)  # shape: a tuple of ints (np.prod: a ufunc call, 3 us)
        if isinstance(labels, gpublas.DeviceArray) and labels.dtype == np.int32 and labels.shape == shape:
            return labels.reshape(n), None
        host = labels.get() if isinstance(labels, gpublas.DeviceArray) else np.asarray(labels)
        if host.shape != shape:
            raise ValueError(f"{self.describe()}: expected labels {shape} for logits {shape + (C,)}, got {host.shape}")
        if not np.issubdtype(host.dtype, np.integer):
            raise ValueError(f"{self.describe()}: labels must be integers, got {host.dtype}")
        host = host.reshape(n)
        kept = host != self.ignore_index
        bad = ((host < 0) | (host >= C)) & kept
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{self.describe()}: labels must be in [0, {C}); label[{i}] = {int(host[i])}")
        count = int(kept.sum())
        scale = np.array([1.0 / count if count else np.inf], dtype)
        return gpublas.to_device(host.astype(np.int32)), gpublas.to_device(scale)


class MSELoss(_Loss):
    """Mean over all elements of (pred - target)^2."""
    kernel_families = ("loss:mse_forward", "reduce")  # nn.prefetch

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
