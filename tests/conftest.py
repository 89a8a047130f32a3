"""Test setup: the sim backend unless GPUBLAS_BACKEND says otherwise, with its memcheck on; one
OpenMP thread per pytest worker under xdist (the workers already use the cores); `sim_orders` runs
a test under two thread orders; `cuda`-marked tests skip cleanly where the cuda backend cannot start."""
import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("GPUBLAS_BACKEND", "sim")
# The simulator's memcheck (guard pages around every allocation): a kernel that reads or writes
# past an array fails its test with IllegalAddressError naming kernel, block and thread, instead
# of corrupting memory or killing the worker. It costs no measurable time (BLAS + nn tests).
os.environ.setdefault("GPUBLAS_SIM_MEMCHECK", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import gpublas  # noqa: E402


def _cuda_available():
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count() > 0
    except Exception:
        return False


CUDA = _cuda_available()


def _torch_cpu_bf16():
    """Whether PyTorch's CPU build has its AVX-512 kernels here: without them oneDNN has no bfloat16 LSTM
    primitive ("could not create a primitive descriptor") and its bfloat16 conv backward rounds otherwise
    (17 ulps from the AVX-512 result on an AMD EPYC with AVX2 only), so bit-level bf16 parity has no peer."""
    try:
        import torch
    except ImportError:
        return True  # the tests skip for torch themselves
    return torch.backends.cpu.get_cpu_capability().startswith("AVX512")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs the cuda backend: PyCUDA and an NVIDIA GPU")
    bf16 = None
    for item in items:
        if "cuda" in item.keywords and not CUDA:
            item.add_marker(skip)
        if "torch_bf16" in item.keywords:
            bf16 = _torch_cpu_bf16() if bf16 is None else bf16
            if not bf16:
                item.add_marker(pytest.mark.skip(reason="PyTorch's bfloat16 CPU kernels need AVX-512 here "
                                                        "(conftest._torch_cpu_bf16)"))


@pytest.fixture(params=["forward", "reverse"])
def sim_order(request):
    """Runs the test under two simulator thread orders (a no-op parameter on the cuda backend)."""
    if gpublas.backend() == "sim":
        gpublas.sim_thread_order(request.param)
        yield request.param
        gpublas.sim_thread_order(os.environ.get("GPUBLAS_SIM_ORDER", "forward"))
    else:
        yield request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def torch_seeded():
    """nn's and PyTorch's generators seeded with 0 (the torch parity tests: both sides' init and dropout start from
    known states). Skips where PyTorch is not installed."""
    torch = pytest.importorskip("torch")
    import nn
    nn.manual_seed(0)
    torch.manual_seed(0)


@pytest.fixture
def leaf(monkeypatch):
    """The triangular and symmetric routines' recursion LEAF set to 4, so that small matrices run several levels
    of it (a test file's own `leaf` fixture, where it has one, takes precedence)."""
    from gpublas.blas import blas3_tri
    monkeypatch.setattr(blas3_tri, "LEAF", 4)
