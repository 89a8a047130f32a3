"""The sim's runtime library (gpublas/runtime/sim/runtime.cpp, sim_build.runtime_library): the block loop is built
once and cached like a module (checksum record, a damaged library rebuilt with one warning line), and a
module holds its kernels and entry points only, which launch through the runtime with the module's own
built-in variables."""
import os

import numpy as np
import pytest

import gpublas
from gpublas.runtime import compiler, launch
from gpublas.runtime.backends import sim, sim_build

pytestmark = pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="sim backend internals")

SRC = r"""
// where: one thread per element of a (2, 3) grid of (4, 2) blocks; each writes its flat thread, block and
// grid coordinates (the module's built-in variables, set by the runtime library).
extern "C" __global__ void where(int* out) {
    int b = blockIdx.x + gridDim.x * blockIdx.y, t = threadIdx.x + blockDim.x * threadIdx.y;
    int i = b * blockDim.x * blockDim.y + t;
    out[3 * i] = t; out[3 * i + 1] = b; out[3 * i + 2] = gridDim.x * gridDim.y * blockDim.x * blockDim.y;
}
"""


def test_a_module_launches_through_the_runtime_with_its_own_built_in_variables():
    m = launch.load_source(SRC, None, "runtime_probe.cu")
    out = gpublas.empty(48 * 3, np.int32)
    m.get("where")((2, 3), (4, 2), out)
    got = out.get().reshape(48, 3)
    np.testing.assert_array_equal(got[:, 0], np.tile(np.arange(8), 6))
    np.testing.assert_array_equal(got[:, 1], np.repeat(np.arange(6), 8))
    assert (got[:, 2] == 48).all()
    lib = m.handle.lib
    assert hasattr(lib, "gpublas_launch_where") and not hasattr(lib, "gpublas_sim_error")  # no runtime inside
    assert hasattr(sim.runtime(), "gpublas_sim_launch")


def test_a_damaged_runtime_library_is_rebuilt(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("GPUBLAS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiler, "_private", None)
    path = sim_build.runtime_library()
    assert path.parent == tmp_path and compiler.check_cached(path) is None
    path.write_bytes(path.read_bytes()[:1000])  # truncated (never loaded by this process)
    assert sim_build.runtime_library() == path and compiler.check_cached(path) is None
    assert "rebuilding" in capfd.readouterr().err
