"""Every kernel family compiles with nvcc for real GPU architectures (sm_90a in float; sm_80 too for the families
whose code branches between the two, ARCH_BRANCHED; sm_90a in double for the families listed in DOUBLE), so
CUDA-only mistakes surface on machines without a GPU. Registers and spills from
`ptxas -v` go to the test log (pytest -s, or the captured output of a failure); no kernel may spill. Each build is
one cubin of benchmarks/sass.py's, cached beside the kernel cache: test_sass.py, test_sass_blas.py and the sass
benchmark read the same sm_90a builds (one nvcc run per family, type and architecture in the whole suite)."""
import re
import shutil

import pytest

from benchmarks import sass
from gpublas.runtime import source
from nn.kernels import KERNELS as NN_KERNELS

pytestmark = pytest.mark.nvcc
# (root, family) for gpublas' kernels in cuda_src/ and nn's in nn/cuda/; ids read "blas1", "nn/conv"
FAMILIES = [(None, f) for f in source.families()] + [(NN_KERNELS, f) for f in source.families(NN_KERNELS)]


def _id(root, family):
    """A family's test id: "blas1" for cuda_src/, "nn/conv" for nn/cuda/."""
    return family if root is None else f"nn/{family}"


IDS = [_id(root, f) for root, f in FAMILIES]
_ENTRY = re.compile(r"Function properties for (\w+)\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores, "
                    r"(\d+) bytes spill loads")
_REGS = re.compile(r"Compiling entry function '(\w+)' for '(sm_\d+a?)'.*?Used (\d+) registers", re.S)


# double builds only for the families whose double code differs from their float code beyond the type
# (DFMA main loops and their tiles, 64-bit atomics and shuffles, radix digits of 64-bit keys, the float64
# step counter): elsewhere the float build covers the same source (elementwise's double build alone took
# 12 s of nvcc in CI's suite)
DOUBLE = {"gemm", "gemm_v2", "reduce", "blas1", "sort", "getrf", "nn/attention", "nn/optim"}


def _arch_branched(root, family):
    """Whether the family's code (with its headers) differs between sm_80 and sm_90a: an `__CUDA_ARCH__ >= N`
    branch with N above 800 (mma.cuh's wgmma and async-proxy fence: the GEMMs on tensor cores, attention_half)."""
    text = source.with_includes(source.read(family, root))
    return any(int(n) > 800 for n in re.findall(r"__CUDA_ARCH__\s*>=\s*(\d+)", text))


# sm_80 float builds only where sm_80 compiles other code than sm_90a: elsewhere the same source for an older
# target (elementwise's took 20 s of nvcc in the suite); the sm_80 builds of test_array_dtypes_compile_with_nvcc
# and test_nn_16bit_kernels_compile_with_nvcc still put most families through sm_80 in another type
ARCH_BRANCHED = {i for (root, f), i in zip(FAMILIES, IDS) if _arch_branched(root, f)}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("root, family, real", [(r, f, real) for (r, f), i in zip(FAMILIES, IDS)
                                                for real in ("float", "double") if real == "float" or i in DOUBLE],
                         ids=[f"{i}-{real}" for i in IDS for real in ("float", "double") if real == "float" or i in DOUBLE])
def test_family_compiles_with_nvcc(root, family, real, archs=None, defines=None):
    # float for sm_90 (the registers of what the cuda backend builds for an H100 / H200: sm_90a, wgmma kernels
    # included) and, for the ARCH_BRANCHED families, sm_80 (the older target catches a missing feature guard);
    # double for sm_90 only, the same source with another type (half the nvcc time of two targets). A failed
    # build raises CompileError with nvcc's log.
    archs = archs or ((80, 90) if real == "float" and _id(root, family) in ARCH_BRANCHED else (90,))
    log = "".join(sass.build(family, real, f"sm_{a}", root, defines)[1] for a in archs)
    kernels = set(source.kernel_signatures(source.read(family, root), {"real": real}))
    compiled = {m.group(1) for m in _REGS.finditer(log)}
    assert kernels <= compiled, f"kernels missing from the nvcc build: {kernels - compiled}"
    for name, arch, regs in _REGS.findall(log):
        print(f"{family}.cu real={real} {arch} {name}: {regs} registers")
    spills = [(n, int(s), int(ld)) for n, _, s, ld in _ENTRY.findall(log) if int(s) or int(ld)]
    assert not spills, f"{family}.cu real={real}: kernels spill registers (bytes of spill stores, loads): {spills}"


