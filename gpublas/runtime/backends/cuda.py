"""The `cuda` backend: PyCUDA's driver API on an NVIDIA GPU.

Kernels are compiled by nvcc to a cubin for the device's architecture (GPUBLAS_CUDA_ARCH=sm_90
overrides it; where nvcc does not know the device, the newest virtual architecture it does know is
compiled to PTX and the driver JITs it) and cached on disk by the shared compile path. The backend
refuses to start (and gpublas falls back to sim unless cuda was asked for) when nvcc is missing or
builds for a newer CUDA than the driver can load.

Contexts: the device's primary context is retained once and made current per thread, on the first
call from each thread (PyCUDA keeps one context stack per thread); it is popped when that thread
ends, and for the closing thread at exit, so no thread leaves a pushed context behind (PyCUDA aborts
the process when one does).

Faults: a kernel fault surfaces at the next call that waits on the device. The error then names the
last kernel launched; GPUBLAS_LAUNCH_BLOCKING=1 (like CUDA_LAUNCH_BLOCKING) synchronizes after every
launch, so the error names the kernel that failed, with its grid and block. close() reports a fault
in one line and still pops the context, so the interpreter exits cleanly.

Device: GPUBLAS_DEVICE (an ordinal) when set, else, under an MPI launcher, the node-local rank
(one rank per GPU), else device 0.
"""
import atexit
import functools
import os
import re
import shutil
import subprocess
import sys
import threading

import numpy as np

from .. import compiler, config, cubins, dtypes, source
from ..errors import CompileError, ConfigError, LaunchError
from . import cuda_graph
from .base import Backend


class CudaUnavailable(RuntimeError):
    """The cuda backend cannot run here (no PyCUDA, device, nvcc, or a toolkit the driver can load)."""


@functools.lru_cache(maxsize=None)
def nvcc():
    """(path, version line, [compute capabilities it knows]) of the nvcc on the PATH."""
    path = shutil.which("nvcc")
    if not path:
        raise CompileError("the cuda backend needs nvcc on the PATH", "nvcc not found")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    archs = subprocess.run([path, "--list-gpu-arch"], capture_output=True, text=True).stdout.split()
    return path, version, [int(a.split("_")[1]) for a in archs if a.startswith("compute_")]


def nvcc_release(version_line):
    """(major, minor) from nvcc's version line, e.g. 'Build cuda_13.0.r13.0/compiler...' -> (13, 0)."""
    m = re.search(r"(?:release |cuda_|V)(\d+)\.(\d+)", version_line)
    if not m:
        raise CudaUnavailable(f"cannot read a CUDA version from nvcc's '{version_line}'")
    return int(m.group(1)), int(m.group(2))


