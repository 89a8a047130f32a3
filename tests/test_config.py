"""Bad configuration fails in one line: every GPUBLAS_* variable and CXX is checked where it is read,
and the message names the variable, its value and what is allowed; uncaught, it is that one line on
stderr (no traceback through gpublas' internals) and exit status 1. Run in subprocesses."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpublas
from conftest import CUDA

ROOT = Path(__file__).resolve().parent.parent
USE = "import gpublas; gpublas.ones(3).get()"  # a fill kernel: compiles (CXX) and runs (sim variables)


def run(code, **env):
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "GPUBLAS_BACKEND": "sim", **env}
    environ = {k: v for k, v in environ.items() if v is not None}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)


@pytest.mark.parametrize("name, value, allowed", [
    ("GPUBLAS_SIM_ORDER", "bogus", "forward or reverse or random"),
    ("GPUBLAS_SIM_MEMORY", "1G", "whole number of bytes"),
    ("GPUBLAS_SIM_SEED", "x", "whole number"),
    ("GPUBLAS_SIM_MEMCHECK", "maybe", "1 or 0"),
    ("GPUBLAS_SIM_FISSION", "2", "1 or 0"),
    ("GPUBLAS_SIM_STACK_KB", "8", "KiB (at least 16)"),
    ("GPUBLAS_BACKEND", "gpu", "cuda or sim"),
    ("CXX", "/nonexistent/g++", "no such executable"),
    ("GPUBLAS_PROFILE", "/nonexistent/profile.json", "does not exist"),
])
def test_bad_value_fails_in_one_line(name, value, allowed):
    p = run(USE, **{name: value})
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"gpublas: {name}={value!r}: ") and allowed in lines[0], lines[0]


@pytest.mark.skipif(CUDA, reason="the cuda backend starts here")
def test_cuda_backend_unavailable_is_one_line():
    p = run("import gpublas; print(gpublas.device_info())", GPUBLAS_BACKEND="cuda")
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1, p.stderr
    assert lines[0].startswith("gpublas: GPUBLAS_BACKEND=cuda: the cuda backend cannot start (") and "sim" in lines[0]


def test_good_values_and_caught_errors():
    p = run("import gpublas; print(gpublas.ones(2).get().sum())", GPUBLAS_SIM_ORDER="Reverse",
            GPUBLAS_SIM_MEMORY=str(1 << 30), GPUBLAS_SIM_MEMCHECK="yes", GPUBLAS_SIM_SEED="7")
    assert p.returncode == 0 and p.stdout.strip() == "2.0", p.stderr
    p = run("import gpublas\ntry:\n    gpublas.zeros(1)\nexcept ValueError as e:\n    print(type(e).__name__, e)",
            GPUBLAS_SIM_MEMORY="-5")  # catchable, as a ValueError
    assert p.returncode == 0 and p.stdout.strip().startswith("ConfigError GPUBLAS_SIM_MEMORY='-5'"), p.stderr


def test_cuda_arch_pattern(monkeypatch):
    """GPUBLAS_CUDA_ARCH (read by the cuda backend) must name an nvcc architecture."""
    config = gpublas.config
    for good in ("sm_90a", "sm_80", "compute_80"):
        monkeypatch.setenv("GPUBLAS_CUDA_ARCH", good)
        assert config.pattern("GPUBLAS_CUDA_ARCH", r"(sm|compute)_\d+[af]?", "an architecture") == good
    monkeypatch.setenv("GPUBLAS_CUDA_ARCH", "hopper")
    with pytest.raises(gpublas.ConfigError, match=r"^GPUBLAS_CUDA_ARCH='hopper': expected an architecture$"):
        config.pattern("GPUBLAS_CUDA_ARCH", r"(sm|compute)_\d+[af]?", "an architecture")