# The other element types the array layer builds: int32, int64 and uint64 arithmetic, bitwise operators and
# comparisons (elementwise; int8 ... uint32 compute in int32 or int64), astype into int8 ... uint64 (memory),
# int reductions (int64 sums), astype and copies into every dtype (memory), 16-bit floats (maps,
# reductions, casts, transposes, the simulator's GEMMs), index arrays (gather), a mask's prefix sum (scan) and complex
# numbers (maps, sums, casts, level 1 and 2, geam and dgmm, the triangle kernels of the symmetric
# and triangular routines, batched LU).
# These build for sm_80 only, the older target and so the one that catches a missing feature guard: the
# float/double builds above cover sm_90's register allocation, and tests/test_sass.py builds gemm_half's
# 16-bit kernels for sm_90a in bfloat16 (half the nvcc time of two targets; gemm_half in __half here, so each
# 16-bit type gets one build). Left out as the same code with a wider or another type (7-20 s of nvcc each):
# elementwise in long long (int and unsigned long long cover the integer paths), cdouble (cfloat covers
# complex) and __half (16-bit floats are loaded as float and rounded on store, the same maps as bfloat16's;
# memory.cu's and reduce.cu's __half builds cover its conversions).
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("family, real", [("elementwise", "int"), ("reduce", "long long"),
                                          ("memory", "bool"), ("memory", "unsigned char"), ("memory", "__half"),
                                          ("memory", "__nv_bfloat16"),
                                          ("elementwise", "__nv_bfloat16"), ("reduce", "__half"),
                                          ("reduce", "__nv_bfloat16"), ("transpose", "__nv_bfloat16"),
                                          ("gemm_half", "__half"),
                                          ("gemm", "__half"), ("gemm", "__nv_bfloat16"),
                                          ("gather", "long long"),
                                          ("gather", "bool"), ("scan", "bool"), ("memory", "cfloat"),
                                          ("memory", "cdouble"), ("elementwise", "cfloat"),
                                          ("reduce", "cfloat"), ("reduce", "cdouble"),
                                          ("blas1", "cfloat"), ("blas1", "cdouble"),
                                          ("gemv", "cfloat"), ("gemv", "cdouble"), ("geam", "cfloat"),
                                          ("geam", "cdouble"), ("triangular", "cfloat"), ("triangular", "cdouble"),
                                          ("getrf", "cfloat"), ("getrf", "cdouble"), ("sort", "unsigned char"),
                                          ("sort", "unsigned short"), ("cumulative", "long long"),
                                          ("cumulative", "__half"), ("cumulative", "cfloat"), ("memory", "signed char"),
                                          ("memory", "short"), ("memory", "unsigned short"), ("memory", "unsigned int"),
                                          ("memory", "unsigned long long"), ("elementwise", "unsigned long long"),
                                          ("reduce", "unsigned long long"), ("gather", "signed char")])
def test_array_dtypes_compile_with_nvcc(family, real):
    test_family_compiles_with_nvcc(None, family, real, archs=(80,))


def test_every_include_resolves_in_cuda_src():
    """Both compilers get `-I cuda_src/` only, and the compile cache key digests cuda_src/*.cuh: so every
    quoted #include of every kernel file (cuda_src/ and nn/cuda/) must name a header there."""
    assert len(FAMILIES) >= 14 and any(root is not None for root, _ in FAMILIES) and DOUBLE <= set(IDS)
    for root, family in FAMILIES:
        for name in re.findall(r'#include\s+"([^"]+)"', source.read(family, root)):
            assert (source.src_dir() / name).is_file(), f"{source.path(family, root)} includes {name!r}"


def test_arch_branched_families_are_found():
    """The sm_80 float builds follow ARCH_BRANCHED: the tensor-core families must be in it (a pattern that stopped
    matching would drop their sm_80 builds silently), the plain ones not."""
    assert {"gemm_v2", "gemm_tf32", "gemm_half", "nn/attention_half"} <= ARCH_BRANCHED
    assert not {"elementwise", "reduce", "memory", "nn/conv"} & ARCH_BRANCHED


# nn's kernels on 16-bit activations (computed in float, rounded once on store; BatchNorm's statistics
# and parameters float32).
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("family, real", [("activation", "__half"), ("activation", "__nv_bfloat16"),
                                          ("pool", "__half"), ("pool", "__nv_bfloat16"), ("batchnorm", "__half"),
                                          ("batchnorm", "__nv_bfloat16"), ("dropout", "__nv_bfloat16"),
                                          ("attention", "__half"), ("attention_half", "__nv_bfloat16")])
def test_nn_16bit_kernels_compile_with_nvcc(family, real):
    test_family_compiles_with_nvcc(NN_KERNELS, family, real, archs=(80,))


# The tensor-core attention at its largest tiles (head dim 128: the most registers a lane), sm_80 and sm_90.
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("real", ["__half", "__nv_bfloat16"])
def test_attention_half_at_head_dim_128_compiles_without_spills(real):
    from nn.kernels import attention as kernels_attention
    test_family_compiles_with_nvcc(NN_KERNELS, "attention_half", real, archs=(80, 90),
                                   defines=kernels_attention.half_tiles(128).defines(128))
