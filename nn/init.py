"""nn's seeded host generator for parameter init and dropout seeds: nn.manual_seed(n) makes a run
repeatable (draws happen on the host, then the arrays are copied to the device)."""
import contextlib

import numpy as np

_rng = np.random.default_rng(0)


def manual_seed(seed):
    """Reseeds the generator behind parameter init and dropout seeds."""
    global _rng
    _rng = np.random.default_rng(int(seed))


@contextlib.contextmanager
def fork_rng():
    """Draws inside the block leave the generator as it was before it (torch.random.fork_rng): a layer
    that builds helpers with their own init keeps the draws of the layers after it unchanged."""
    rng = _rng
    state = rng.bit_generator.state
    try:
        yield
    finally:
        rng.bit_generator.state = state


def generator():
    return _rng


def uniform(shape, bound):
    """float64 draws from U[-bound, bound) (cast by the caller)."""
    return _rng.uniform(-bound, bound, size=shape)


def normal(shape):
    """float64 draws from N(0, 1) (cast by the caller)."""
    return _rng.standard_normal(size=shape)


def next_seed():
    """A fresh 63-bit seed for a device-side generator (e.g. Dropout's)."""
    return int(_rng.integers(0, 2 ** 63 - 1))
