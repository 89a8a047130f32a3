"""gradcheck: a layer's backward against central finite differences, in float64.

For a layer the scalar is L = sum(R * y) with R a fixed random projection of the output y (so every
output element counts, with distinct weights); backward(R) then gives dL/dx and adds dL/dW into each
parameter's grad. For a loss the scalar is the loss itself. Each input and parameter element is
perturbed by +-eps and L re-evaluated: (L(+) - L(-)) / 2 eps. The host arithmetic here is the test
harness; the layer's forward and backward run on the device as always.
"""
import numpy as np

import gpublas

from .module import Module


class GradcheckError(AssertionError):
    pass


def _first(y):
    return y[0] if isinstance(y, tuple) else y


def _rng_state(layer):
    return [(m, m.offset) for m in layer.modules() if hasattr(m, "offset") and hasattr(m, "seed")]


def gradcheck(layer, x, *args, eps=1e-6, rtol=1e-5, atol=1e-7, seed=0, check_input=True, max_elements=None):
    """Checks layer.backward against finite differences for input `x` and every parameter; extra
    positional args (labels, targets) go to forward unchanged, and so does an integer `x` (indices,
    whose gradient is not checked). The layer must be float64 (convert it with layer.double()).
    Raises GradcheckError naming the first mismatch; returns the largest relative error seen. Random
    layers (Dropout) replay the same mask for every evaluation."""
    if not isinstance(layer, Module):
        raise TypeError(f"gradcheck: expected an nn.Module, got {type(layer).__name__}")
    if layer.parameters() and layer.dtype != np.float64:
        raise TypeError(f"gradcheck: {layer.describe()} is {layer.dtype}; call .double() first")
    x = np.array(x.get() if isinstance(x, gpublas.DeviceArray) else x)
    if x.dtype.kind in "iu":
        check_input = False           # integer input (Embedding's indices): passed as is, never perturbed
    else:
        x = x.astype(np.float64)
    is_loss = getattr(layer, "is_loss", False)
    rng = np.random.default_rng(seed)
    replay = _rng_state(layer)
    R = None

    def scalar(xh):
        nonlocal R
        for m, off in replay:
            m.offset = off
        y = _first(layer(gpublas.to_device(xh), *args))
        if is_loss:
            return float(y)
        yh = y.get()
        if R is None:
            R = rng.standard_normal(yh.shape)
        return float(np.sum(R * yh))

    # analytic gradients
    layer.zero_grad()
    scalar(x)
    dx = layer.backward() if is_loss else layer.backward(gpublas.to_device(R))
    analytic = []
    if check_input:
        analytic.append(("input", x, None, dx.get()))
    for name, p in layer.named_parameters():
        analytic.append((name, p.data.get(), p, p.grad.get()))

    worst = 0.0
    for name, value, p, grad in analytic:
        flat = value.reshape(-1)
        idx = np.arange(flat.size)
        if max_elements is not None and flat.size > max_elements:
            idx = rng.choice(flat.size, max_elements, replace=False)
        numeric = np.empty(idx.size)
        for k, i in enumerate(idx):
            orig = flat[i]
            vals = []
            for delta in (eps, -eps):
                flat[i] = orig + delta
                if p is None:
                    vals.append(scalar(value))
                else:
                    p.data.set(value)
                    vals.append(scalar(x))
            flat[i] = orig
            if p is not None:
                p.data.set(value)
            numeric[k] = (vals[0] - vals[1]) / (2 * eps)
        got = grad.reshape(-1)[idx]
        err = np.abs(got - numeric)
        bad = err > atol + rtol * np.abs(numeric)
        if bad.any():
            j = int(np.argmax(bad))
            raise GradcheckError(f"gradcheck {layer.describe()}: d/d{name}[{np.unravel_index(idx[j], value.shape)}] "
                                 f"backward {got[j]:.10g}, finite differences {numeric[j]:.10g} "
                                 f"({int(bad.sum())} of {idx.size} elements off)")
        worst = max(worst, float(np.max(err / (np.abs(numeric) + atol), initial=0.0)))
    return worst
