"""The dropout builds of the fused attention (ATT_DROPOUT=1: dropout_rng.cuh's counter-based draw inside the
loops) compile with nvcc for sm_80 and sm_90 without spills: float and double at their default tiles, 16-bit at
head dim 128 (the most registers a lane). The no-dropout builds are tests/test_nvcc.py's."""
import shutil

import numpy as np
import pytest

from nn.kernels import attention as kernels_attention
from nn.kernels import KERNELS as NN_KERNELS
from test_nvcc import test_family_compiles_with_nvcc as compiles_with_nvcc  # not collected here under this name

pytestmark = pytest.mark.nvcc


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("family, real", [("attention", "float"), ("attention", "double"),
                                          ("attention_half", "__nv_bfloat16")])
def test_attention_dropout_builds_compile_without_spills(family, real):
    tiles = kernels_attention.half_tiles(128).defines(128) if family == "attention_half" else {}
    compiles_with_nvcc(NN_KERNELS, family, real, archs=(80, 90), defines={**tiles, "ATT_DROPOUT": 1})


# The builds nearest the 255-register cap (nvcc 13, sm_90a, as the cuda backend builds for an H100 / H200): float
# D = 128 forward with dropout (254 registers), float backward D = 64 with dropout (254), attention_half forward with
# dropout (254 at D = 128). No spill stores or loads (ptxas -v), so an edit that pushes one over the cap fails here.
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("family, real, D", [("attention", "float", 128), ("attention", "float", 64),
                                             ("attention_half", "__half", 128)])
def test_attention_dropout_builds_near_the_register_cap_for_sm_90a(family, real, D):
    tiles = (kernels_attention.half_tiles(D) if family == "attention_half"
             else kernels_attention.gpu_tiles(np.float32, D)).defines(D)
    compiles_with_nvcc(NN_KERNELS, family, real, archs=("90a",), defines={**tiles, "ATT_DROPOUT": 1})
