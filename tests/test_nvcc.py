"""Every kernel family compiles with nvcc for real GPU architectures (sm_80 and sm_90), in float
and double, so CUDA-only mistakes surface on machines without a GPU. Registers and spills from
`ptxas -v` go to the test log (pytest -s, or the captured output of a failure)."""
import re
import shutil
import subprocess

import pytest

from gpublas import source

pytestmark = pytest.mark.nvcc
FAMILIES = sorted(p.stem for p in source.src_dir().glob("*.cu"))
_ENTRY = re.compile(r"Function properties for (\w+)\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores")
_REGS = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+)'.*?Used (\d+) registers", re.S)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("real", ["float", "double"])
@pytest.mark.parametrize("family", FAMILIES)
def test_family_compiles_with_nvcc(family, real, tmp_path):
    cmd = ["nvcc", "-fatbin", "-std=c++17", "-O3", "-Xptxas", "-v",
           "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
           f"-Dreal={real}", "-I", str(source.src_dir()), str(source.path(family)),
           "-o", str(tmp_path / f"{family}.fatbin")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    log = p.stdout + p.stderr
    assert p.returncode == 0, f"nvcc failed for {family}.cu (real={real}):\n{log}"
    kernels = set(source.kernel_signatures(source.read(family), {"real": real}))
    compiled = {m.group(1) for m in _REGS.finditer(log)}
    assert kernels <= compiled, f"kernels missing from the nvcc build: {kernels - compiled}"
    for name, arch, regs in _REGS.findall(log):
        print(f"{family}.cu real={real} {arch} {name}: {regs} registers")
    spills = [(n, int(s)) for n, _, s in _ENTRY.findall(log) if int(s)]
    if spills:
        print(f"{family}.cu real={real}: spill stores {spills}")
