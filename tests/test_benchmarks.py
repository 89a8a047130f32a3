"""The benchmark suites: each runs in quick mode in-process (benchmarks.main(argv)) and writes JSON
with the fields a reader relies on; plus the harness's helpers, the missing-matplotlib path and the
GPU check script's syntax."""
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpublas
from benchmarks import SUITES, main
from benchmarks import harness

ROOT = Path(__file__).resolve().parent.parent


def _missing(suite):
    """Why `suite` cannot run yet (a piece another issue lands), or None."""
    need = {"compute": ["gemm", "gemv", "axpy", "sum", "dot"], "roofline": ["gemm"], "offload": ["gemm"]}
    gone = [f"gpublas.{n}" for n in need.get(suite, []) if not hasattr(gpublas, n)]
    if suite == "sass":
        from benchmarks import sass
        if sass.missing():
            gone.append(sass.missing())
    if suite == "train":
        try:
            import nn  # noqa: F401
            from nn.examples import digits  # noqa: F401
        except ImportError:
            gone.append("nn")
    if suite == "scaling":
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            gone.append("mpi4py (the 'mpi' extra)")
    return ", ".join(gone) or None


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


@pytest.mark.parametrize("suite", SUITES)
def test_suite_quick_writes_json(suite, tmp_path, capsys):
    why = _missing(suite)
    if why:
        pytest.skip(f"{suite} needs {why}, which has not landed yet")
    out, png = tmp_path / f"{suite}.json", tmp_path / f"{suite}.png"
    rc = main([suite, "--quick", "--no-progress", "--json", str(out), "--plot", str(png)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert text.startswith("gpublas ") and f"backend: {gpublas.backend()}" in text
    doc = json.loads(out.read_text())
    for key in ("suite", "date", "backend", "device", "versions", "results", "checks_passed", "settings",
                "summary", "notes", "skipped", "simulated"):
        assert key in doc, key
    assert doc["suite"] == suite and doc["backend"] == gpublas.backend()
    assert doc["checks_passed"] is True and doc["checks"]
    assert doc["results"], "a suite that ran must produce result rows"
    assert doc["device"]["name"] == gpublas.device_info()["name"]
    assert {"gpublas", "numpy", "python"} <= set(doc["versions"])
    assert doc["settings"]["quick"] is True
    if gpublas.backend() == "sim":
        assert doc["simulated"] and "simulated" in doc["label"] and "simulated CPU figures" in text
    if _has_matplotlib():
        assert png.stat().st_size > 1000


def test_suite_specifics(tmp_path):
    """The figures each suite promises: bandwidth per mode, the roofline's peaks and bounds, the
    offload crossover, the overlap speedups."""
    main(["transfer", "--quick", "--no-progress", "--sizes", "4K", "1M", "--json", str(tmp_path / "t.json")])
    t = json.loads((tmp_path / "t.json").read_text())
    assert {(r["direction"], r["memory"]) for r in t["results"]} == {
        ("H2D", "pageable"), ("H2D", "pinned"), ("D2H", "pageable"), ("D2H", "pinned"), ("D2D", "device"),
        ("H2D", "pinned bf16"), ("CAST", "f32->bf16"), ("CAST", "bf16->f32")}
    assert sorted({r["size_bytes"] for r in t["results"]}) == [4096, 2**20]
    assert all(r["gbps"] > 0 and r["ms"] > 0 and r["spread_pct"] >= 0 for r in t["results"])
    main(["overlap", "--quick", "--no-progress", "--sizes", "64K", "--json", str(tmp_path / "o.json")])
    o = json.loads((tmp_path / "o.json").read_text())
    assert [r["streams"] for r in o["results"]] == [0, 1, 2, 4, 8]
    assert o["results"][0]["speedup"] == 1.0
    if not _missing("roofline"):
        main(["roofline", "--quick", "--no-progress", "--sizes", "32", "--json", str(tmp_path / "r.json")])
        r = json.loads((tmp_path / "r.json").read_text())
        assert r["summary"]["peak_bandwidth_gbps"] > 0 and r["summary"]["peak_gflops"] > 0
        assert {row["bound"] for row in r["results"]} <= {"memory", "compute"}
    if not _missing("offload"):
        main(["offload", "--quick", "--no-progress", "--sizes", "8", "16", "--json", str(tmp_path / "f.json")])
        f = json.loads((tmp_path / "f.json").read_text())
        c = f["summary"]["gemm_crossover"]
        assert c == "never" or c in (8, 16)
        for row in f["results"]:
            assert row["in_ms"] > 0 and row["compute_ms"] > 0 and row["out_ms"] > 0


def test_several_suites_out_dir_and_combined_json(tmp_path, capsys):
    out = tmp_path / "res"
    rc = main(["transfer", "launch", "--quick", "--no-progress", "--sizes", "1K", "--out", str(out),
               "--json", str(tmp_path / "all.json")])
    assert rc == 0
    doc = json.loads((tmp_path / "all.json").read_text())
    assert set(doc["suites"]) == {"transfer", "launch"} and doc["checks_passed"] is True
    slug, date = harness.device_slug(), harness.today()
    assert (out / f"transfer-{slug}-{date}.json").exists() and (out / f"launch-{slug}-{date}.json").exists()
    launches = json.loads((out / f"launch-{slug}-{date}.json").read_text())["results"]
    assert launches and all(r["cpu_us_per_launch"] > 0 and r["us_per_launch"] > 0 for r in launches)
    assert "summary:" in capsys.readouterr().out
    if _has_matplotlib():  # the plot beside each JSON is named by its file name, no path of this machine
        one = json.loads((out / f"transfer-{slug}-{date}.json").read_text())
        assert one["plot"] == f"transfer-{slug}-{date}.png" and (out / one["plot"]).exists()


def test_no_matplotlib_skips_plot_without_crashing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    rc = main(["transfer", "--quick", "--no-progress", "--sizes", "4K", "--plot", str(tmp_path / "p.png")])
    assert rc == 0
    assert "plot skipped: matplotlib does not import" in capsys.readouterr().out
    assert not (tmp_path / "p.png").exists()


def test_failed_check_is_reported(capsys):
    rep = harness.Report("x", harness.Context(quick=True))
    assert rep.check("ok", np.ones(3), np.ones(3))
    assert not rep.check("bad", np.array([1.0, 2.0, 3.5]), np.array([1.0, 2.0, 3.0]), rtol=1e-6, atol=0)
    assert not rep.checks_passed
    out = capsys.readouterr().out
    assert "CHECK FAILED bad: 1 of 3" in out and "at (2,)" in out
    assert not rep.check_equal("copy", np.arange(4, dtype=np.uint8), np.zeros(4, np.uint8))
    assert not rep.check("conjugated", np.array([1 - 1j]), np.array([1 + 1j]))  # imaginary parts compared
    assert rep.check("complex", np.array([1 + 1j], np.complex64), np.array([1 + 1j]))


COMPLEX_OPS = ["cgemm", "zgemm", "ctrsm", "ztrsm", "ctrmm", "ztrmm", "csymm", "zsymm", "csyrk", "zsyrk", "csyr2k",
               "zsyr2k", "cgetrf_batched", "zgetrf_batched", "chemm", "zhemm", "cherk", "zherk", "cher2k", "zher2k"]


def test_compute_runs_complex_rows():
    """The compute suite's sweeps have cgemm / zgemm and the complex level-3 and LU rows (quick, the sim's
    and the GPU's), --sizes gives GEMM rows in float32 and complex."""
    from benchmarks import compute
    for ctx in (harness.Context(quick=True), harness.Context()):
        ops = {op for op, _ in compute.cases(ctx)}
        assert set(COMPLEX_OPS) <= ops, set(COMPLEX_OPS) - ops
    sized = compute.cases(harness.Context(sizes=("16", "8x4x2")))
    assert [(op, s) for op, s in sized if op.endswith("gemm")] == [
        (op, s) for op in ("gemm", "cgemm", "zgemm") for s in ((16, 16, 16), (8, 4, 2))]
    # ... and the level-3 routines at the square size only (README's n = 512 rows), no batched LU
    vectors = ("gemv", "axpy", "add", "sum", "dot", *compute.F64_VECTOR_OPS)
    tri = {(op, s) for op, s in sized if not op.endswith("gemm") and op not in vectors}
    assert ("trsm", (16, 16)) in tri and ("ztrsm", (16, 16)) in tri and ("cherk", (16, 16)) in tri
    assert all(s == (16, 16) for _, s in tri) and not any("getrf" in op for op, _ in tri)


@pytest.mark.parametrize("op", COMPLEX_OPS)
def test_compute_complex_row_is_checked_and_timed(op):
    """Each complex row checks against its complex128 reference, times, counts complex FLOPs; cgemm / zgemm
    add the real GEMM of their shape ('x real')."""
    from benchmarks import compute
    ctx = harness.Context(quick=True, repeats=1)
    rep = harness.Report("compute", ctx)
    shape = (4, 8) if op.endswith("getrf_batched") else (12, 12, 12) if op.endswith("gemm") else (12, 12)
    row = compute.measure_op(rep, ctx, op, shape)
    assert row is not None and rep.checks_passed and [c["name"] for c in rep.checks] == [row["op"] + " " + row["shape"]]
    assert row["metric"] == "GFLOP/s" and row["gflops"] > 0 and row["numpy_ms"] > 0
    if op.endswith("gemm"):
        assert row["flops"] == 8 * 12 ** 3 and row["real_ms"] > 0 and row["vs_real"] > 0
    if op[1:] == "trsm":
        assert row["flops"] == 4 * 12 ** 3  # a complex multiply-add is four real ones


def test_compute_relates_complex_rows_to_their_gemm():
    from benchmarks import compute_tri
    rows = [{"op": "cgemm", "dims": [64, 64, 64], "rate": 10.0}, {"op": "gemm", "dims": [64, 64, 64], "rate": 40.0},
            {"op": "ctrsm", "dims": [64, 64], "rate": 5.0}, {"op": "trsm", "dims": [64, 64], "rate": 4.0},
            {"op": "zsyrk", "dims": [64, 64], "rate": 1.0}]
    compute_tri.relate_to_gemm(rows)
    assert rows[2]["vs_gemm"] == 0.5 and rows[3]["vs_gemm"] == 0.1 and "vs_gemm" not in rows[4]


def test_measure_and_helpers():
    ctx = harness.Context(quick=True)
    t = harness.measure_host(lambda: sum(range(100)), ctx)
    assert t.median_ms > 0 and t.min_ms <= t.median_ms <= t.max_ms and t.samples == ctx.repeats
    d = harness.measure(lambda: gpublas.zeros(16), ctx)
    assert d.median_ms >= 0 and d.inner >= 1
    assert harness.parse_size("4K") == 4096 and harness.parse_size("16MiB") == 16 << 20
    assert harness.parse_size("1G") == 1 << 30 and harness.parse_size("300") == 300
    assert harness.parse_shape("64") == (64, 64, 64) and harness.parse_shape("2x3x4") == (2, 3, 4)
    with pytest.raises(ValueError):
        harness.parse_size("lots")
    assert harness.fmt_bytes(4096) == "4 KiB" and harness.fmt_bytes(3 << 20) == "3 MiB"
    text = harness.table([("a", "name", "s"), ("b", "value", ".2f"), ("c", "never", ".1f")],
                         [{"a": "x", "b": 1.0}, {"a": "x", "b": 22.5}])
    assert "never" not in text and "22.50" in text and text.count("x") == 1


def test_unknown_suite_is_an_error():
    with pytest.raises(SystemExit):
        main(["nonsense"])


def test_no_suite_lists_the_suites_and_runs_none(capsys, monkeypatch):
    import benchmarks.cli as cli
    ran = []
    monkeypatch.setattr(cli, "run_suite", lambda name, *a: ran.append(name))
    assert main([]) == 0
    out = capsys.readouterr().out
    assert ran == []
    for name in SUITES:
        module = importlib.import_module(f"benchmarks.{name}")
        assert f"{name}" in out and module.DESCRIPTION in out
    assert "profile" in out and "'all'" in out


def test_all_runs_every_suite(monkeypatch, capsys):
    import benchmarks.cli as cli
    ran = []

    def fake(name, ctx, args, many):
        ran.append(name)
        return {"checks_passed": True, "summary": {}, "results": [], "skipped": [], "elapsed_s": 0.0}
    monkeypatch.setattr(cli, "run_suite", fake)
    assert main(["all"]) == 0
    assert ran == list(SUITES)


def test_gpu_check_script_syntax():
    script = ROOT / "benchmarks" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr.lower()


@pytest.mark.parametrize("precision, dtype", [("bf16", "bfloat16"), ("fp16", "float16")])
def test_train_precision_adds_checked_16bit_step_rows(precision, dtype, tmp_path, capsys):
    if _missing("train"):
        pytest.skip("train needs nn")
    rc = main(["train", "--quick", "--no-progress", "--precision", precision, "--json", str(tmp_path / "t.json")])
    assert rc == 0
    doc = json.loads((tmp_path / "t.json").read_text())
    models = {r["model"] for r in doc["results"]}
    half = [r for r in doc["results"] if r["layer"] == f"STEP {precision}"]
    assert len(models) == 3 and {r["model"] for r in half} == models and all(r["step_ms"] > 0 for r in half)
    loss_checks = [c for c in doc["checks"] if c["name"].endswith(f"{dtype} loss = fp32 loss")]
    assert len(loss_checks) == 3 and doc["checks_passed"]
    assert "torch.autocast with the same dtype" in capsys.readouterr().out


@pytest.mark.parametrize("precision", ["fp32", pytest.param("bf16", marks=pytest.mark.torch_bf16), "fp16"])
def test_train_torch_peer_runs_under_autocast_of_the_same_dtype(precision):
    """The PyTorch peer of the STEP / STEP bf16 / STEP fp16 rows, on the CPU here (on a GPU the suite runs
    it on CUDA): its first layer's output comes out in the autocast dtype (the CNN's logits in FP32: the
    FP32Dense head's autocast(enabled=False) subregion; the LSTM model's in 16 bits), fp16 scales its
    loss, and its first loss is nn's FP32 loss of the same weights and batch to 16-bit precision."""
    pytest.importorskip("torch")
    if _missing("train"):
        pytest.skip("train needs nn")
    import nn
    from benchmarks import train, train_torch
    ctx = harness.Context(quick=True, repeats=1)
    runs = train.models(ctx)[:1 if precision == "fp16" else 2]  # oneDNN has no fp16 LSTM on the CPU
    for label, layers, x, labels, _ in runs:
        t = train_torch.time_torch(ctx, layers, train._state(layers), x, labels, train.LR, train.MOMENTUM,
                                   precision, device="cpu")
        low = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[precision]
        assert t["dtypes"][0] == low and t["dtypes"][-1] == ("float32" if "CNN" in label else low), (label, t)
        assert (t["scale"] > 1.0) == (precision == "fp16") and t["ms"] > 0
        y = gpublas.to_device(x)
        for _, m in layers:
            y = m(y)
        want = nn.SoftmaxCrossEntropy()(y, labels)
        assert abs(t["first_loss"] - want) <= (2 ** -6 if precision != "fp32" else 1e-5) * want, label
    with pytest.raises(ValueError, match="precision"):
        train_torch.time_torch(ctx, runs[0][1], {}, runs[0][2], runs[0][3], 0.1, 0.9, "fp8", device="cpu")


def test_torch_graph_timing_reports_a_failed_capture():
    """The PyTorch CUDA-graph peer (train_torch.graph_timing) returns why a capture failed instead of raising,
    so a GPU run keeps the rest of its suite: here PyTorch's CPU build, which has no CUDA graphs."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("PyTorch has CUDA here: the capture would run (test_torch_graph_replays_equal_eager_steps)")
    from benchmarks import train_torch
    got = train_torch.graph_timing(harness.Context(quick=True, repeats=1), lambda: None, lambda: None)
    assert list(got) == ["graph_error"] and "CUDA" in got["graph_error"]


@pytest.mark.cuda
def test_torch_graph_replays_equal_eager_steps():
    """train_torch.captured's replay is PyTorch's training step: a small model's weights after the warm-up and
    replays equal those of as many eager steps from the same weights (SGD with momentum, as the train suite's
    peer)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA build of PyTorch")
    from benchmarks import train_torch
    torch.manual_seed(0)
    x, y = torch.randn(32, 20, device="cuda"), torch.randint(0, 5, (32,), device="cuda")
    init = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5)).cuda()
    weights = []
    for graphed in (False, True):
        model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5)).cuda()
        model.load_state_dict(init.state_dict())
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def body():
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        if graphed:
            replay = train_torch.captured(lambda: opt.zero_grad(set_to_none=True), body, warmup=3)
            for _ in range(4):
                replay()
        else:
            for _ in range(7):
                opt.zero_grad(set_to_none=True)
                body()
        torch.cuda.synchronize()
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]).cpu().numpy())
    np.testing.assert_allclose(weights[1], weights[0], rtol=1e-5, atol=1e-6)


