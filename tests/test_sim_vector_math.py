"""gpublas/runtime/sim/vector_math.h's run functions (exp, tanh, sigmoid of 16 floats, in quarters of 4 doubles)
give, bit for bit, the formula computed lane by lane in scalar doubles: tests/sim_vector_math.cpp, built with
the simulator's flags (-O3 -march=native -ffp-contract=off), on edge values and 2^20 random bit patterns."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SIM = HERE.parent / "gpublas" / "runtime" / "sim"
CXX = os.environ.get("CXX", "g++")


@pytest.mark.skipif(shutil.which(CXX) is None, reason=f"{CXX} is not on the PATH")
def test_vector_exp_tanh_sigmoid_bits_match_the_scalar_formula(tmp_path):
    exe = tmp_path / "vm"
    cmd = [CXX, "-O3", "-march=native", "-ffp-contract=off", "-std=c++17", "-w", "-I", str(SIM),
           str(HERE / "sim_vector_math.cpp"), "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"mismatches (\d+) of (\d+)", out)
    assert m and int(m.group(2)) > 3 << 20, out
    assert m.group(1) == "0", out
