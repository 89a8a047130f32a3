"""Kernels: load a family from cuda_src/ (or any source), prepare its argument packing once, launch.

    k = get_kernel("memory", "fill_real", dtype=np.float32)
    k(grid=ceil_div(n, 256), block=256, args...)          # args: DeviceArrays, ints, floats
"""

import threading

import numpy as np

from . import backends, compile_queue, cubins, dtypes, profiler, source
from .errors import LaunchError
from .stream import _local, refuse_in_capture
from .geometry import (BLOCK, GRID_STRIDE_BLOCKS, SIM_ELEMENTS_PER_THREAD, SIM_RUN, ceil_div,  # noqa: F401
                       fast_divisor, flat_geometry, geometry_1d, grid_1d, simulated)  # (launchers import them here)

# What a GPU refuses at launch (every compute capability gpublas targets); checked on every backend,
# so the simulator refuses what a GPU would.
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_PLANS = 64  # launch shapes remembered per kernel (a launcher repeats a few)
SHARED_DEFAULT = 48 * 1024  # static + dynamic shared memory per block without an opt-in
REAL = {d: row.c for d, row in dtypes.TABLE.items()}  # the C type `real` stands for, per dtype


def _dim3(v):
    if isinstance(v, (int, np.integer)):
        return (int(v), 1, 1)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3:
        raise LaunchError(f"a grid or block has 1 to 3 dimensions, got {v}")
    return v + (1,) * (3 - len(v))


class Module:
    """A compiled source: its kernels by name, each prepared on first use. On a backend that compiles
    units (the sim), a family whose source names units (source.sim_units) is compiled one unit at a
    time, as one of its kernels is first needed; `kernel` names the kernel needed first (None: the
    first unit). `handle`: the first unit's compiled module."""

    def __init__(self, text, defines, source_name, backend=None, kernel=None):
        self.backend = backend or backends.current()
        self.signatures = source.kernel_signatures(text, defines)
        self.source_name = source_name
        self._source = text, defines
        self._units = source.sim_units(text, self.signatures) if self.backend.units else [None]
        self._spread = source.sim_spread(text, self.signatures)  # kernels whose blocks are heavy on the sim
        self._handles = {}  # unit -> the backend's compiled module
        self._lock = threading.Lock()
        self._kernels = {}
        self.handle = self.handle_for(kernel)

    def handle_for(self, kernel):
        """The compiled module holding `kernel` (the first unit's for a name in none), compiled now
        when it is not yet."""
        unit = self._unit(kernel)
        h = self._handles.get(unit)
        if h is None:
            with self._lock:
                h = self._handles.get(unit)
                if h is None:
                    text, defines = self._source
                    split = {"kernels": unit} if len(self._units) > 1 else {}  # one unit: the whole family
                    h = self._handles[unit] = self.backend.compile(text, defines, self.source_name, **split)
        return h

    def compiled(self, kernel):
        """Whether the unit holding `kernel` (the first unit for None) is compiled."""
        return self._unit(kernel) in self._handles

    def _unit(self, kernel):
        return next((u for u in self._units if u is None or kernel in u), self._units[0])

    def get(self, name):
        k = self._kernels.get(name)
        if k is None:
            if name not in self.signatures:
                raise LaunchError(f"no kernel '{name}' in {self.source_name}; it has "
                                  f"{', '.join(self.signatures) or 'none'}")
            k = Kernel(self, name, self.signatures[name])
            if name in self._spread:
                k.spread_blocks()
            self._kernels[name] = k
        return k


