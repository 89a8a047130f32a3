"""nn.prefetch: compile the kernel modules a model, its loss and its optimizer will launch, all at once in
the background, before the first batch needs them.

Each layer, loss and optimizer class names the kernel families its forward and backward passes launch
(`kernel_families`: a family name, or (family, dtype) for a dtype of its own such as the optimizers'
float64 step counter, or (family, dtype, defines) for a build with defines of its own such as the fused
attention's tiles at a head dim; "family:kernel" names the kernel whose unit the sim compiles,
source.sim_units); a family is one of nn/cuda/ or else of gpublas' cuda_src/. The dtype is the
layer's own parameters', else that of every parameter handed in (float32 when there are none). On the
sim backend a first run otherwise compiles its modules one after another as each is first launched.
"""
import numpy as np

from gpublas.runtime import launch

from .common import KERNELS


def _objects(objects):
    """Every layer, loss and optimizer in `objects` (a module's descendants included), in order."""
    for obj in objects:
        obj = getattr(obj, "module", obj)  # a DataParallel: the module it wraps
        yield from (obj.modules() if hasattr(obj, "modules") else [obj])


def _parameters(obj):
    own = getattr(obj, "_parameters", None)
    return list(own.values()) if own is not None else list(getattr(obj, "params", []))


def jobs(*objects):
    """[(family, dtype, root, kernel or None[, defines])] the objects' kernels need, as gpublas.runtime.launch.prefetch
    takes them, in the order the objects come (forward order for a Sequential)."""
    found = list(_objects(objects))
    every = {p.dtype for obj in found for p in _parameters(obj)} or {np.dtype(np.float32)}
    out = []
    for obj in found:
        own = {p.dtype for p in _parameters(obj) if p is not None}
        for entry in getattr(obj, "kernel_families", ()):
            family, dtypes = (entry[0], {np.dtype(entry[1])}) if isinstance(entry, tuple) else (entry, own or every)
            family, _, kernel = family.partition(":")
            root = KERNELS if (KERNELS / f"{family}.cu").exists() else None
            defines = (tuple(sorted(entry[2].items())),) if isinstance(entry, tuple) and len(entry) > 2 else ()
            out.extend((family, d, root, kernel or None, *defines) for d in sorted(dtypes, key=str))
    return list(dict.fromkeys(out))


def prefetch(*objects):
    """Starts compiling, in the background, every kernel module that `objects` (modules, losses,
    optimizers) will launch; returns how many modules that is (0 when all are loaded already). Their
    first launches then wait only for what is still compiling; other launches do not wait."""
    return len(set(launch.prefetch(jobs(*objects)).values()))
