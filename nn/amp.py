"""Mixed-precision training helpers, with PyTorch's names: autocast (which layers compute in 16 bits)
and GradScaler (dynamic loss scaling).

    with nn.autocast(gpublas.bfloat16):          # Dense computes in bf16 from its FP32 master weights
        loss = crit(model(x), y)                  # losses widen to FP32; BatchNorm keeps FP32 statistics
    model.backward(crit.backward())               # FP32 weight and bias gradients, accumulated into .grad

Under autocast a float32 Dense casts its input and weights to the 16-bit dtype, runs its GEMMs there
(FP32 accumulation) and adds its weight gradient into the FP32 .grad by a GEMM with a float32 C; its
output is rounded to 16 bits once, after the bias and activation are added to the FP32 product (the
GEMM writes FP32, the bias kernel rounds: PyTorch's fused linear epilogue), as is Conv2d's;
activations, pooling and dropout run on the 16-bit data they get. The state is per thread.

FP16 gradients underflow without loss scaling: the backward pass starts from the loss gradient
multiplied by a large scale S, the FP32 master gradients are divided by S before the optimizer step,
and a step whose gradients hold an inf or NaN is skipped. PyTorch's GradScaler rules:

    scaler = nn.amp.GradScaler()                 # S = 2^16
    dlogits = scaler.scale(crit.backward())      # the gradient the backward pass starts from, times S
    model.backward(dlogits)
    scaler.unscale_(opt)                         # optional: before clip_grad_norm
    scaler.step(opt)                             # unscales (once), skips the step on inf/NaN
    scaler.update()                              # inf/NaN: S *= 0.5; growth_interval clean steps: S *= 2

BF16 has float32's exponent range and needs no scaling (GradScaler(enabled=False) passes through).

Pure 16-bit training (PyTorch's model.to(torch.bfloat16)) needs no autocast: model.to(gpublas.bfloat16)
(or layers built with dtype=) keeps weights, gradients and activations in 16 bits. The loss still
computes in FP32 and a layer rounds its FP32 gradient to the output's dtype (Module._grad_dtype); GEMMs
and bias-gradient sums accumulate in FP32 and round once; BatchNorm stays FP32 (statistics and
parameters) and the LSTM's cell state FP32; SGD and Adam compute in FP32 and keep their state in the
parameter's dtype, as PyTorch does.
The unscale and the inf/NaN check are one kernel per gradient buffer (nn/cuda/amp.cu); `step` reads one
int per optimizer back to decide, as PyTorch's does.
"""
import math
import threading

import numpy as np

import gpublas
from gpublas.runtime.launch import geometry_1d

from .kernels import get_kernel


_STATE = threading.local()


class autocast:
    """Within the block, float32 layers listed in LOWER (Dense) compute in `dtype` (float16 or
    bfloat16) from their FP32 weights (torch.autocast's name; the device is the active backend)."""

    def __init__(self, dtype=gpublas.bfloat16, enabled=True):
        self.dtype = np.dtype(dtype)
        if self.dtype not in gpublas.runtime.dtypes.HALVES:
            raise TypeError(f"autocast: dtype must be float16 or bfloat16, got {self.dtype}")
        self.enabled = bool(enabled)

    def __enter__(self):
        self._saved = getattr(_STATE, "dtype", None)
        _STATE.dtype = self.dtype if self.enabled else None
        return self

    def __exit__(self, *exc):
        _STATE.dtype = self._saved
        return False


def autocast_dtype():
    """The 16-bit dtype of the innermost enabled autocast block of this thread, or None."""
    return getattr(_STATE, "dtype", None)


def compute_dtype(param_dtype):
    """The dtype a layer with `param_dtype` parameters computes in: the autocast dtype for a float32
    layer within an enabled block, else its own."""
    low = autocast_dtype()
    return low if low is not None and np.dtype(param_dtype) == np.float32 else np.dtype(param_dtype)


def cast(dtype, *arrays):
    """`arrays` in `dtype`: each one already in it as is, the others converted (a new array); None kept."""
    return tuple(a if a is None or a.dtype == dtype else a.astype(dtype) for a in arrays)


def unscale_(grad, inv_scale, found_inf):
    """grad *= inv_scale on the device; found_inf (int32, 1 element) set to 1 where a result is inf/NaN."""
    if grad.size:
        get_kernel("amp", "amp_unscale", grad.dtype)(*geometry_1d(grad.size), grad, grad.size, inv_scale, found_inf)
    return found_inf


class GradScaler:
    """Dynamic loss scaling (torch.amp.GradScaler's arguments, rules and state_dict keys)."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        if not growth_factor > 1.0 or not 0.0 < backoff_factor < 1.0 or growth_interval < 1:
            raise ValueError("GradScaler: needs growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1")
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._found = {}  # id(optimizer) -> int32 device flag of this step's unscale

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """outputs * S (a new array): hand it the gradient the backward pass starts from."""
        if not self._enabled:
            return outputs
        return outputs * self._scale

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by S in place and notes whether any is inf/NaN (once per
        optimizer per step: a second call before update() raises, as PyTorch's). float16 gradients (a
        pure float16 model's) are refused, as PyTorch refuses them: divided by S in float16 the small
        ones flush to zero, so loss scaling wants FP32 master gradients (nn.autocast)."""
        if not self._enabled:
            return
        if id(optimizer) in self._found:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update()")
        if any(p.grad.dtype == np.float16 for p in optimizer.params):
            raise ValueError("GradScaler: attempting to unscale float16 gradients (PyTorch refuses them too): keep "
                             "the parameters float32 and train under nn.autocast(float16), or use bfloat16")
        found = gpublas.zeros(1, np.int32)
        inv = 1.0 / self._scale
        for _, grad, *_ in optimizer._operands():
            unscale_(grad, inv, found)
        self._found[id(optimizer)] = found

    def step(self, optimizer):
        """optimizer.step() unless this step's gradients hold an inf or NaN; unscales first if
        unscale_ was not called. Returns the optimizer's return value, or None for a skipped step."""
        if not self._enabled:
            return optimizer.step()
        if id(optimizer) not in self._found:
            self.unscale_(optimizer)
        if int(self._found[id(optimizer)].get()[0]):
            return None
        return optimizer.step()

    def update(self, new_scale=None):
        """After the step: S *= backoff_factor if any optimizer found inf/NaN (and the clean count
        restarts), else after growth_interval clean steps in a row S *= growth_factor; new_scale
        sets S directly."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif any(int(f.get()[0]) for f in self._found.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        elif self._found:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                grown = self._scale * self._growth_factor
                if math.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
        self._found = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state):
        if not state:
            raise RuntimeError("GradScaler.load_state_dict: the state is empty (saved from a disabled scaler)")
        self._scale = float(state["scale"])
        self._growth_factor, self._backoff_factor = float(state["growth_factor"]), float(state["backoff_factor"])
        self._growth_interval, self._growth_tracker = int(state["growth_interval"]), int(state["_growth_tracker"])
