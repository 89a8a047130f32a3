"""Cubins built ahead for a GPU machine (gpublas/runtime/cubins.py): recording the modules a run loads, building
them with nvcc, and the cuda backend's lookup with its checks (the load itself needs a GPU:
test_cuda_backend's cuda-marked tests and gpu_check.sh's stage 1 run it)."""
import json
import shutil

import numpy as np
import pytest

import gpublas
from gpublas.runtime import cubins, source
from gpublas.runtime.launch import load_source

TINY = "extern \"C\" __global__ void twice(real *x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }\n"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def test_portable_name_is_relative_to_the_project():
    assert cubins.portable_name(source.path("gemm")) == "cuda_src/gemm.cu"
    assert cubins.portable_name("/elsewhere/x.cu") == "/elsewhere/x.cu"
    # the key then does not depend on where the checkout lies
    body = cubins.module_body("int x;", source.path("gemm"))
    assert body.startswith('#line 1 "cuda_src/gemm.cu"\n')


def test_record_appends_each_new_module_once(tmp_path, monkeypatch):
    rec = tmp_path / "record.jsonl"
    monkeypatch.setenv("GPUBLAS_RECORD_MODULES", str(rec))
    text = TINY + f"// test_record {tmp_path.name}\n"  # a module no other test loads
    for _ in range(2):
        load_source(text, {"real": "float"}, str(source.src_dir() / "tiny_record.cu"))
    lines = [json.loads(x) for x in rec.read_text().splitlines()]
    assert lines == [{"source_name": "cuda_src/tiny_record.cu", "defines": {"real": "float"}, "text": text}]
    # and a second file naming the same module adds nothing
    (tmp_path / "again.jsonl").write_text(rec.read_text() + rec.read_text())
    assert cubins.recorded([rec, tmp_path / "again.jsonl"]) == [(text, {"real": "float"}, "cuda_src/tiny_record.cu")]


@needs_nvcc
def test_build_then_lookup_with_its_checks(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GPUBLAS_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    out = tmp_path / "cubins"
    name = "cuda_src/tiny.cu"
    good, bad = (TINY, {"real": "float"}, name), ("this is not C++", {}, "cuda_src/broken.cu")
    results = cubins.build([good, bad], "sm_90a", out, workers=2, progress=False)
    assert results[0] == (name, None)
    assert results[1][0] == "cuda_src/broken.cu" and "failed" in results[1][1]  # reported, not raised
    manifest = json.loads((out / cubins.MANIFEST).read_text())
    assert manifest["target"] == "sm_90a" and "cuda_" in manifest["nvcc"]
    flags = cubins.nvcc_flags("sm_90a", {"real": "float"})
    body = cubins.module_body(TINY, name)
    path = out / cubins.file_name(body, flags, name)
    assert path.read_bytes()[:4] == b"\x7fELF"
    stamp = path.stat().st_mtime_ns
    cubins.build([good], "sm_90a", out, progress=False)
    assert path.stat().st_mtime_ns == stamp  # a good one is kept, not rebuilt

    prebuilt = cubins.Prebuilt(out, "sm_90a", driver_major=13)
    assert prebuilt.lookup(body, flags, name) == path
    assert prebuilt.lookup(body, cubins.nvcc_flags("sm_90a", {"real": "double"}), name) is None
    path.write_bytes(path.read_bytes()[:100])  # truncated: its checksum record no longer matches
    assert prebuilt.lookup(body, flags, name) is None
    log = (tmp_path / "cache" / "cubins.log").read_text().splitlines()
    assert log == ["hit cuda_src/tiny.cu -Dreal=float", "miss cuda_src/tiny.cu -Dreal=double",
                   "miss cuda_src/tiny.cu -Dreal=float"]

    # a folder built for another device, or by a newer CUDA than the driver, is not used, said once
    assert cubins.Prebuilt(out, "sm_80", 13).lookup(body, flags, name) is None
    assert cubins.Prebuilt(out, "sm_90a", 12).lookup(body, flags, name) is None
    off = cubins.Prebuilt(out, "sm_90a", 13)
    off.failed(path, "CUDA_ERROR_INVALID_IMAGE")
    assert off.lookup(body, flags, name) is None
    err = capsys.readouterr().err
    assert "cubins are for sm_90a, this device needs sm_80" in err
    assert "newer than the driver's CUDA 12" in err and "did not load (CUDA_ERROR_INVALID_IMAGE)" in err
    assert cubins.Prebuilt(None, "sm_90a", 13).lookup(body, flags, name) is None


def test_family_modules_cover_every_family_and_dtype():
    mods = cubins.family_modules([None], ("float32", "bfloat16"))
    fams = source.families()
    assert len(mods) == 2 * len(fams)
    assert {(n, d["real"]) for _, d, n in mods} == {(f"cuda_src/{f}.cu", c) for f in fams
                                                     for c in ("float", "__nv_bfloat16")}


@pytest.mark.cuda
def test_a_prebuilt_cubin_loads_and_runs(tmp_path, monkeypatch):
    """On a GPU: a module built by gpublas.runtime.cubins loads from GPUBLAS_CUBIN_DIR without nvcc's cache."""
    backend = gpublas._current_backend()
    monkeypatch.setenv("GPUBLAS_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    name = str(source.src_dir() / "tiny_prebuilt.cu")
    text = TINY + f"// {tmp_path.name}\n"
    cubins.build([(text, {"real": "float"}, cubins.portable_name(name))], backend.target, tmp_path / "c",
                 progress=False)
    monkeypatch.setattr(backend, "_cubins", cubins.Prebuilt(tmp_path / "c", backend.target, 99))
    x = gpublas.to_device(np.arange(5, dtype=np.float32))
    load_source(text, {"real": "float"}, name).get("twice")(1, 32, x, 5)
    np.testing.assert_array_equal(x.get(), 2 * np.arange(5))
    assert (tmp_path / "cache" / "cubins.log").read_text().startswith("hit ")
    assert not list((tmp_path / "cache").glob("*.cubin"))  # nvcc's cache was not used
