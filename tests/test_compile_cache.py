"""The on-disk kernel cache survives faults: bad cached modules are rebuilt (one warning line), the
temporary file lives in the cache directory itself, and an unwritable cache falls back to a private
directory. The unit tests drive compile_cached with a Python `build`; the last test loads a
truncated shared library through the sim backend in a fresh process (it used to die of SIGBUS). A
cache directory deleted while g++ runs is recreated and the module built again."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpublas.runtime import compiler
from gpublas.runtime.errors import GpublasError


class Builder:
    """A `build(src, out)` that writes a module of known bytes and remembers where it wrote."""

    def __init__(self, payload=b"\x7fELF module body " * 64):
        self.payload, self.calls = payload, []

    def __call__(self, src, out):
        self.calls.append((Path(src), Path(out)))
        Path(out).write_bytes(self.payload)


def _compile(build, name="fam.cu"):
    return compiler.compile_cached("source text", key_parts=["k"], suffix=".so", build=build, source_name=name)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUBLAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "_private", None)
    return tmp_path / "cache"


def test_a_module_is_built_once_inside_the_cache_directory(cache):
    build = Builder()
    out = _compile(build)
    assert out.parent == cache and out.read_bytes() == build.payload
    src, tmp_out = build.calls[0]
    assert tmp_out.parent == cache and src.parent == cache  # same filesystem as the target: no st_dev guess
    assert _compile(build) == out and len(build.calls) == 1
    assert sorted(p.name for p in cache.iterdir()) == [out.name, out.name + ".sha256"]  # no temporaries left


@pytest.mark.parametrize("damage, says", [
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "544 bytes where 1088 were written"),
    (lambda p: p.write_bytes(b""), "0 bytes where 1088 were written"),
    (lambda p: p.write_bytes(b"garbage!" * 136), "corrupted"),
])
def test_a_bad_cached_module_is_rebuilt_with_one_warning(cache, capfd, damage, says):
    build = Builder()
    out = _compile(build)
    damage(out)
    assert _compile(build) == out and len(build.calls) == 2
    assert out.read_bytes() == build.payload and compiler.check_cached(out) is None
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "rebuilding" in err[0]


def test_an_unrecorded_module_is_rebuilt_quietly(cache, capfd):
    build = Builder()
    out = _compile(build)
    Path(str(out) + ".sha256").unlink()  # as an older gpublas left it
    _compile(build)
    assert len(build.calls) == 2 and compiler.check_cached(out) is None and capfd.readouterr().err == ""


def test_a_failed_build_leaves_no_temporaries(cache):
    def fail(src, out):
        Path(out).write_bytes(b"half")
        raise compiler.CompileError("compile failed", "log")

    with pytest.raises(compiler.CompileError):
        _compile(fail)
    assert not any(cache.iterdir())


def test_an_unwritable_cache_builds_privately_and_says_so_once(tmp_path, monkeypatch, capfd):
    blocker = tmp_path / "a file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GPUBLAS_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(compiler, "_private", None)
    build = Builder()
    first, second = _compile(build, "a.cu"), _compile(build, "b.cu")
    assert first.parent == second.parent != blocker / "cache" and first.read_bytes() == build.payload
    assert _compile(build, "a.cu") == first and len(build.calls) == 2  # found again in the private dir
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be written" in err[0] and str(first.parent) in err[0]


def test_truncated_shared_library_is_rebuilt_not_loaded(tmp_path):
    code = textwrap.dedent("""
        import numpy as np, gpublas
        from gpublas.runtime.launch import load_source
        m = load_source('extern "C" __global__ void seven(float* y) { y[threadIdx.x] = 7.f; }', None, "cachecheck.cu")
        y = gpublas.zeros((32,), np.float32)
        m.get("seven")(1, 32, y)
        print(y.get().sum())
        """)
    env = dict(os.environ, GPUBLAS_CACHE_DIR=str(tmp_path), GPUBLAS_BACKEND="sim")
    run = lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)  # noqa: E731
    p = run()
    assert p.returncode == 0 and p.stdout.strip() == "224.0", p.stderr
    (lib,) = tmp_path.glob("cachecheck-*.so")
    lib.write_bytes(lib.read_bytes()[: lib.stat().st_size // 2])
    p = run()
    assert p.returncode == 0 and p.stdout.strip() == "224.0", p.stderr
    assert "cachecheck" in p.stderr and "rebuilding" in p.stderr


class VanishingBuilder(Builder):
    """Deletes the cache directory, then compiles `src` with g++ through compiler.run_compiler (as the
    sim backend does), on its first `vanish` calls: g++ finds neither its source nor its output's
    directory."""

    def __init__(self, cache, vanish):
        super().__init__()
        self.cache, self.vanish = cache, vanish

    def __call__(self, src, out):
        if len(self.calls) < self.vanish:
            self.calls.append((Path(src), Path(out)))
            shutil.rmtree(self.cache)
            compiler.run_compiler(["g++", "-shared", "-x", "c++", str(src), "-o", str(out)], what="a test",
                                  output=out, source_name="fam.cu")
        super().__call__(src, out)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_cache_deleted_during_a_compile_is_recreated_and_the_module_built_again(cache, capfd):
    build = VanishingBuilder(cache, vanish=1)
    out = _compile(build)
    assert len(build.calls) == 2 and out.read_bytes() == build.payload and compiler.check_cached(out) is None
    assert sorted(p.name for p in cache.iterdir()) == [out.name, out.name + ".sha256"]
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vanished" in err[0] and str(cache) in err[0] and "g++" not in err[0]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_cache_deleted_during_every_compile_is_one_line_not_the_compilers_error(cache):
    with pytest.raises(GpublasError) as info:
        _compile(VanishingBuilder(cache, vanish=2))
    assert not isinstance(info.value, compiler.CompileError)
    message = str(info.value)
    assert "\n" not in message and "vanished twice" in message and str(cache) in message and "g++" not in message