class Kernel:
    """One __global__ function with its argument packing prepared (PyCUDA's prepared call)."""

    def __init__(self, module, name, argcodes):
        self.name = name
        self.argcodes = argcodes
        self._module, handle = module, module.handle_for(name)
        self._handle = handle
        self._launch = module.backend.prepare(handle, name, argcodes)
        self._bind = getattr(self._launch, "bind", None)  # the sim's: a geometry's record header packed once
        self._nargs = len(argcodes)
        self._pointer = tuple(c == "P" for c in argcodes)
        self._pointer_at = tuple(i for i, c in enumerate(argcodes) if c == "P")
        self._float = tuple(c in "fd" for c in argcodes)
        limits = module.backend.kernel_limits(handle, name)
        self.max_threads = min(MAX_THREADS_PER_BLOCK, limits["max_threads"])  # fewer when registers run out
        self.static_shared = limits["static_shared"]
        self.max_shared_optin = limits["max_shared_optin"]
        self.max_dynamic_shared = max(0, SHARED_DEFAULT - self.static_shared)
        self._plans = {}  # (grid, block, shared) as given -> (grid, block, bound launch or None); see _plan

    def allow_shared(self, nbytes):
        """Opts this kernel in to `nbytes` of dynamic shared memory per block beyond the default 48 KB
        (up to the device's opt-in limit, e.g. 227 KB on sm_90); returns the kernel."""
        if self.static_shared + nbytes > self.max_shared_optin:
            raise LaunchError(f"kernel '{self.name}': {self.static_shared} B static + {nbytes} B dynamic shared "
                              f"memory exceeds the device's opt-in limit of {self.max_shared_optin} B per block")
        if nbytes > self.max_dynamic_shared:
            self._module.backend.set_max_dynamic_shared(self._handle, self.name, nbytes)
            self.max_dynamic_shared = nbytes
        return self

    def spread_blocks(self):
        """Says each block of this kernel does much work (a sort's tile of thousands of keys): the simulator
        then spreads even a grid of few threads over the CPU's cores, where it runs grids under 4,096
        threads on the calling thread; nothing changes on a GPU. Returns the kernel."""
        self._module.backend.set_spread_blocks(self._handle, self.name)
        return self

    def launch(self, grid, block, *args, shared=0, stream=None, views=False):
        """Runs the kernel on a grid of `grid` blocks of `block` threads (ints or up to 3-tuples) with `args`
        (DeviceArrays, addresses, Python scalars), `shared` bytes of dynamic shared memory, on `stream` (None:
        the current one). k(...) is the same call; launchers on hot paths write k.launch(...), a method call,
        which Python makes without the tuple and dict it builds to call an object (0.3-0.5 us)."""
        try:
            plan = self._plans[grid, block, shared]  # this launch shape, converted and checked before
        except (KeyError, TypeError):                # a new shape, or one given as a list
            plan = self._plan(grid, block, shared)
        if len(args) != self._nargs:
            raise TypeError(f"kernel '{self.name}' takes {len(self.argcodes)} arguments "
                            f"({self.argcodes}), {len(args)} given")
        if plan is None:  # an empty grid: nothing to run
            return
        values = list(args)
        for i in self._pointer_at:
            a = values[i]
            if type(a) is not int:  # an address is passed as it is
                mem = getattr(a, "_mem", None)  # _pointer's answer for a live DeviceArray it takes, inline
                if mem is not None and not mem.freed and (views or a.c_contiguous):
                    values[i] = mem._ptr + a._offset
                else:
                    values[i] = _pointer(a, self.name, views)
        if stream is None:
            stream = _local.stack
            stream = stream[-1] if stream else None  # current_stream(), inline
            if stream is None and plan[2] is not None and not profiler.sessions:
                return plan[2](values)  # the common case: the default stream, a header packed before
        grid, block, _ = plan
        if stream is not None:
            if stream.graph is not None:  # capturing (gpublas.graph): the backend records the launch
                stream.graph.record(args, self._pointer)
                return self._launch(grid, block, shared, stream.handle, values)
            for a, p in zip(args, self._pointer):  # the pool must not hand these blocks to another stream yet
                if p and hasattr(a, "_mem"):
                    a._mem.use_on(stream.handle)
            stream = stream.handle
        if profiler.sessions:  # the profiler's one check: off, launches pay nothing else
            profiler.launch(self, grid, block, shared, stream, values)
        else:
            self._launch(grid, block, shared, stream, values)

    __call__ = launch

    def _plan(self, grid, block, shared):
        """(grid, block, bound) with grid and block as 3-tuples once they pass the limits a GPU checks (bound:
        the backend's launch of that geometry on the default stream where it prepares one, else None), None
        for an empty grid; kept per (grid, block, shared) as the launcher gave them, so a repeated shape costs
        one dict lookup (a refusal is never kept: allow_shared can only make more shapes legal)."""
        key = (grid, block, shared)
        grid, block = _dim3(grid), _dim3(block)
        (gx, gy, gz), (bx, by, bz) = grid, block
        if (bx * by * bz > self.max_threads or bx > 1024 or by > 1024 or bz > 64 or min(bx, by, bz) < 1
                or gx > MAX_GRID[0] or gy > 65535 or gz > 65535 or min(gx, gy, gz) < 0
                or not 0 <= shared <= self.max_dynamic_shared):
            raise LaunchError(self._refusal(grid, block, shared))
        plan = None if min(grid) == 0 else (grid, block, self._bind and self._bind(grid, block, shared))
        if len(self._plans) < MAX_PLANS:
            try:
                self._plans[key] = plan
            except TypeError:  # unhashable (a list): converted again next time
                pass
        return plan

    def _refusal(self, grid, block, shared):
        """Why a GPU would refuse this launch configuration, naming the kernel and the limit."""
        what = f"kernel '{self.name}' (grid {grid}, block {block}, {shared} B dynamic shared memory): "
        threads = block[0] * block[1] * block[2]
        for axis, b, most in zip("xyz", block, MAX_BLOCK):
            if not 1 <= b <= most:
                return what + f"block.{axis} = {b} is outside 1..{most}"
        if threads > self.max_threads:
            why = "the most a block can have" if self.max_threads == MAX_THREADS_PER_BLOCK else \
                "the most this kernel can launch with (its __launch_bounds__ or registers per thread limit it)"
            return what + f"{threads} threads per block exceeds {self.max_threads}, {why}"
        for axis, g, most in zip("xyz", grid, MAX_GRID):
            if not 0 <= g <= most:
                return what + f"grid.{axis} = {g} is outside 0..{most:,} (chunk the launch)"
        if shared < 0:
            return what + "negative shared memory size"
        return what + (f"{self.static_shared} B static + {shared} B dynamic shared memory exceeds "
                       f"{self.static_shared + self.max_dynamic_shared} B per block (above 48 KB, opt in with "
                       "Kernel.allow_shared)")


