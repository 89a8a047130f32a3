"""A non-editable install finds cuda_src/, nn/cuda/ and the simulation header from site-packages."""
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_non_editable_install_ships_kernel_sources(tmp_path):
    target = tmp_path / "site"
    # Without network (a GPU machine), build with what is installed; else let pip isolate the build.
    offline = importlib.util.find_spec("wheel") is not None and importlib.util.find_spec("setuptools") is not None
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                        *(["--no-build-isolation"] if offline else []), str(ROOT)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    shipped = {h.name for h in (target / "gpublas" / "runtime" / "sim").glob("*.[hc]*")}
    assert "gpublas_sim.h" in shipped and shipped == {h.name for h in (ROOT / "gpublas" / "runtime" / "sim").glob("*.[hc]*")}, shipped
    code = textwrap.dedent("""
        import numpy as np, gpublas
        from gpublas.runtime import source
        assert str(source.src_dir()).startswith(%r), source.src_dir()
        assert (source.src_dir() / "memory.cu").exists()
        import nn
        from nn import kernels
        assert str(kernels.KERNELS).startswith(%r) and (kernels.KERNELS / "conv.cu").exists()
        a = gpublas.full((5,), 2.0, np.float32)
        kernels.act_forward(a, a, kernels.act_code("relu"))  # an nn kernel, compiled from site-packages
        print(gpublas.__file__, a.get().sum())
        """ % (str(target), str(target)))
    env = dict(os.environ, PYTHONPATH=str(target), GPUBLAS_BACKEND="sim",
               GPUBLAS_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert str(target) in p.stdout and p.stdout.strip().endswith("10.0")
