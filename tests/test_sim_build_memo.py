"""The sim's front-end memo (backends/sim_build.py): a module whose library is cached loads without
running the Python front end again; a memo that is damaged, names a missing or corrupt library, or was
made for other defines is never trusted, and the module built from scratch launches the same."""
import json
import os

import numpy as np
import pytest

import gpublas
from gpublas.runtime import compiler
from gpublas.runtime.backends import sim_build

pytestmark = pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="sim backend internals")

SRC = r"""
// reverse_tile: one thread per element of a 32-element tile, reversed through shared memory (a barrier:
// the front end rewrites it as loops over the block's threads). scale: one thread per element, no barrier.
extern "C" __global__ void reverse_tile(const real* x, real* y) {
    __shared__ real t[32];
    t[threadIdx.x] = x[blockIdx.x * 32 + threadIdx.x];
    __syncthreads();
    y[blockIdx.x * 32 + threadIdx.x] = t[31 - threadIdx.x] * (real)SCALE;
}
extern "C" __global__ void scale(real* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= (real)SCALE;
}
"""
DEFINES = {"real": "float", "SCALE": "3"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory, without the precompiled header (tests/test_sim_pch.py's subject): its build
    in every test's new directory cost more CPU than the few modules here save with it."""
    monkeypatch.setenv("GPUBLAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUBLAS_SIM_PCH", "0")
    monkeypatch.delenv("GPUBLAS_SIM_FISSION_DUMP", raising=False)
    monkeypatch.setattr(compiler, "_private", None)
    return tmp_path / "cache"


@pytest.fixture
def front_ends(monkeypatch):
    """Counts the front end's runs (the part the memo saves)."""
    calls, real = [], sim_build._front_end_and_build

    def counted(*args):
        calls.append(args[2])
        return real(*args)
    monkeypatch.setattr(sim_build, "_front_end_and_build", counted)
    return calls


def _memo(cache):
    (memo,) = cache.glob("*.front.json")
    return memo


def test_a_cached_module_loads_without_the_front_end(cache, front_ends):
    first = sim_build.build_module(SRC, DEFINES, "memo.cu")
    path, barrier, report = first
    assert barrier == {"reverse_tile"} and report == {"reverse_tile": None}  # fissioned
    assert json.loads(_memo(cache).read_text())["library"] == str(path)
    assert sim_build.build_module(SRC, DEFINES, "memo.cu") == first
    assert front_ends == ["memo.cu"]  # the second build read the memo
    sim_build.build_module(SRC, dict(DEFINES, SCALE="5"), "memo.cu")  # other defines: another memo
    assert front_ends == ["memo.cu"] * 2 and len(list(cache.glob("*.front.json"))) == 2


@pytest.mark.parametrize("damage", [
    lambda memo, lib: memo.write_text("{not json"),
    lambda memo, lib: memo.write_text("[1, 2]"),
    lambda memo, lib: memo.write_text(json.dumps({"library": str(lib), "barrier": [], "report": {"k": 3}})),
    lambda memo, lib: memo.write_text(memo.read_text().replace(lib.name, "gone.so")),
    lambda memo, lib: lib.write_bytes(lib.read_bytes()[:100]),  # a truncated library: rebuilt, not loaded
])
def test_a_damaged_memo_or_library_is_not_trusted(cache, front_ends, damage):
    first = sim_build.build_module(SRC, DEFINES, "memo.cu")
    damage(_memo(cache), first[0])
    again = sim_build.build_module(SRC, DEFINES, "memo.cu")
    assert front_ends == ["memo.cu"] * 2 and again == first and compiler.check_cached(again[0]) is None
    assert sim_build.build_module(SRC, DEFINES, "memo.cu") == first and len(front_ends) == 2  # memo mended


def test_fission_dumps_run_the_front_end(cache, front_ends, tmp_path, monkeypatch):
    sim_build.build_module(SRC, DEFINES, "memo.cu")
    monkeypatch.setenv("GPUBLAS_SIM_FISSION_DUMP", str(tmp_path / "dump"))
    sim_build.build_module(SRC, DEFINES, "memo.cu")
    assert len(front_ends) == 2 and (tmp_path / "dump" / "memo.cu.fission.txt").read_text() == "reverse_tile: fissioned\n"


def test_a_module_loaded_from_the_memo_launches_like_a_fresh_one(cache, front_ends, monkeypatch):
    x = np.arange(64, dtype=np.float32)
    outs = []
    for _ in range(2):
        monkeypatch.setattr(gpublas.runtime.backends.current(), "modules", {})  # as a new process: load it again
        m = gpublas.runtime.launch.load_source(SRC, DEFINES, "memo.cu")
        y = gpublas.empty(64, np.float32)
        m.get("reverse_tile")(2, 32, gpublas.to_device(x), y)
        outs.append(y.get())
    assert len(front_ends) == 1
    want = x.reshape(2, 32)[:, ::-1].reshape(-1) * 3
    np.testing.assert_array_equal(outs[0], want)
    np.testing.assert_array_equal(outs[1], want)