def _pointer(a, kernel, views=False):
    """A pointer argument's value: a DeviceArray's address, an int, or None (NULL). A non-contiguous
    view is refused unless the launcher says its kernel walks strides (views=True)."""
    if type(a) is int:  # first: an address (GEMM chunks, split-K) costs no AttributeError
        return a
    try:
        mem, offset = a._mem, a._offset  # a DeviceArray: its address without two property calls
    except AttributeError:
        try:
            ptr = a.ptr
        except AttributeError:
            pass
        else:
            if not views and not getattr(a, "c_contiguous", True):
                raise _not_contiguous(a, kernel) from None
            return ptr
    else:
        if mem.freed:
            return mem.ptr  # raises FreedArrayError
        if not views and not a.c_contiguous:
            raise _not_contiguous(a, kernel)
        return mem._ptr + offset
    if a is None:
        return 0
    if isinstance(a, (int, np.integer)):
        return int(a)
    raise TypeError(f"kernel '{kernel}': a pointer argument needs a DeviceArray, got {type(a).__name__}")


def _not_contiguous(a, kernel):
    return LaunchError(f"kernel '{kernel}' was handed a non-contiguous view (shape {a.shape}, strides "
                       f"{a.strides}) but takes flat arrays; pass a.copy()")


_pending = {}  # (backend, module key) -> Future of the Module compiling in the background (prefetch)
_pending_lock = threading.Lock()


def _module_key(text, defines, source_name):
    return text, tuple(sorted((defines or {}).items())), source_name


def load_source(text, defines=None, source_name="<source>", kernel=None):
    """Compiles `text` for the active backend (memoized in the backend object, cached on disk; on the
    sim the unit holding `kernel`, see Module). A compile that prefetch() started is waited for; one it
    only queued is run here at once."""
    backend = backends.current()
    key = _module_key(text, defines, source_name)
    m = backend.modules.get(key)
    if m is not None:
        return m
    with _pending_lock:  # a background job stores its Module before it leaves _pending
        m, future = backend.modules.get(key), _pending.get((backend, key))
    if m is not None:
        return m
    refuse_in_capture(f"compiling {source_name}", "a compile holds the host for seconds; run the work once "
                      "before capturing it (or gpublas.runtime.launch.prebuild())")
    if future is not None and not future.cancel():  # under way: its result (or its CompileError)
        return future.result()
    return _new_module(backend, key, text, defines, source_name, kernel)


def _new_module(backend, key, text, defines, source_name, kernel=None):
    m = backend.modules[key] = Module(text, defines, source_name, backend, kernel)
    cubins.record(text, defines, source_name)  # GPUBLAS_RECORD_MODULES: the modules a run compiles
    return m