def toolkit_problem(driver_version, release, ptx):
    """Why kernels built by a toolkit of `release` (major, minor) would not load on a driver whose
    cuDriverGetVersion() is `driver_version` (e.g. 12040 for 12.4), or None when they would. Cubins
    load within the driver's major version (minor version compatibility); PTX is JIT-compiled by
    the driver, which must then be at least as new as the toolkit."""
    driver = (driver_version // 1000, driver_version % 1000 // 10)
    newer = f"nvcc {release[0]}.{release[1]} is newer than the driver's CUDA {driver[0]}.{driver[1]}"
    if release[0] > driver[0]:
        return f"{newer}: its kernels will not load; update the driver or put an older toolkit's nvcc on the PATH"
    if ptx and release > driver:
        return f"{newer} and this device needs PTX, which the driver cannot JIT; update the driver"
    return None


# Devices whose cubins are built with their architecture-specific features (sm_90a: wgmma, used by
# gemm_tf32.cu's wgmma kernels; nvcc 12.0 or newer): such a cubin runs on that compute capability only,
# which is all a runtime-compiled kernel is ever built for.
ARCH_SPECIFIC = {90: "sm_90a"}


def nvcc_arch_flags(cc, override=None):
    """-arch flags for compute capability `cc` (e.g. 90): a cubin where nvcc knows the device (sm_90a
    for 9.0, ARCH_SPECIFIC)."""
    if override:
        return [f"-arch={override}"], ".cubin" if override.startswith("sm_") else ".ptx"
    _, version, known = nvcc()
    if cc in known:
        specific = cc in ARCH_SPECIFIC and nvcc_release(version) >= (12, 0)
        return [f"-arch={ARCH_SPECIFIC[cc] if specific else f'sm_{cc}'}"], ".cubin"
    older = [a for a in known if a <= cc]
    if not older:
        raise CompileError(f"nvcc knows no architecture at or below sm_{cc}", " ".join(map(str, known)))
    return [f"-arch=compute_{max(older)}"], ".ptx"


class ThreadContexts:
    """One context made current in every thread that uses it: `enter()` pushes it on a thread's
    first call; the push is undone by `_Pushed.__del__` when that thread ends (CPython clears a
    thread's locals in the thread itself) or by `close()` for the calling thread."""

    def __init__(self, push, pop):
        self._push, self._pop = push, pop
        self._local = threading.local()

    def enter(self):
        if getattr(self._local, "pushed", None) is None:
            self._local.pushed = _Pushed(self._push, self._pop)

    def close(self):
        """Pops the calling thread's push, if it made one."""
        pushed = self._local.__dict__.pop("pushed", None)
        if pushed is not None:
            pushed.release()


class _Pushed:
    __slots__ = ("_pop", "_thread")

    def __init__(self, push, pop):
        push()
        self._pop, self._thread = pop, threading.get_ident()

    def release(self):
        pop, self._pop = self._pop, None
        if pop is not None and threading.get_ident() == self._thread:
            pop()

    def __del__(self):
        try:
            self.release()
        except Exception:  # a dying thread has no one to tell
            pass


def describe_launch(launch):
    """'kernel 'k' (grid (g), block (b), n B dynamic shared memory)' for a (name, grid, block, shared)."""
    if launch is None:
        return "no kernel had been launched"
    name, grid, block, shared = launch
    return f"kernel '{name}' (grid {tuple(grid)}, block {tuple(block)}, {shared} B dynamic shared memory)"


def fault_message(error, last_launch, blocking):
    """The message of a device error seen after launches: the error, then the launch that likely
    caused it and how to be sure."""
    if blocking:
        return f"{describe_launch(last_launch)} failed: {error}"
    return (f"CUDA error: {error}; the last launch was {describe_launch(last_launch)} (errors from a kernel "
            "show at a later call: set GPUBLAS_LAUNCH_BLOCKING=1 to name the failing launch)")


def _named_faults(method):
    """Turns a PyCUDA error inside `method` into a LaunchError that names the last launch."""
    @functools.wraps(method)
    def call(self, *args):
        self.contexts.enter()
        try:
            return method(self, *args)
        except self.drv.Error as e:
            if isinstance(e, self.drv.MemoryError):
                raise
            raise LaunchError(fault_message(e, self.last_launch, False)) from e
    return call


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, device=None):
        try:
            import pycuda.driver as drv
        except ImportError as e:
            raise CudaUnavailable(f"the cuda backend needs PyCUDA ({e}): pip install '.[cuda]', see README's "
                                  "GPU section") from None
        super().__init__()
        self.drv = drv
        drv.init()
        if drv.Device.count() == 0:
            raise CudaUnavailable("no CUDA device")
        self.device = drv.Device(device_ordinal(drv.Device.count()) if device is None else device)
        self.arch_override = config.pattern("GPUBLAS_CUDA_ARCH", r"(sm|compute)_\d+[af]?",
                                            "an nvcc architecture such as sm_90a, sm_80 or compute_80")
        major, minor = self.device.compute_capability()
        self.cc = major * 10 + minor
        self._check_toolkit()
        self.blocking = config.flag("GPUBLAS_LAUNCH_BLOCKING", False)
        self.last_launch = None  # (name, grid, block, shared) of the latest launch, for error messages
        self._live = {}
        self._capturing = set()  # streams capturing a graph: GPUBLAS_LAUNCH_BLOCKING must not sync them
        self.context = self.device.retain_primary_context()
        self.contexts = ThreadContexts(self.context.push, drv.Context.pop)
        self.contexts.enter()
        self._closed = False
        self._cubins = None  # gpublas.runtime.cubins.Prebuilt, made on the first compile
        atexit.register(self.close)

    def _check_toolkit(self):
        try:
            _, version, _ = nvcc()
            flags, suffix = nvcc_arch_flags(self.cc, self.arch_override)
        except CompileError as e:
            raise CudaUnavailable(str(e).splitlines()[0] + " (install the CUDA toolkit or put $CUDA_ROOT/bin on "
                                  "the PATH)") from None
        self.target = flags[0].split("=", 1)[1]  # what kernels are built for: sm_90a, sm_80, compute_80 (PTX)
        problem = toolkit_problem(self.drv.get_driver_version(), nvcc_release(version), suffix == ".ptx")
        if problem:
            raise CudaUnavailable(problem)

    def close(self):
        """Frees what is left and pops this thread's context; reports a device fault in one line
        instead of raising, so the interpreter always exits cleanly."""
        if self._closed:
            return
        self._closed = True
        try:
            self.contexts.enter()
            self.drv.Context.synchronize()
        except Exception as e:
            print(f"gpublas: at exit, {fault_message(e, self.last_launch, False)}", file=sys.stderr)
        try:
            try:
                self.pool.close()
            finally:
                for alloc in self._live.values():  # arrays still alive at exit: free while the context is current
                    try:
                        alloc.free()
                    except Exception:  # the context died with a fault: nothing left to free
                        pass
                self._live.clear()
        except Exception:
            pass
        finally:
            self.contexts.close()

    def device_info(self):
        a = self.drv.device_attribute
        return {"name": self.device.name(), "compute_capability": f"{self.cc // 10}.{self.cc % 10}",
                "multiprocessors": self.device.get_attribute(a.MULTIPROCESSOR_COUNT),
                "total_memory": self.device.total_memory(), "backend": "cuda"}

    @_named_faults
    def synchronize(self):
        self.drv.Context.synchronize()

    def mem_alloc(self, nbytes):
        self.contexts.enter()
        try:
            alloc = self.drv.mem_alloc(nbytes)
        except self.drv.MemoryError as e:
            raise MemoryError(nbytes) from e
        self._live[int(alloc)] = alloc  # the pool owns it from here; mem_free releases it
        return int(alloc)

    @_named_faults
    def mem_free(self, ptr):
        self._live.pop(ptr).free()

    @_named_faults
    def pinned_alloc(self, nbytes):
        return self.drv.pagelocked_empty(max(nbytes, 1), np.uint8)

    def mapped_alloc(self, nbytes):
        self.contexts.enter()
        host = self.drv.pagelocked_zeros(max(nbytes, 1), np.uint8, mem_flags=self.drv.host_alloc_flags.DEVICEMAP)
        return host, int(host.base.get_device_pointer())

    @_named_faults
    def htod(self, dst, src, nbytes, stream=None):
        host = _host_view(src, nbytes)
        if stream is None:
            self.drv.memcpy_htod(dst, host)
        else:
            self.drv.memcpy_htod_async(dst, host, stream)

    @_named_faults
    def dtoh(self, dst, src, nbytes, stream=None):
        host = _host_view(dst, nbytes)
        if stream is None:
            self.drv.memcpy_dtoh(host, src)
        else:
            self.drv.memcpy_dtoh_async(host, src, stream)

    @_named_faults
    def dtod(self, dst, src, nbytes, stream=None):
        if stream is None:
            self.drv.memcpy_dtod(dst, src, nbytes)
        else:
            self.drv.memcpy_dtod_async(dst, src, nbytes, stream)

    @_named_faults
    def memset_d8(self, dst, byte, nbytes, stream=None):
        if stream is None:
            self.drv.memset_d8(dst, byte, nbytes)
        else:
            self.drv.memset_d8_async(dst, byte, nbytes, stream)

    @_named_faults
    def stream_create(self):
        return self.drv.Stream()

    @_named_faults
    def stream_synchronize(self, stream):
        stream.synchronize()

    # graphs: the driver's stream capture (cuda_graph.py)
    @_named_faults
    def capture_stream_create(self):  # the first gpublas call of a new thread may be gpublas.graph()
        return self.drv.Stream(cuda_graph.NON_BLOCKING)

    def capture_begin(self, stream):
        self.contexts.enter()
        cuda_graph.driver().begin(stream)
        self._capturing.add(stream)

    def capture_end(self, stream):
        self._capturing.discard(stream)
        return cuda_graph.driver().end(stream)

    def graph_launch(self, graph, stream=None, timed=False):
        self.contexts.enter()
        cuda_graph.driver().launch(graph, stream)

    def graph_destroy(self, graph):
        if self._closed:  # a graph alive at exit: its context is gone with close(); pushing it again aborts
            return
        self.contexts.enter()
        cuda_graph.driver().destroy(graph)

    @_named_faults
    def event_create(self):
        return self.drv.Event()

    @_named_faults
    def event_record(self, event, stream=None):
        event.record(stream)

    @_named_faults
    def event_synchronize(self, event):
        event.synchronize()

    @_named_faults
    def event_query(self, event):
        return event.query()

    @_named_faults
    def event_elapsed_ms(self, start, end):
        return start.time_till(end)

    def compile(self, text, defines, source_name):
        self.contexts.enter()
        path, version, _ = nvcc()
        arch, suffix = nvcc_arch_flags(self.cc, self.arch_override)
        flags = cubins.nvcc_flags(arch[0].split("=", 1)[1], defines)
        body = cubins.module_body(text, source_name)
        prebuilt = self._prebuilt().lookup(body, flags, source_name) if suffix == ".cubin" else None
        if prebuilt is not None:
            try:
                return self.drv.module_from_file(str(prebuilt))
            except self.drv.Error as e:
                self._prebuilt().failed(prebuilt, e)

        def build(src, out):
            kind = "-cubin" if suffix == ".cubin" else "-ptx"
            cmd = [path, kind, *flags, "-I", str(source.src_dir()), str(src), "-o", str(out)]
            compiler.run_compiler(cmd, what=f"the cuda backend ({arch[0]})", output=out, source_name=source_name)

        binary = compiler.compile_cached(body, key_parts=[source.headers_digest(), " ".join(flags), version],
                                         suffix=suffix, build=build, source_name=source_name)
        return self.drv.module_from_file(str(binary))

    def _prebuilt(self):
        """The $GPUBLAS_CUBIN_DIR folder of cubins built ahead (gpublas.runtime.cubins), read once."""
        if self._cubins is None:
            v = self.drv.get_driver_version()
            self._cubins = cubins.Prebuilt(os.environ.get("GPUBLAS_CUBIN_DIR"), self.target, v // 1000)
        return self._cubins

    def _function(self, module, name):
        self.contexts.enter()
        try:
            return module.get_function(name)
        except self.drv.LogicError:
            raise LaunchError(f"no kernel '{name}' in the module") from None

    def kernel_limits(self, module, name):
        func, attr = self._function(module, name), self.drv.function_attribute
        optin = self.device.get_attribute(self.drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        return {"max_threads": func.get_attribute(attr.MAX_THREADS_PER_BLOCK),
                "static_shared": func.get_attribute(attr.SHARED_SIZE_BYTES), "max_shared_optin": optin}

    def set_max_dynamic_shared(self, module, name, nbytes):
        self._function(module, name).set_attribute(self.drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)

    def prepare(self, module, name, argcodes):
        func = self._function(module, name)
        fmt, _, _, complex_at = dtypes.pack_layout(argcodes, "")  # complex scalars: padded, as two parts
        func.prepare(fmt)
        call, enter, error, backend = func.prepared_async_call, self.contexts.enter, self.drv.Error, self
        sync = self.drv.Context.synchronize if self.blocking else None

        def launch(grid, block, shared, stream, args):
            if complex_at:
                args = dtypes.split_complex(args, complex_at)
            enter()
            backend.last_launch = (name, grid, block, shared)
            try:
                call(grid, block, stream, *args, shared_size=shared)
                if sync is not None and stream not in backend._capturing:
                    cuda_graph.sync_beside_captures(backend, stream, sync)
            except error as e:
                raise LaunchError(fault_message(e, backend.last_launch, True)) from e

        return launch


LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")


def device_ordinal(count):
    """GPUBLAS_DEVICE if set (checked against the `count` devices); else the node-local rank that an
    MPI launcher exports, modulo count (one rank per GPU); else 0."""
    wanted = os.environ.get("GPUBLAS_DEVICE", "").strip()
    if wanted:
        if not wanted.isdigit() or int(wanted) >= count:
            raise ConfigError(f"GPUBLAS_DEVICE={wanted!r}: expected a device ordinal below {count}")
        return int(wanted)
    local = next((os.environ[v] for v in LOCAL_RANK_VARS if os.environ.get(v, "").isdigit()), "0")
    return int(local) % count


def _host_view(address, nbytes):
    """A NumPy byte view of host memory at `address` (PyCUDA copies take buffer objects), made
    through the array interface: no ctypes array type per size (ctypes would keep each forever)."""
    return np.asarray(_HostMemory(address, nbytes))


class _HostMemory:
    __slots__ = ("__array_interface__",)

    def __init__(self, address, nbytes):
        self.__array_interface__ = {"data": (address or 0, False), "shape": (nbytes,), "typestr": "|u1",
                                    "version": 3}
