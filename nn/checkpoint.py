"""Checkpoints: a model's state_dict in an .npz file, written atomically.

save() writes to a temporary file in the target's folder, flushes it to disk, then os.replace()s it
over the target: a crash or error mid-write leaves the previous checkpoint untouched (and no stray
temporary file).
"""
import os
import tempfile

import numpy as np


def save(model, path):
    """Writes model.state_dict() to `path` (.npz), atomically."""
    path = os.fspath(path)
    state = model.state_dict()
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **state)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def load(model, path):
    """Loads the .npz at `path` into `model` (names and shapes must match; see load_state_dict)."""
    with np.load(os.fspath(path)) as data:
        state = {k: data[k] for k in data.files}
    model.load_state_dict(state)
    return model
