"""benchmarks/gpu_check.sh --rehearse: every stage of the GPU check, end to end on the simulator with tiny
sizes, so the script a lent GPU runs has run before it meets one (its cuda-only steps stood in for)."""
import datetime
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_rehearsal_runs_every_stage_and_packs_one_archive_each(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, GPU_CHECK_WORKERS="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--rehearse", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    day = datetime.date.today().strftime("%Y%m%d")
    for stage, must in ((1, {"./facts.txt", "./modules.log", "./stage1-tests.xml", "gemm"}),
                        (2, {"launch", "transfer"}), (3, {"./suite.xml", "./suite.log"})):
        with tarfile.open(tmp_path / "out" / f"stage{stage}-sim-{day}.tar.gz") as tar:
            names = set(tar.getnames())
            # a suite's JSON is <suite>-<device>-<date>.json (the sim's device: sim-<cpu>)
            have = names | {n[2:].split("-")[0] for n in names if n.endswith(f"-{day}.json")}
            assert must | {"./summary.txt"} <= have, names
            summary = tar.extractfile("./summary.txt").read().decode()
        assert "FAILED" not in summary and summary.count("ok") >= 2, summary
        assert f"=== summary: stage {stage} on sim" in out
    # the summary table is the output's last lines (a lent GPU's reply shows only the tail)
    assert out.rstrip().splitlines()[-1].startswith("  ok")


def test_usage_errors_exit_2(tmp_path):
    for args in ([], ["--stage", "4", str(tmp_path)], ["--stage", "1"], ["--bogus", str(tmp_path)]):
        proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), *args], capture_output=True, text=True)
        assert proc.returncode == 2 and "usage" in proc.stderr
