"""The sim's precompiled header (backends/sim_pch.py): the first module a process compiles starts its
build in the background, later modules use it, and the code they get is the code the plain headers give;
a damaged, deleted or altered one is noticed and rebuilt (one warning line for a damaged one) while
modules go on compiling from the headers; GPUBLAS_SIM_PCH=0 leaves it out. One cache directory for the
whole file: the header is built once (about three module compiles)."""
import shutil
import time
import subprocess
import uuid

import numpy as np
import pytest

import gpublas
from gpublas.runtime import compile_queue, compiler, launch
from gpublas.runtime.backends import sim_build, sim_pch

pytestmark = pytest.mark.skipif(gpublas.backend() != "sim", reason="the sim backend's compile step")

# tanhf: the simulator header renames it (#pragma redefine_extname), which must survive precompiling
SOURCE = r'''
extern "C" __global__ void pch_probe_{tag}(float* y, int n) {{
    __shared__ float s[64];
    s[threadIdx.x] = tanhf((float)threadIdx.x / 64.f);
    __syncthreads();
    if (threadIdx.x < n) y[threadIdx.x] = s[63 - threadIdx.x] + {tag}.f;
}}
'''


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        root = tmp_path_factory.mktemp("pch-cache")
        mp.setenv("GPUBLAS_CACHE_DIR", str(root))
        mp.setattr(compiler, "_private", None)
        mp.delenv("GPUBLAS_SIM_PCH", raising=False)
        yield root


def _module(tag):
    """Compiles a probe kernel of its own (a new module), checks what it computes; returns (module, its g++
    command)."""
    cmds = []
    run = compiler.run_compiler

    def spying(cmd, **kw):
        cmds.append(cmd)
        return run(cmd, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiler, "run_compiler", spying)
        m = launch.load_source(SOURCE.format(tag=tag), None, f"pch_probe_{tag}.cu")
    y = gpublas.zeros(64, np.float32)
    m.get(f"pch_probe_{tag}")(1, 64, y, 64)
    expect = np.tanh(np.arange(64)[::-1] / 64.0).astype(np.float32) + tag
    np.testing.assert_allclose(y.get(), expect, rtol=2e-6)
    return m, [c for c in cmds if "-include" in c][-1]


def _included(cmd):
    return cmd[cmd.index("-include") + 1]


def _gch(cache):
    (gch,) = cache.glob("gpublas_sim-*.h.gch")
    return gch


def _tag():
    return uuid.uuid4().int % 100000


def test_modules_use_the_header_once_it_is_built_and_get_the_same_code(cache, monkeypatch):
    fresh = not list(cache.glob("*.gch"))
    _, first = _module(_tag())
    assert _included(first) == str(sim_build.HEADER) or not fresh  # not ready yet: the plain headers
    sim_pch.wait()
    gch = _gch(cache)
    assert compiler.check_cached(gch) is None and gch.with_suffix("").is_file()
    tag = _tag()
    m, cmd = _module(tag)
    assert _included(cmd) == str(gch.with_suffix("")) and "-Winvalid-pch" in cmd
    assert not sim_build._refused  # g++ said nothing about the header: it used it
    if shutil.which("objdump") is None:
        return
    with_pch = m.handle.lib._name
    monkeypatch.setenv("GPUBLAS_SIM_PCH", "0")
    monkeypatch.setenv("GPUBLAS_CACHE_DIR", str(cache / "plain"))
    plain = gpublas._current_backend().compile(SOURCE.format(tag=tag), None, f"pch_probe_{tag}.cu")

    def code(lib):
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", lib], capture_output=True, text=True).stdout
        return out.split("\n", 2)[2]  # after the file name line
    assert code(with_pch) == code(plain.lib._name)
    assert "gpublas_sim_tanhf" in subprocess.run(["nm", with_pch], capture_output=True, text=True).stdout


@pytest.mark.parametrize("damage", ["truncate", "stub"])
def test_a_damaged_header_is_rebuilt_while_modules_compile_without_it(cache, capfd, damage):
    _module(_tag())
    sim_pch.wait()
    gch = _gch(cache)
    capfd.readouterr()
    if damage == "truncate":  # (a deleted one is rebuilt as the first one was built)
        gch.write_bytes(gch.read_bytes()[:1000])
    else:
        gch.with_suffix("").write_text("#error not the simulator header\n")
    _, cmd = _module(_tag())  # noticed: the plain headers, and a rebuild starts
    assert _included(cmd) == str(sim_build.HEADER)
    sim_pch.wait()
    assert compiler.check_cached(_gch(cache)) is None and "#include" in gch.with_suffix("").read_text()
    _, cmd = _module(_tag())
    assert _included(cmd) == str(gch.with_suffix(""))
    err = capfd.readouterr().err
    assert err.count("rebuilding") == (damage == "truncate"), err


def test_it_can_be_turned_off(cache, monkeypatch):
    monkeypatch.setenv("GPUBLAS_SIM_PCH", "0")
    assert sim_pch.include("g++", [], ["k"], sim_build.HEADER) == sim_build.HEADER


def test_a_background_batch_waits_for_the_header_a_launch_does_not(cache, monkeypatch, tmp_path):
    """The first module a launch waits for compiles beside the header's build; the first of a background
    batch (nn.prefetch's compile_queue threads) waits for the header and takes it (a stand-in build:
    the decision, not g++)."""
    stub = tmp_path / "stub.h"

    def build(key, cxx, flags, key_parts, header):
        time.sleep(0.2)
        with sim_pch._lock:
            sim_pch._ready[key] = stub
    monkeypatch.setattr(sim_pch, "_build", build)
    monkeypatch.setattr(sim_pch, "_intact", lambda s: s == stub)
    tag = str(_tag())
    assert sim_pch.include("g++", [], ["launch", tag], sim_build.HEADER) == sim_build.HEADER
    assert compile_queue.submit(sim_pch.include, "g++", [], ["batch", tag], sim_build.HEADER).result() == stub
    assert sim_pch.include("g++", [], ["launch", tag], sim_build.HEADER) == stub  # the next one waits
