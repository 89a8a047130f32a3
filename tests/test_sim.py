"""The simulator itself (gpublas/sim/*.h, backends/sim.py): its compile cache key and headers, the
per-call argument record."""
import os
import shutil

import numpy as np
import pytest

import gpublas
from gpublas.backends import sim
from gpublas.launch import load_source

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


MIXED_SRC = r"""
extern "C" __global__ void mixed(char flag, double* out, int n, short s, long long big, float f, unsigned char u) {
    if (threadIdx.x == 0 && flag) { out[0] = n; out[1] = s; out[2] = double(big); out[3] = f; out[4] = u; }
}
"""


def test_arguments_are_packed_at_their_c_offsets():
    # Mixed sizes and alignments: a layout mismatch between Python's record and the C parameters
    # would read shifted bytes.
    k = load_source(MIXED_SRC, None, "mixed.cu").get("mixed")
    out = gpublas.zeros(5, np.float64)
    k(1, 32, 1, out, -7, -3, 1 << 40, 2.5, 200)
    np.testing.assert_array_equal(out.get(), [-7, -3, 2.0 ** 40, 2.5, 200])


def test_argument_out_of_range_is_a_type_error_naming_it():
    k = load_source(MIXED_SRC, None, "mixed.cu").get("mixed")
    out = gpublas.zeros(5, np.float64)
    with pytest.raises(TypeError, match=r"kernel 'mixed': argument 2 \(int32\) cannot take 4294967296"):
        k(1, 32, 1, out, 1 << 32, 0, 0, 0.0, 0)
    with pytest.raises(TypeError, match=r"argument 5 \(float\) cannot take 'x'"):
        k(1, 32, 1, out, 0, 0, 0, "x", 0)
