"""The simulator itself (gpublas/sim/*.h, backends/sim.py): its compile cache key and headers."""
import os
import shutil

import pytest

from gpublas.backends import sim

pytestmark = pytest.mark.skipif(os.environ.get("GPUBLAS_BACKEND") == "cuda", reason="sim backend internals")


def test_cache_key_digests_every_sim_header(tmp_path, monkeypatch):
    copy = tmp_path / "sim"
    shutil.copytree(sim.HEADER.parent, copy)
    monkeypatch.setattr(sim, "HEADER", copy / "gpublas_sim.h")
    before = sim.headers_digest()
    names = sorted(p.name for p in copy.glob("*.h"))
    assert {"gpublas_sim.h", "dialect.h", "scheduler.h", "intrinsics.h", "wmma.h"} <= set(names)
    for name in names:  # a change to any header, not only the force-included one, changes the key
        p = copy / name
        text = p.read_text()
        p.write_text(text + "\n// changed\n")
        assert sim.headers_digest() != before, name
        p.write_text(text)
    assert sim.headers_digest() == before
    (copy / "new.h").write_text("#pragma once\n")  # a header added later counts too
    assert sim.headers_digest() != before


def test_gpublas_sim_h_includes_each_part():
    text = sim.HEADER.read_text()
    for part in ("dialect.h", "scheduler.h", "intrinsics.h", "wmma.h"):
        assert f'#include "{part}"' in text
        assert (sim.HEADER.parent / part).read_text().startswith(f"// {part}: ")
