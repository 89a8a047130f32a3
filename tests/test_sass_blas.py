"""The issue-23 kernels read as compiled code (benchmarks/sass.py: nvcc for sm_90, cuobjdump -sass):
getrf_shared factors in shared memory (its loads after the first copy are LDS, no generic or global
loads in the factorization), trtri_blocks substitutes from shared memory after one barrier, the
diagonal-block and elementwise kernels (complex GEMM's passes too) run without a barrier, and none spills,
in float, double and the complex instantiations the report lists. Needs nvcc and cuobjdump; skipped,
saying which is missing, elsewhere."""
import pytest

from benchmarks import sass

pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(bool(sass.missing()), reason=sass.missing() or "-")]


def _family(family, real):
    binary, _ = sass.build(family, real, "sm_90")
    return sass.functions(binary, "sm_90"), sass.resources(binary, "sm_90")


@pytest.mark.parametrize("real,item", [("float", 4), ("double", 8)])
def test_getrf_shared_works_in_shared_memory(real, item):
    funcs, res = _family("getrf", real)
    whole = sass.mix(funcs["getrf_shared"])
    assert whole["LD"] == 0 and whole["LDG"] == 1 and whole["LDS"] > 0, whole   # one global load: the copy in
    assert res["getrf_shared"]["smem"] >= 32 * 33 * item
    assert sass.mix(funcs["getrf_global"])["LDS"] == 0
    assert all(r["local"] == 0 for r in res.values()), res


@pytest.mark.parametrize("real,item", [("float", 4), ("double", 8), ("cdouble", 16)])
def test_trtri_blocks_substitutes_from_shared_memory(real, item):
    # the diagonal block staged once (its packed triangle, TRSM_LEAF = 64 rows), one barrier, the
    # substitution's reads of the block from shared memory; no spill, no stack array
    funcs, res = _family("triangular", real)
    whole = sass.mix(funcs["trtri_blocks"])
    assert whole["BAR"] == 1 and whole["LDS"] > 0, whole
    assert res["trtri_blocks"]["smem"] >= 64 * 65 // 2 * item
    assert res["trtri_blocks"]["local"] == 0 and res["trtri_blocks"]["stack"] == 0, res["trtri_blocks"]


@pytest.mark.parametrize("real", ["float", "double"])
@pytest.mark.parametrize("family,kernels", [("triangular", ("tri_fill", "tri_update", "trsm_leaf")),
                                            ("geam", ("geam", "dgmm")), ("getrf", ("laswp",)),
                                            ("complex_parts", ("complex_split", "complex_combine"))])
def test_barrier_free_and_no_spills(family, kernels, real):
    funcs, res = _family(family, real)
    for k in kernels:
        assert sass.mix(funcs[k])["BAR"] == 0, k
        assert res[k]["local"] == 0 and res[k]["stack"] == 0, (k, res[k])


def test_report_lists_complex_instantiations_and_the_complex_gemm_path():
    """The report covers triangular.cu and getrf.cu in cfloat / cdouble beside float / double, and complex
    GEMM's passes with the real GEMM families (--quick keeps both, in float only)."""
    full, quick = sass.instantiations(), sass.instantiations(quick=True)
    for family in ("triangular", "getrf"):
        assert {(None, family, r) for r in ("float", "double", "cfloat", "cdouble")} <= set(full)
    assert {(None, f, r) for f in ("complex_parts", "gemm", "gemm_v2") for r in ("float", "double")} <= set(full)
    assert {(None, f, "float") for f in ("complex_parts", "gemm", "gemm_v2")} <= set(quick)
    assert all((f.startswith("gemm") or f == "complex_parts") and r in ("float", "__nv_bfloat16") for _, f, r in quick)


@pytest.mark.parametrize("family,real,kernels", [("triangular", "cfloat", ("tri_fill", "tri_update", "trsm_leaf", "trtri_blocks")),
                                                 ("getrf", "cdouble", ("getrf_shared", "getrf_global", "laswp"))])
def test_complex_instantiations_build_without_spills(family, real, kernels):
    rows = {r["kernel"]: r for r in sass.family_rows(family, real, "sm_90")}
    for k in kernels:
        assert rows[k]["real"] == real and rows[k]["spill_bytes"] == 0 and rows[k]["instructions"] > 0, rows[k]
