"""The kernel profiler: exact counts and bytes for a known sequence of launches and copies, positive
times, grouping, nesting, the JSON round trip, GPUBLAS_PROFILE and `python -m benchmarks profile`."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpublas
from gpublas.runtime import profiler

ROOT = Path(__file__).resolve().parent.parent


def _known_sequence():
    """3 fills of 1000 floats, 2 of 300 (FILLS: their launch shapes), one naive GEMM 17x5x3, one copy of
    each kind; returns what each should add up to."""
    host = np.arange(1000, dtype=np.float32)
    x = gpublas.to_device(host)                         # htod 4000 bytes
    y = gpublas.empty(300, np.float32)
    for _ in range(3):
        x.fill(1.0)
    for _ in range(2):
        y.fill(2.0)
    a, b = gpublas.to_device(np.ones((17, 3), np.float32)), gpublas.to_device(np.ones((3, 5), np.float32))
    c = gpublas.gemm(a, b, kernel="naive")              # grid (1, 2) x (16, 16); htod 204 + 60 above
    np.testing.assert_array_equal(c.get(), np.full((17, 5), 3.0, np.float32))  # dtoh 340
    x.copy()                                            # dtod 4000
    np.testing.assert_array_equal(y.get(), np.full(300, 2.0, np.float32))       # dtoh 1200


# fill's launch shapes for 1000 and 300 elements: 256-thread blocks, one element each, on a GPU; on the
# sim as few whole warps as cover 8 elements a thread
FILLS = {1000: ((4, 1, 1), (256, 1, 1)), 300: ((2, 1, 1), (256, 1, 1))} if gpublas.backend() != "sim" else \
    {1000: ((1, 1, 1), (128, 1, 1)), 300: ((1, 1, 1), (64, 1, 1))}


def _text(n):
    """How the profile's table writes the fill of n elements' launch shape: (4) x (256)."""
    (g, _, _), (b, _, _) = FILLS[n]
    return f"({g}) x ({b})"


def _rows(p):
    return {(e.name, e.grid, e.block): e for e in p.key_averages()}


def test_counts_bytes_and_times_of_a_known_sequence():
    _known_sequence()  # compiled and warm: the profile below sees launches, not compiles
    with gpublas.profile() as p:
        _known_sequence()
    rows = _rows(p)
    assert rows[("fill_real", *FILLS[1000])].count == 3
    assert rows[("fill_real", *FILLS[300])].count == 2
    assert rows[("gemm_naive", (1, 2, 1), (16, 16, 1))].count == 1
    kernels = [e for e in p.key_averages() if e.kind == "kernel"]
    assert sum(e.count for e in kernels) == 6 and len(kernels) == 3
    copies = {e.name: e for e in p.key_averages() if e.kind != "kernel"}
    assert (copies["[memcpy HtoD]"].count, copies["[memcpy HtoD]"].bytes) == (3, 4000 + 204 + 60)
    assert (copies["[memcpy DtoH]"].count, copies["[memcpy DtoH]"].bytes) == (2, 340 + 1200)
    assert (copies["[memcpy DtoD]"].count, copies["[memcpy DtoD]"].bytes) == (1, 4000)
    for e in p.key_averages():
        assert 0 < e.min_ms <= e.mean_ms <= e.max_ms <= e.total_ms
    rows = p.key_averages()
    assert [e.total_ms for e in rows] == sorted((e.total_ms for e in rows), reverse=True)
    t = p.totals()
    assert t["launches"] == 6 and t["transfers"] == 6 and t["transfer_bytes"] == 4264 + 1540 + 4000
    assert 0 < t["kernel_ms"] + t["transfer_ms"] < t["wall_s"] * 1e3
    text = p.table()
    assert "fill_real" in text and _text(1000) in text and "(1,2) x (16,16)" in text and "[memcpy DtoD]" in text


def test_off_means_untouched_and_nothing_recorded():
    backend = gpublas._current_backend()
    with gpublas.profile() as p:
        assert "htod" in backend.__dict__  # the copy methods are shadowed while a profile is open
    assert profiler.sessions == [] and not any(m in backend.__dict__ for m in (*profiler.TRANSFERS, "compile"))
    gpublas.zeros(10).fill(1.0)
    assert p.totals()["launches"] == 0


def test_a_backend_chosen_inside_a_profile_is_counted(monkeypatch):
    from gpublas.runtime import backends
    monkeypatch.setattr(backends, "_active", None)  # no backend yet: the profile opens with none to track
    with gpublas.profile() as p:
        x = gpublas.to_device(np.ones(25, np.float32))  # chooses the backend (backends.on_chosen -> track)
        x.get()
    copies = {e.name: e for e in p.key_averages() if e.kind != "kernel"}
    assert (copies["[memcpy HtoD]"].count, copies["[memcpy HtoD]"].bytes) == (1, 100)
    assert (copies["[memcpy DtoH]"].count, copies["[memcpy DtoH]"].bytes) == (1, 100)
    assert p.backend == gpublas.backend()


def test_group_by_name_and_nesting():
    x = gpublas.empty(1000, np.float32)
    y = gpublas.empty(300, np.float32)
    with gpublas.profile() as outer:
        x.fill(3.0)
        with gpublas.profile() as inner:
            y.fill(3.0)
            y.fill(1.0)
        x.fill(1.0)
    assert [(e.name, e.count) for e in inner.key_averages()] == [("fill_real", 2)]
    by_shape = [e for e in outer.key_averages() if e.name == "fill_real"]
    assert sorted(e.count for e in by_shape) == [2, 2]
    (merged,) = [e for e in outer.key_averages(group_by_shape=False) if e.name == "fill_real"]
    assert merged.count == 4 and merged.grid == () and merged.total_ms == pytest.approx(sum(e.total_ms for e in by_shape))
    assert merged.min_ms == min(e.min_ms for e in by_shape)
    with gpublas.profile() as p:
        x.fill(0.0)  # all-zero bytes: a memset, counted as a transfer
    assert [(e.name, e.count, e.bytes) for e in p.key_averages()] == [("[memset]", 1, 4000)]


def test_json_round_trip():
    with gpublas.profile() as p:
        _known_sequence()
    text = p.to_json()
    doc = json.loads(text)
    assert doc["backend"] == gpublas.backend() and doc["totals"]["launches"] == 6
    assert {"name", "grid", "block", "count", "total_ms", "mean_ms", "bytes"} <= set(doc["rows"][0])
    q = gpublas.Profile.from_json(text)
    assert q.key_averages() == p.key_averages()
    assert q.table() == p.table()


def test_environment_variable_prints_at_exit(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("import gpublas\nx = gpublas.empty(1000)\nfor _ in range(7):\n    x.fill(1.0)\n")
    # the repository first, the rest kept (a GPU machine's PyCUDA may come from PYTHONPATH)
    env = {**os.environ, "GPUBLAS_PROFILE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stderr.splitlines() if "fill_real" in ln)
    assert line.split()[2] == "7" and _text(1000) in line  # count column


def test_benchmarks_profile_command(tmp_path, capsys):
    from benchmarks import main
    script = tmp_path / "tiny.py"
    script.write_text(textwrap.dedent("""\
        import numpy as np, gpublas
        x = gpublas.to_device(np.zeros(300, np.float32))
        for _ in range(5):
            x.fill(2.0)
        assert x.get().sum() == 600
        """))
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    out = tmp_path / "p.json"
    assert main(["profile", "--json", str(out), "--", sys.executable, str(script)]) == 0
    text = capsys.readouterr().out
    assert "== profile:" in text and "fill_real" in text and "[memcpy HtoD]" in text
    rows = {r["name"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["fill_real"]["count"] == 5 and rows["fill_real"]["grid"] == list(FILLS[300][0])
    assert rows["[memcpy HtoD]"]["bytes"] == 1200 and rows["[memcpy DtoH]"]["count"] == 1
    script.write_text("raise SystemExit(3)\n")
    assert main(["profile", "--", sys.executable, str(script)]) == 3  # no profile written: the status stays
    with pytest.raises(SystemExit):
        main(["profile"])


@pytest.mark.cuda
def test_cuda_times_are_event_times():
    with gpublas.profile() as p:
        _known_sequence()
    assert all(e.total_ms > 0 for e in p.key_averages()) and p.totals()["launches"] == 6
