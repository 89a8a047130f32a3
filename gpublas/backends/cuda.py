"""The `cuda` backend: PyCUDA's driver API on an NVIDIA GPU.

Kernels are compiled by nvcc to a cubin for the device's architecture (GPUBLAS_CUDA_ARCH=sm_90
overrides it; where nvcc does not know the device, the newest virtual architecture it does know is
compiled to PTX and the driver JITs it) and cached on disk by the shared compile path.

The primary context is retained and pushed once; at exit the memory pool is emptied, then the
context popped, so the interpreter exits without "context stack was not empty".
"""
import atexit
import functools
import shutil
import subprocess

import numpy as np

from .. import compiler, source
from ..errors import CompileError, LaunchError
from .base import Backend


@functools.lru_cache(maxsize=None)
def nvcc():
    path = shutil.which("nvcc")
    if not path:
        raise CompileError("the cuda backend needs nvcc on the PATH", "nvcc not found")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    archs = subprocess.run([path, "--list-gpu-arch"], capture_output=True, text=True).stdout.split()
    return path, version, [int(a.split("_")[1]) for a in archs if a.startswith("compute_")]


def nvcc_arch_flags(cc, override=None):
    """-arch flags for compute capability `cc` (e.g. 90): a cubin where nvcc knows the device."""
    if override:
        return [f"-arch={override}"], ".cubin" if override.startswith("sm_") else ".ptx"
    _, _, known = nvcc()
    if cc in known:
        return [f"-arch=sm_{cc}"], ".cubin"
    older = [a for a in known if a <= cc]
    if not older:
        raise CompileError(f"nvcc knows no architecture at or below sm_{cc}", " ".join(map(str, known)))
    return [f"-arch=compute_{max(older)}"], ".ptx"


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, device=0):
        import os

        import pycuda.driver as drv

        super().__init__()
        self.drv = drv
        drv.init()
        if drv.Device.count() == 0:
            raise RuntimeError("no CUDA device")
        self.device = drv.Device(device)
        self.context = self.device.retain_primary_context()
        self.context.push()
        self.arch_override = os.environ.get("GPUBLAS_CUDA_ARCH")
        major, minor = self.device.compute_capability()
        self.cc = major * 10 + minor
        self._live = {}
        atexit.register(self.close)

    def close(self):
        if self.context is None:
            return
        self.pool.close()
        self.context.synchronize()
        for alloc in self._live.values():  # arrays still alive at exit: free while the context is current
            alloc.free()
        self._live.clear()
        self.context.pop()
        self.context = None

    def device_info(self):
        a = self.drv.device_attribute
        return {"name": self.device.name(), "compute_capability": f"{self.cc // 10}.{self.cc % 10}",
                "multiprocessors": self.device.get_attribute(a.MULTIPROCESSOR_COUNT),
                "total_memory": self.device.total_memory(), "backend": "cuda"}

    def synchronize(self):
        self.context.synchronize()

    def mem_alloc(self, nbytes):
        try:
            alloc = self.drv.mem_alloc(nbytes)
        except self.drv.MemoryError as e:
            raise MemoryError(nbytes) from e
        self._live[int(alloc)] = alloc  # the pool owns it from here; mem_free releases it
        return int(alloc)

    def mem_free(self, ptr):
        self._live.pop(ptr).free()

    def pinned_alloc(self, nbytes):
        return self.drv.pagelocked_empty(max(nbytes, 1), np.uint8)

    def htod(self, dst, src, nbytes, stream=None):
        host = _host_view(src, nbytes)
        if stream is None:
            self.drv.memcpy_htod(dst, host)
        else:
            self.drv.memcpy_htod_async(dst, host, stream)

    def dtoh(self, dst, src, nbytes, stream=None):
        host = _host_view(dst, nbytes)
        if stream is None:
            self.drv.memcpy_dtoh(host, src)
        else:
            self.drv.memcpy_dtoh_async(host, src, stream)

    def dtod(self, dst, src, nbytes, stream=None):
        if stream is None:
            self.drv.memcpy_dtod(dst, src, nbytes)
        else:
            self.drv.memcpy_dtod_async(dst, src, nbytes, stream)

    def memset_d8(self, dst, byte, nbytes, stream=None):
        if stream is None:
            self.drv.memset_d8(dst, byte, nbytes)
        else:
            self.drv.memset_d8_async(dst, byte, nbytes, stream)

    def stream_create(self):
        return self.drv.Stream()

    def stream_synchronize(self, stream):
        stream.synchronize()

    def event_create(self):
        return self.drv.Event()

    def event_record(self, event, stream=None):
        event.record(stream)

    def event_synchronize(self, event):
        event.synchronize()

    def event_elapsed_ms(self, start, end):
        return start.time_till(end)

    def compile(self, text, defines, source_name):
        path, version, _ = nvcc()
        arch, suffix = nvcc_arch_flags(self.cc, self.arch_override)
        flags = ["-O3", "-std=c++17", *arch, *[f"-D{k}={v}" for k, v in sorted((defines or {}).items())]]

        def build(src, out):
            kind = "-cubin" if suffix == ".cubin" else "-ptx"
            cmd = [path, kind, *flags, "-I", str(source.src_dir()), str(src), "-o", str(out)]
            compiler.run_compiler(cmd, what=f"the cuda backend ({arch[0]})", output=out, source_name=source_name)

        body = f'#line 1 "{source_name}"\n' + text
        binary = compiler.compile_cached(body, key_parts=[source.headers_digest(), " ".join(flags), version],
                                         suffix=suffix, build=build, source_name=source_name)
        return self.drv.module_from_file(str(binary))

    def prepare(self, module, name, argcodes):
        try:
            func = module.get_function(name)
        except self.drv.LogicError:
            raise LaunchError(f"no kernel '{name}' in the module") from None
        func.prepare(argcodes)
        call = func.prepared_async_call

        def launch(grid, block, shared, stream, args):
            call(grid, block, stream, *args, shared_size=shared)

        return launch


def _host_view(address, nbytes):
    """A NumPy byte view of host memory at `address` (PyCUDA copies take buffer objects)."""
    import ctypes
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address)) if nbytes else np.empty(0, np.uint8)