def prefetch(jobs, every_unit=False):
    """Starts compiling kernel modules in the background, one per core, so that their first launches
    find them ready: `jobs` is [(family, dtype, root)] as get_kernel names them (root None:
    cuda_src/), or (family, dtype, root, kernel) for the unit holding `kernel` (None: the first), or
    (family, dtype, root, kernel, defines) for a build with get_kernel's defines (sorted (name, value)
    pairs). Returns {job: Future of its Module} for the jobs not already loaded; a failure is kept in
    its Future and raised again by the launch that needs the module. Launches of loaded kernels never
    wait for these compiles. On the sim a job compiles the unit of the family holding its kernel (the
    first unit when it names none), or every unit with every_unit (prebuild)."""
    backend, started, wanted = backends.current(), {}, {}
    for job in dict.fromkeys(jobs):
        family, dtype, root, kernel, extra = (*job, None, None)[:5]
        text, name = source.read(family, root), str(source.path(family, root))
        defines = {"real": _real(dtype, family), **dict(extra or ())}
        w = wanted.setdefault(_module_key(text, defines, name), (text, defines, name, [], []))
        w[3].append(kernel)
        w[4].append(job)
    for key, (text, defines, name, kernels, named_by) in wanted.items():
        with _pending_lock:
            m = backend.modules.get(key)
            if m is not None and (every_unit or all(m.compiled(k) for k in kernels)):
                continue
            future = _pending.get((backend, key))
            if future is None:
                future = _pending[backend, key] = compile_queue.submit(_compile_job, backend, key, text, defines, name,
                                                                          every_unit, tuple(kernels))
                future.add_done_callback(lambda _, k=(backend, key): _forget(k))
        started.update(dict.fromkeys(named_by, future))
    return started


def _compile_job(backend, key, text, defines, source_name, every_unit, kernels=(None,)):
    m = backend.modules.get(key)
    m = m if m is not None else _new_module(backend, key, text, defines, source_name, kernels[0])
    for kernel in kernels:  # the other units asked for (compiled already: nothing to do)
        m.handle_for(kernel)
    return _every_unit(m) if every_unit else m


def _every_unit(m):
    """`m` with every unit of its family compiled (prebuild; the sim compiles a family in units)."""
    for unit in m._units[1:]:
        m.handle_for(unit[0])
    return m


def _forget(pending_key):
    with _pending_lock:
        _pending.pop(pending_key, None)


def get_kernel(family, name, dtype=None, *, root=None, **defines):
    """Kernel `name` of <root>/<family>.cu (root: a folder, default cuda_src/), compiled with `real`
    set to dtype's C type."""
    kernels = backends.current().kernels
    key = (family, name, dtype, root)  # the common case, built cheaply: launches hit it
    if defines:
        key += tuple(sorted(defines.items()))
    k = kernels.get(key)
    if k is None:
        k = kernels[key] = _load_kernel(family, name, dtype, root, defines)
    return k


def _real(dtype, what):
    """The C type `real` stands for with `dtype`; TypeError naming `what` for a dtype no kernel takes."""
    dtype = np.dtype(dtype)
    if dtype not in REAL:
        raise TypeError(f"kernel '{what}': unsupported dtype {dtype}; expected one of {', '.join(map(str, REAL))}")
    return REAL[dtype]


def _load_kernel(family, name, dtype, root, defines):
    if dtype is not None:
        defines["real"] = _real(dtype, name)
    return load_source(source.read(family, root), defines, str(source.path(family, root)), name).get(name)


def prebuild(roots=(None,), dtypes=(np.float32, np.float64), families=None, workers=None, progress=None):
    """Compiles every kernel family under each root (None: cuda_src/) for each dtype, as get_kernel
    would, on the background queue (one compile per core; `workers` is accepted for callers that
    name it). Calls progress(family, dtype name, error) as each job ends. Returns [(family, dtype
    name, None or the first line of its error)] in job order. A fresh GPU machine otherwise spends
    minutes in nvcc during its first tests."""
    from concurrent.futures import CancelledError, as_completed

    jobs = [(family, np.dtype(d), root) for root in roots for family in (families or source.families(root))
            for d in dtypes]
    results, started = {}, {}
    for job in jobs:
        try:
            started.update(prefetch([job], every_unit=True))
        except Exception as e:  # reported, not raised: one bad family must not hide the others
            results[job] = _failure(e)
    done = [j for j in jobs if j not in started]
    for future in as_completed(started.values()):
        done.extend(j for j, f in started.items() if f is future)
    for job in done:
        if job not in results:
            family, dtype, root = job
            try:
                future = started.get(job)
                if future is not None and not future.cancelled():
                    future.result()
                else:  # loaded already, or run by a launch that could not wait (cancelled)
                    _every_unit(load_source(source.read(family, root), {"real": REAL[dtype]},
                                            str(source.path(family, root))))
                results[job] = None
            except (Exception, CancelledError) as e:
                results[job] = _failure(e)
        if progress is not None:
            progress(job[0], job[1].name, results[job])
    return [(family, dtype.name, results[family, dtype, root]) for family, dtype, root in jobs]


def _failure(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
