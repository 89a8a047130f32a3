"""The dropout builds of the fused attention (ATT_DROPOUT=1: dropout_rng.cuh's counter-based draw inside the
loops) compile with nvcc for sm_80 and sm_90 without spills: float and double at their default tiles, 16-bit at
head dim 128 (the most registers a lane). The no-dropout builds are tests/test_nvcc.py's."""
import shutil

import pytest

from nn.kernels import attention as kernels_attention
from nn.kernels import KERNELS as NN_KERNELS
from test_nvcc import test_family_compiles_with_nvcc as compiles_with_nvcc  # not collected here under this name

pytestmark = pytest.mark.nvcc


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("family, real", [("attention", "float"), ("attention", "double"),
                                          ("attention_half", "__nv_bfloat16")])
def test_attention_dropout_builds_compile_without_spills(family, real, tmp_path):
    tiles = kernels_attention.half_tiles(128).defines(128) if family == "attention_half" else {}
    compiles_with_nvcc(NN_KERNELS, family, real, tmp_path, archs=(80, 90), defines={**tiles, "ATT_DROPOUT": 1})
