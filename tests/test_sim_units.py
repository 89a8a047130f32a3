"""Units of a family on the sim (source.sim_units, sim_build.build_module's `kernels`): a family whose source
names units is compiled one unit at a time, as one of its kernels is first launched; each unit is a library
of its own in the cache (its checksum record, its memo, rebuilt when damaged) that holds its own kernels'
code only; a prefetch compiles the first unit; every unit launches as the whole family did."""
import ctypes
import os

import numpy as np
import pytest

import gpublas
from gpublas.runtime import compiler, launch, source
from gpublas.runtime.backends import sim_build

pytestmark = pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="sim backend internals")

SRC = r"""
// add_one, twice, negate: one thread per element, no barrier.
// sim unit: twice
extern "C" __global__ void add_one(real* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}
extern "C" __global__ void twice(real* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 2;
}
extern "C" __global__ void negate(real* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = -x[i];
}
"""
DEFINES = {"real": "float"}


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return tmp_path_factory.mktemp("units")


@pytest.fixture
def cache(shared, monkeypatch):
    """One cache directory for the module's tests (its precompiled header is built once), fresh modules."""
    monkeypatch.setenv("GPUBLAS_CACHE_DIR", str(shared / "cache"))
    monkeypatch.delenv("GPUBLAS_SIM_FISSION_DUMP", raising=False)
    monkeypatch.setattr(compiler, "_private", None)
    monkeypatch.setattr(gpublas.runtime.backends.current(), "modules", {})
    return shared / "cache"


def _entries(handle):
    return {k for k in ("add_one", "twice", "negate") if hasattr(handle.lib, f"gpublas_launch_{k}")}


def _run(m, name, x):
    d = gpublas.to_device(x)
    m.get(name)(1, 32, d, len(x))
    return d.get()


def test_units_are_read_from_the_source():
    kernels = ["add_one", "twice", "negate"]
    assert source.sim_units(SRC, kernels) == [("twice",), ("add_one", "negate")]
    assert source.sim_units(SRC.replace("// sim unit: twice", ""), kernels) == [tuple(kernels)]
    every = SRC.replace("// sim unit: twice", "// sim unit: twice negate add_one")
    assert source.sim_units(every, kernels) == [("twice", "negate", "add_one")]  # nothing left for a last unit
    for bad in ("// sim unit: twice thrice", "// sim unit: twice twice", "// sim unit:"):
        with pytest.raises(LookupError, match="sim unit"):
            source.sim_units(SRC.replace("// sim unit: twice", bad), kernels)


@pytest.mark.parametrize("root", [None, "nn"])
def test_every_family_names_its_own_kernels(root):
    folder = source.src_dir().parent / "nn" / "cuda" if root else None
    for family in source.families(folder):
        text = source.read(family, folder)
        units = source.sim_units(text, list(source.kernel_signatures(text, {"real": "float"})))
        assert units and all(units), family


def test_a_launch_compiles_its_own_unit_only(cache):
    m = launch.load_source(SRC, DEFINES, "units.cu", "negate")
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(_run(m, "negate", x), -x)
    assert _entries(m.handle) == {"add_one", "negate"} and len(list(cache.glob("units-*.so"))) == 1
    np.testing.assert_array_equal(_run(m, "twice", x), 2 * x)
    assert _entries(m.get("twice")._handle) == {"twice"}
    assert len(list(cache.glob("units-*.so"))) == 2 and len(list(cache.glob("units-*.front.json"))) == 2
    # the unit's library holds the code of its own kernels only (dialect.h: a kernel is inline)
    lib = ctypes.CDLL(str(next(p for p in cache.glob("units-*.so") if str(p) != m.handle.lib._name)))
    assert not hasattr(lib, "gpublas_launch_negate")


def test_a_damaged_unit_is_rebuilt_and_a_whole_family_differs_from_its_units(cache, monkeypatch, capfd):
    m = launch.load_source(SRC, DEFINES, "damaged.cu", "twice")
    (lib,) = cache.glob("damaged-*.so")
    lib.unlink()  # a new file: the loaded one stays mapped
    lib.write_bytes(b"garbage")  # a later process finds it damaged
    monkeypatch.setattr(gpublas.runtime.backends.current(), "modules", {})
    m = launch.load_source(SRC, DEFINES, "damaged.cu", "twice")
    assert "rebuilding" in capfd.readouterr().err and compiler.check_cached(lib) is None
    np.testing.assert_array_equal(_run(m, "twice", np.ones(3, np.float32)), [2, 2, 2])
    path, _, _ = sim_build.build_module(SRC, DEFINES, "damaged.cu")  # no unit: every kernel, a library of its own
    assert path != lib and compiler.check_cached(path) is None


def test_a_prefetch_compiles_the_first_unit(cache, tmp_path):
    (tmp_path / "fam_units.cu").write_text(SRC)
    (future,) = launch.prefetch([("fam_units", np.dtype(np.float32), tmp_path)]).values()
    m = future.result(120)
    assert _entries(m.handle) == {"twice"} and len(list(cache.glob("fam_units-*.so"))) == 1
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_run(m, "add_one", x), x + 1)
    assert len(list(cache.glob("fam_units-*.so"))) == 2


def test_prebuild_compiles_every_unit(cache, tmp_path):
    (tmp_path / "fam_all.cu").write_text(SRC)
    assert launch.prebuild(roots=(tmp_path,), dtypes=(np.float32,), families=["fam_all"]) == [
        ("fam_all", "float32", None)]
    assert len(list(cache.glob("fam_all-*.so"))) == 2
