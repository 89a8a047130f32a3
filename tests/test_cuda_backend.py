"""The cuda backend's bookkeeping, tested as plain Python where it needs no GPU (per-thread
contexts with a stand-in context, the toolkit-vs-driver decision, error messages, host views), and
on a GPU where it does (`cuda`-marked tests: a launch from a second thread, named kernel faults and
a clean exit after one)."""
import os
import subprocess
import sys
import textwrap
import threading
import types

import numpy as np
import pytest

from gpublas.runtime.backends import cuda
from gpublas.runtime.backends.cuda import ThreadContexts, describe_launch, fault_message, nvcc_release, toolkit_problem


class StandInContext:
    """Records push/pop with the thread that made each, as PyCUDA's per-thread stack sees them."""

    def __init__(self):
        self.log, self.stacks = [], {}

    def push(self):
        self.log.append(("push", threading.get_ident()))
        self.stacks[threading.get_ident()] = self.stacks.get(threading.get_ident(), 0) + 1

    def pop(self):
        self.log.append(("pop", threading.get_ident()))
        self.stacks[threading.get_ident()] -= 1


def test_each_thread_pushes_once_and_pops_when_it_ends():
    ctx = StandInContext()
    contexts = ThreadContexts(ctx.push, ctx.pop)

    def work():
        for _ in range(3):
            contexts.enter()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ctx.log) == 6 and set(ctx.stacks.values()) == {0}  # every thread left an empty stack
    for i in range(0, 6, 2):
        assert ctx.log[i][0] == "push" and ctx.log[i + 1] == ("pop", ctx.log[i][1])  # popped by its pusher
    contexts.enter()
    contexts.enter()
    assert ctx.stacks[threading.get_ident()] == 1
    contexts.close()  # the closing thread pops its own push; a second close does nothing
    contexts.close()
    assert ctx.stacks[threading.get_ident()] == 0 and len(ctx.log) == 8


def test_nvcc_release_and_toolkit_against_driver():
    assert nvcc_release("Build cuda_13.0.r13.0/compiler.36424714_0") == (13, 0)
    assert nvcc_release("Cuda compilation tools, release 12.4, V12.4.131") == (12, 4)
    assert toolkit_problem(13000, (13, 0), ptx=False) is None
    assert toolkit_problem(13020, (13, 0), ptx=True) is None  # an older toolkit always loads
    assert toolkit_problem(12040, (12, 6), ptx=False) is None  # cubins: minor version compatibility
    assert "cannot JIT" in toolkit_problem(12040, (12, 6), ptx=True)
    assert "nvcc 13.0 is newer than the driver's CUDA 12.4" in toolkit_problem(12040, (13, 0), ptx=False)


def _stand_in_device(driver_version):
    """What CudaBackend._check_toolkit reads: the device's cc, an arch override and the driver."""
    return types.SimpleNamespace(cc=90, arch_override=None,
                                 drv=types.SimpleNamespace(get_driver_version=lambda: driver_version))


def test_backend_refuses_a_toolkit_the_driver_cannot_load_or_a_missing_nvcc(monkeypatch):
    cuda.nvcc.cache_clear()
    try:
        if cuda.shutil.which("nvcc"):
            release = nvcc_release(cuda.nvcc()[1])
            old = (release[0] - 1) * 1000 + 90
            with pytest.raises(cuda.CudaUnavailable, match="newer than the driver's"):
                cuda.CudaBackend._check_toolkit(_stand_in_device(old))
            cuda.CudaBackend._check_toolkit(_stand_in_device(release[0] * 1000 + release[1] * 10))
        monkeypatch.setenv("PATH", "/nonexistent")
        cuda.nvcc.cache_clear()
        with pytest.raises(cuda.CudaUnavailable, match="needs nvcc on the PATH.*CUDA_ROOT/bin"):
            cuda.CudaBackend._check_toolkit(_stand_in_device(13000))
    finally:
        cuda.nvcc.cache_clear()


def _run(code, **env):
    full = {k: v for k, v in os.environ.items() if k != "GPUBLAS_BACKEND"}
    full.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full)


