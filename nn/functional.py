"""nn.functional: the stateless forms of nn's ops with torch.nn.functional's names and arguments (forward only;
the layers hold what backward needs). Each runs the layer's kernels on the device and returns a DeviceArray;
arguments torch has and nn does not implement raise NotImplementedError naming them."""
import numpy as np

import gpublas

from . import kernels as K
from .layers.activation import GELU, ReLU, softmax_dim
from .layers.attention import scaled_dot_product_attention
from .layers.dropout import Dropout
from .layers.norm import LayerNorm
from .loss import SoftmaxCrossEntropy

__all__ = ["cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "relu",
           "scaled_dot_product_attention", "softmax"]


def _device(x, what, float_only=True):
    if not isinstance(x, gpublas.DeviceArray):
        x = np.asarray(x)
        if float_only and x.dtype != np.float64:
            x = x.astype(np.float32)
        x = gpublas.to_device(np.ascontiguousarray(x))
    if float_only and not gpublas.runtime.dtypes.is_float(x.dtype):
        raise TypeError(f"{what}: input must be a float array, got {x.dtype}")
    return x


def linear(input, weight, bias=None):
    """input (..., in) weight^T + bias: weight (out, in), as torch.nn.functional.linear."""
    x, w = _device(input, "linear"), _device(weight, "linear")
    if w.ndim != 2 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"linear: input {x.shape} and weight {w.shape} do not fit ((..., in) and (out, in))")
    lead = x.shape[:-1]
    y = K.gemm(gpublas.ascontiguousarray(x).reshape(-1, w.shape[1]), w, trans_b=True)
    if bias is not None:
        b = _device(bias, "linear")
        K.bias_act_forward(y, b, y, w.shape[0], 1, K.ACT[None])
    return y.reshape(lead + (w.shape[0],))


def relu(input, inplace=False):
    return ReLU()(_device(input, "relu"))


def gelu(input, approximate="none"):
    return GELU(approximate)(_device(input, "gelu"))


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    x = _device(input, "softmax")
    x = x if dtype is None else x.astype(dtype)
    return gpublas.softmax(x, axis=softmax_dim(x.ndim, dim))


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    x = _device(input, "log_softmax")
    x = x if dtype is None else x.astype(dtype)
    return x - gpublas.logsumexp(x, axis=softmax_dim(x.ndim, dim), keepdims=True)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """LayerNorm over the trailing normalized_shape axes with the given weight and bias (None: none)."""
    x = _device(input, "layer_norm")
    norm = LayerNorm(normalized_shape, eps, elementwise_affine=weight is not None, bias=bias is not None,
                     dtype=x.dtype)
    if weight is not None:
        norm.weight.data = _device(weight, "layer_norm").astype(x.dtype)
    if bias is not None:
        norm.bias.data = _device(bias, "layer_norm").astype(x.dtype)
    return norm(x)


def dropout(input, p=0.5, training=True, inplace=False):
    """Inverted dropout with a fresh seed from nn's generator; the identity when not training."""
    layer = Dropout(p)
    layer.train(bool(training))
    return layer(_device(input, "dropout"))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """The mean cross-entropy of logits (N, C) (or (N, ..., C), PyTorch's class axis moved last) against
    integer targets, as a one-element DeviceArray (no read-back)."""
    if weight is not None or size_average is not None or reduce is not None or reduction != "mean" or label_smoothing:
        raise NotImplementedError("cross_entropy: only reduction='mean' without weight or label_smoothing")
    return SoftmaxCrossEntropy(ignore_index)(_device(input, "cross_entropy"), target, on_device=True)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """weight[input]: the rows of weight (V, D) at the integer ids input (...) -> (..., D)."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not supported")
    w = _device(weight, "embedding")
    ids = input.get() if isinstance(input, gpublas.DeviceArray) and input.dtype != np.int32 else input
    if not isinstance(ids, gpublas.DeviceArray):
        ids = np.asarray(ids)
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"embedding: input must be integer ids, got {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= w.shape[0]):
            raise IndexError(f"embedding: ids must be in [0, {w.shape[0]})")
        ids = gpublas.to_device(ids.astype(np.int32))
    y = K.embedding_forward(w, ids.reshape(-1), gpublas.empty((ids.size, w.shape[1]), w.dtype))
    return y.reshape(tuple(ids.shape) + (w.shape[1],))