def test_train_without_nn_reports_skipped(tmp_path, monkeypatch, capsys):
    from benchmarks import train
    monkeypatch.setattr(train, "nn", None)
    monkeypatch.setattr(train, "NN_MISSING", "ModuleNotFoundError: No module named 'nn'", raising=False)
    rc = main(["train", "--quick", "--no-progress", "--json", str(tmp_path / "t.json")])
    assert rc == 0
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["results"] == [] and doc["skipped"][0]["what"] == "train"
    assert "skipped: nn not available" in capsys.readouterr().out


class _NumpyPeer:
    """A stand-in peer computing with NumPy; `broken` mimics a CuPy whose cuBLAS fails to load."""
    library = "stand-in"

    def __init__(self, result=None, error=None):
        self.result, self.error = result, error

    def array(self, host):
        return np.asarray(host)

    def get(self, x):
        return np.asarray(x)

    def synchronize(self):
        pass

    def gemm(self, a, b, out=None):
        if self.error:
            raise self.error
        return a @ b if self.result is None else self.result


def test_peer_probe_runs_a_tiny_product():
    from benchmarks.peers import probe
    good = _NumpyPeer()
    assert probe(good) is good
    with pytest.raises(OSError, match="libcublas"):
        probe(_NumpyPeer(error=OSError("libcublas.so.12: cannot open shared object file")))
    with pytest.raises(RuntimeError, match="product is wrong"):
        probe(_NumpyPeer(result=np.zeros((3, 3), np.float32)))