def test_cuda_asked_for_explicitly_raises_instead_of_falling_back():
    try:
        import pycuda.driver  # noqa: F401
        pytest.skip("PyCUDA imports here; the refusal needs a machine without it")
    except ImportError:
        pass
    p = _run("import gpublas; gpublas.backend()", GPUBLAS_BACKEND="cuda")
    assert p.returncode != 0 and "CudaUnavailable" in p.stderr and "pip install '.[cuda]'" in p.stderr
    p = _run("import gpublas; print(gpublas.backend())")
    assert p.stdout.strip() == "sim" and "cuda backend unavailable" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_fault_messages_name_the_launch():
    launch = ("gemm_tiled", (4, 70000, 1), (16, 16, 1), 0)
    assert describe_launch(launch) == ("kernel 'gemm_tiled' (grid (4, 70000, 1), block (16, 16, 1), "
                                       "0 B dynamic shared memory)")
    blocking = fault_message("an illegal memory access was encountered", launch, blocking=True)
    assert blocking.startswith("kernel 'gemm_tiled' (grid (4, 70000, 1)") and blocking.endswith("encountered")
    later = fault_message("an illegal memory access was encountered", launch, blocking=False)
    assert "the last launch was kernel 'gemm_tiled'" in later and "GPUBLAS_LAUNCH_BLOCKING=1" in later
    assert "no kernel had been launched" in fault_message("out of resources", None, blocking=False)


def test_host_view_aliases_memory_without_a_ctypes_type_per_size():
    host = np.arange(40, dtype=np.uint8)
    for n in (1, 7, 40):
        view = cuda._host_view(host.ctypes.data, n)
        assert view.dtype == np.uint8 and view.shape == (n,) and view.ctypes.data == host.ctypes.data
        assert not isinstance(view.base, __import__("ctypes").Array)
    view[3] = 200
    assert host[3] == 200
    assert cuda._host_view(0, 0).size == 0


@pytest.mark.cuda
def test_launches_from_a_second_thread_and_a_clean_exit():
    p = _run("""
        import threading, numpy as np, gpublas
        out = {}
        def work(tag):
            x = gpublas.to_device(np.arange(1000, dtype=np.float32))
            out[tag] = float(gpublas.sum(x * 2.0)), (gpublas.to_device(np.ones((40, 30), np.float32))
                                                      @ gpublas.to_device(np.ones((30, 20), np.float32))).get()
        t = threading.Thread(target=work, args=("first",))  # the backend is made in a thread that ends
        t.start(); t.join()
        work("main")
        t = threading.Thread(target=work, args=("again",)); t.start(); t.join()
        assert all(v[0] == 999000.0 and (v[1] == 30).all() for v in out.values()), out
        print("ok", len(out))
        """, GPUBLAS_BACKEND="cuda")
    assert p.returncode == 0 and p.stdout.strip() == "ok 3", p.stderr
    assert "context stack" not in p.stderr


FAULT = """
    import numpy as np, gpublas
    from gpublas.runtime.launch import load_source
    k = load_source('extern "C" __global__ void write_null(float* p) { p[threadIdx.x + (1 << 20)] = 1.f; }',
                    None, "fault.cu").get("write_null")
    try:
        k(3, 32, 0)
        gpublas.synchronize()
    except gpublas.LaunchError as e:
        print("LaunchError:", e)
"""


@pytest.mark.cuda
@pytest.mark.parametrize("blocking", ["1", "0"])
def test_kernel_fault_names_the_kernel_and_exit_stays_clean(blocking):
    p = _run(FAULT, GPUBLAS_BACKEND="cuda", GPUBLAS_LAUNCH_BLOCKING=blocking)
    assert p.returncode == 0, p.stderr  # no abort: close() popped the context after the fault
    assert "LaunchError: " in p.stdout and "write_null" in p.stdout and "grid (3, 1, 1)" in p.stdout, p.stdout
    if blocking == "0":
        assert "GPUBLAS_LAUNCH_BLOCKING=1" in p.stdout
    assert "context stack" not in p.stderr and "Traceback" not in p.stderr
