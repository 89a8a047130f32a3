"""Checkpoints: a model's state_dict in an .npz file, written atomically.

save() writes to a temporary file in the target's folder, flushes it to disk, then os.replace()s it
over the target: a crash or error mid-write leaves the previous checkpoint untouched (and no stray
temporary file). A process killed outright (kill -9) cannot clean up: its temporary file is named
`.<target>.tmp-<pid>-<random>`, and the next save() of the same target removes those whose pid is
no longer running. load() refuses arrays that are not real numbers (see Module.load_state_dict).
"""
import os
import re
import tempfile

import ml_dtypes
import numpy as np


def _temp_prefix(path):
    return "." + os.path.basename(path) + ".tmp-"


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # someone else's live process
        return True
    return True


def _umask():
    """The process's umask, read without changing it where Linux shows it (/proc/self/status); elsewhere
    set and restored at once (os.umask has no read-only form before Python 3.13's os.getumask)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_stale_temporaries(path):
    """Deletes the temporary files that earlier save()s of `path` left behind when their process died
    (their pid is not running); returns the names removed. Files of live processes stay."""
    folder = os.path.dirname(os.path.abspath(path))
    pattern = re.compile(re.escape(_temp_prefix(path)) + r"(\d+)-[A-Za-z0-9_]+$")
    removed = []
    for name in os.listdir(folder):
        m = pattern.match(name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(folder, name))
                removed.append(name)
            except FileNotFoundError:    # another saver removed it first
                pass
    return removed


def save(model, path):
    """Writes model.state_dict() to `path` (.npz), atomically. bfloat16 arrays (a model.to(bfloat16)) are
    written as float32, exactly: .npz has no bfloat16, and load() rounds them back without loss."""
    return save_state(model.state_dict(), path)


def save_state(state, path):
    """save() of a state_dict already taken (a model split over ranks gathers it on every rank first)."""
    path = os.fspath(path)
    state = {k: v.astype(np.float32) if v.dtype == ml_dtypes.bfloat16 else v for k, v in state.items()}
    folder = os.path.dirname(os.path.abspath(path))
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(path)}{os.getpid()}-", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 -> what open() gives (np.savez: 0644 under umask 022)
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
    """Loads the .npz at `path` into `model` (names, shapes and dtypes are checked: see load_state_dict)."""
    state = {}
    with np.load(os.fspath(path)) as data:      # allow_pickle=False: an object array never unpickles
        for k in data.files:
            try:
                state[k] = data[k]
            except ValueError as e:
                raise ValueError(f"{os.fspath(path)}: array '{k}' cannot be loaded: {e}") from None
    model.load_state_dict(state)
    return model
