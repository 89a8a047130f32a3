"""The simulator's cuda_fp16.h / cuda_bf16.h against NVIDIA's, bit for bit: tests/halftypes_headers.cu
is built twice, by nvcc against the CUDA toolkit's headers (their host code paths) and by the host
C++ compiler against gpublas/runtime/sim's, and both runs must write the same bytes: every 16-bit pattern
converted to float, int and bool, negated, |.|, and combined with twelve partners by __hadd __hsub
__hmul __hdiv __hmax __hmin, the operators and comparisons; and 2^20 random float32 / float64 values
(and float64 values within 2^-26 of a float32, the near-ties) and ints of every width rounded to
each type. Needs nvcc on the PATH (no GPU: the program runs on the host)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SIM = HERE.parent / "gpublas" / "runtime" / "sim"


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_sim_half_headers_match_nvidia_bit_for_bit(tmp_path):
    src = HERE / "halftypes_headers.cu"
    cxx = os.environ.get("CXX", "g++")
    builds = {"nvidia": ["nvcc", "-O1", "-std=c++17", str(src), "-o", str(tmp_path / "nvidia")],
              "sim": [cxx, "-O1", "-std=c++17", "-x", "c++", "-I", str(SIM), str(src), "-o", str(tmp_path / "sim")]}
    out = {}
    for name, cmd in builds.items():
        p = subprocess.run(cmd, capture_output=True, text=True)
        assert p.returncode == 0, f"{name} build failed:\n{p.stdout}{p.stderr}"
        out[name] = subprocess.run([str(tmp_path / name)], capture_output=True, check=True).stdout
    assert len(out["sim"]) == len(out["nvidia"]) > 70_000_000
    if out["sim"] != out["nvidia"]:
        first = next(i for i, (a, b) in enumerate(zip(out["sim"], out["nvidia"])) if a != b)
        pytest.fail(f"the simulator's 16-bit types differ from NVIDIA's headers first at byte {first}")
