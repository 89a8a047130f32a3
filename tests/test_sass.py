"""The GEMM v2 kernels, read as compiled code (benchmarks/sass.py: nvcc for sm_90, cuobjdump -sass): the
FP32 kernel's main loop is fed by cp.async (LDGSTS) and 128-bit shared loads and holds >= 512 FFMA; the
TF32 kernel's runs mma.sync (HMMA) on shared-memory fragments (LDS, LDSM) of LDGSTS-filled tiles, and
the wgmma kernel's (sm_90a) warpgroup MMAs (HGMMA) on them; no kernel
spills. Needs nvcc and cuobjdump (the `sass`
extra); skipped, saying which is missing, elsewhere."""
import pytest

from benchmarks import sass

pytestmark = [pytest.mark.nvcc, pytest.mark.skipif(bool(sass.missing()), reason=sass.missing() or "-")]


def _family(family, real="float"):
    binary, _ = sass.build(family, real, "sm_90")
    return sass.functions(binary, "sm_90"), sass.resources(binary, "sm_90")


@pytest.fixture(scope="module")
def v2_float():
    return _family("gemm_v2")


@pytest.fixture(scope="module")
def tf32_float():
    return _family("gemm_tf32")


@pytest.mark.parametrize("t", ["nn", "nt", "tn", "tt"])
def test_fp32_v2_main_loop_is_cp_async_fed_and_fma_dense(v2_float, t):
    funcs, res = v2_float
    name = f"gemm_v2_large_{t}_vec"
    whole, loop = sass.mix(funcs[name]), sass.main_loop(funcs[name])
    body = sass.mix(loop)
    fig = sass.loop_figures(loop)
    assert whole["LDGSTS"] > 0 and body["LDGSTS"] > 0, "global->shared copies must be cp.async"
    assert body["LDS.128"] > 0 and body["LDS"] == body["LDS.128"], "every shared load in the main loop is 128-bit"
    assert fig["loop_fma"] >= 512 and body["FFMA"] >= 512, fig
    assert fig["fma_share"] > 0.75, fig
    assert body["BAR"] == 1, "one barrier per K step"
    assert res[name]["local"] == 0, f"{name} spills"


# bfloat16 only: the __half instantiation is the same template with the f16 MMA (one more sm_90a build of the
# family, 25-55 s of nvcc); tests/test_nvcc.py builds it for sm_80, spills checked
@pytest.fixture(scope="module", params=["__nv_bfloat16"])
def half(request):
    return request.param, _family("gemm_half", request.param)


def test_no_v2_kernel_spills(v2_float, tf32_float, half):
    for _, res in (v2_float, tf32_float, half[1]):
        assert res and all(r["local"] == 0 and r["stack"] == 0 for r in res.values()), res


def test_occupancy_and_loop_figures_by_hand():
    # 128 registers, 40 KB shared, 256 threads on sm_90: 2 blocks (registers) -> 16 of 64 warps
    assert sass.occupancy(128, 40960, 256, "sm_90") == 0.25
    assert sass.occupancy(32, 0, 256, "sm_90") == 1.0
    body = [(0, "FFMA", ""), (16, "FFMA", ""), (32, "LDS.128", ""), (48, "BRA", "0x0")]
    fig = sass.loop_figures(body)
    assert fig["loop_fma"] == 2 and fig["fma_share"] == 0.5 and fig["flop_per_smem_byte"] == 4 / 16
    assert sass._mma_volume("HMMA.1688.F32.TF32") == 16 * 8 * 8
    assert sass._mma_volume("HMMA.16816.F32") == 16 * 8 * 16


@pytest.mark.parametrize("t", ["nn", "nt", "tn", "tt"])
def test_tf32_v2_main_loop_runs_hmma_on_shared_fragments(tf32_float, t):
    # mma.sync fed by shared loads (LDS, or LDSM: ldmatrix) of cp.async-filled stages: no generic LD in the
    # loop, 64 HMMA (a 64 x 64 warp tile, K step 16) per barrier, at least 35 % of the loop's instructions
    funcs, res = tf32_float
    name = f"gemm_tf32_large_{t}_vec"
    body = sass.mix(sass.main_loop(funcs[name]))
    fig = sass.loop_figures(sass.main_loop(funcs[name]))
    assert body["HMMA"] == 64 and body["LDGSTS"] > 0 and body["BAR"] == 1, body
    assert body["LD"] == 0 and body["LDS"] + body["LDSM"] >= 16, body
    assert fig["fma_share"] >= 0.35, fig
    assert res[name]["local"] == 0


@pytest.mark.parametrize("t", ["nn", "nt", "tt"])
def test_tf32_wgmma_main_loop_is_hgmma_on_cp_async_stages(tf32_float, t):
    # sm_90a: per K step of 16 one barrier, the next stage's cp.async, the warp's A fragments (<= 4 shared
    # loads) and two warpgroup MMAs of 64 x 256 x 8 reading B from shared memory through a descriptor,
    # waiting only for the previous step's; the loop body holds the code of both fragment register sets
    # (even and odd steps), one of which each iteration runs
    funcs, res = tf32_float
    name = f"gemm_tf32_wgmma_{t}_vec"
    loop = sass.main_loop(funcs[name])
    body, fig = sass.mix(loop), sass.loop_figures(loop)
    assert body["HGMMA"] == 4 and body["HMMA"] == 0 and body["LDGSTS"] > 0 and body["BAR"] == 1, body
    assert {op for _, op, _ in loop if op.startswith("HGMMA")} == {"HGMMA.64x256x8.F32.TF32"}
    assert body["LD"] == 0 and 0 < body["LDS"] + body["LDSM"] <= 8, body
    waits = [rest for _, op, rest in loop if op.startswith("WARPGROUP.DEPBAR")]
    assert waits and all(w.replace(" ", "").endswith("gsb0,0x1") for w in waits), waits
    assert fig["flop_per_smem_byte"] > 20, fig
    assert res[name]["local"] == 0 and res[name]["regs"] <= 255


def test_ptxas_keeps_the_wgmma_pipeline():
    # ptxas serializes wgmma (warning C7515) when other instructions may touch its registers inside the
    # pipeline, e.g. index math placed after the main loop: the kernels would run, at a fraction of the rate
    _, log = sass.build("gemm_tf32", "float", "sm_90")
    assert "gemm_tf32_wgmma_nn_vec" in log  # ptxas -v named the kernels: this is their log
    assert "C7515" not in log and "serialized" not in log, log


# the 16-bit kernels: mma.m16n8k16 with bf16 (HMMA.16816.F32.BF16) or f16 (HMMA.16816.F32) inputs
HMMA_16 = {"__nv_bfloat16": "HMMA.16816.F32.BF16", "__half": "HMMA.16816.F32"}


@pytest.mark.parametrize("t", ["nn", "nt", "tn", "tt"])
def test_half_mma_main_loop_is_hmma_16816_on_ldmatrix_fragments(half, t):
    # per K step of 32: one barrier, the next stage's cp.async, 16 ldmatrix x4 (8 for A, 8 for B; .trans for a
    # k-major operand) and 64 HMMA.16816 (a 64 x 64 warp tile); no other shared or generic load; 32 FLOP per
    # shared byte (TF32's mma.sync: 16)
    real, (funcs, res) = half
    name = f"gemm_half_mma_{t}_vec"
    loop = sass.main_loop(funcs[name])
    body, fig = sass.mix(loop), sass.loop_figures(loop)
    assert body["HMMA"] == 64 and body["LDGSTS"] > 0 and body["BAR"] == 1, body
    assert {op for _, op, _ in loop if op.startswith("HMMA")} == {HMMA_16[real]}
    lds = {op for _, op, _ in loop if op.startswith("LDS")}
    assert body["LDSM"] == 16 and body["LDS"] == 0 and body["LD"] == 0, body
    assert lds == {"LDSM.16.M88.4", "LDSM.16.MT88.4"} if t in ("nn", "tt") else len(lds) == 1, lds
    assert fig["fma_share"] >= 0.4 and fig["flop_per_smem_byte"] == 32, fig
    assert res[name]["local"] == 0


@pytest.mark.parametrize("t", ["nn", "nt", "tn", "tt"])
def test_half_wgmma_main_loop_is_hgmma_16_bit(half, t):
    # sm_90a: per K step of 32 one barrier, the next stage's cp.async, the warp's A' fragments (2 ldmatrix) and
    # two m64n256k16 warpgroup MMAs with 16-bit inputs, waiting only for the previous step's (both parities'
    # code in the loop body); tn's read B' MN-major (imm-trans-b 1: the descriptor operand's .tnspB), the
    # others' K-major
    real, (funcs, res) = half
    name = f"gemm_half_wgmma_{t}_vec"
    loop = sass.main_loop(funcs[name])
    body, fig = sass.mix(loop), sass.loop_figures(loop)
    want = "HGMMA.64x256x16.F32" + (".BF16" if real == "__nv_bfloat16" else "")
    assert {op for _, op, _ in loop if op.startswith("HGMMA")} == {want}
    transposed = {".tnspB" in rest for _, op, rest in loop if op.startswith("HGMMA")}
    assert transposed == {t == "tn"}, transposed
    assert body["HGMMA"] == 4 and body["HMMA"] == 0 and body["LDGSTS"] > 0 and body["BAR"] == 1, body
    assert body["LD"] == 0 and body["LDS"] == 0 and body["LDSM"] == 4, body
    waits = [rest for _, op, rest in loop if op.startswith("WARPGROUP.DEPBAR")]
    assert waits and all(w.replace(" ", "").endswith("gsb0,0x1") for w in waits), waits
    assert fig["flop_per_smem_byte"] > 50, fig
    assert res[name]["local"] == 0 and res[name]["regs"] <= 255
    _, log = sass.build("gemm_half", real, "sm_90")
    assert "C7515" not in log and "serialized" not in log, log


@pytest.fixture(scope="module")
def attention_half():
    from nn.kernels import KERNELS
    binary, _ = sass.build("attention_half", "__nv_bfloat16", "sm_90", root=KERNELS)
    return sass.functions(binary, "sm_90"), sass.resources(binary, "sm_90")


@pytest.mark.parametrize("name, hmma, ldsm, bars", [("attention_half_forward", 64, 36, 1),
                                                    ("attention_half_backward", 160, 92, 2)])
def test_attention_half_loops_are_hmma_16816_on_ldmatrix_fragments(attention_half, name, hmma, ldsm, bars):
    # head dim 64, tiles of 64: per K/V tile the forward's 32 HMMA for S = q k^T and 32 for P V (16 ldmatrix x4
    # each; 4 more for the warp's q fragments, on the first tile); per query tile the backward's 64 for S^T and
    # dP^T, 64 for dv and dk, 32 for dq (92 ldmatrix, .trans for the k-major operands); the tiles arrive by
    # cp.async; no generic load, no spill
    funcs, res = attention_half
    body = sass.mix(sass.main_loop(funcs[name]))
    ops = {op for _, op, _ in sass.main_loop(funcs[name]) if op.startswith(("HMMA", "LDSM"))}
    assert body["HMMA"] == hmma and body["LDSM"] == ldsm and body["BAR"] == bars, body
    assert ops == {"HMMA.16816.F32.BF16", "LDSM.16.M88.4", "LDSM.16.MT88.4"}, ops
    assert body["LDGSTS"] > 0 and body["LD"] == 0 and body["LDS"] == 0, body
    assert res[name]["local"] == 0 and res[name]["stack"] == 0, res[name]
