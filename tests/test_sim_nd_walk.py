"""The strided layouts' walk (common.cuh NdLayout / Nd3Layout): on the simulator a thread's run goes row by row
of the innermost axis, its first element placed by division and the outer indices carried after (sim_walk_rows);
GRID_STRIDE_GPU_FORM builds the GPU's division-per-element form. Both builds of the casts, on grids that leave
threads without elements and cut runs mid-row, against NumPy: transposes, reversed and broadcast (stride 0)
operands, rows of one element, more than 3 axes, under two thread orders."""
import numpy as np
import pytest

import gpublas
from gpublas.core import elementwise as ew, layout
from gpublas.core.array import SRC_CODES
from gpublas.runtime.launch import get_kernel

FORMS = [{}, {"GRID_STRIDE_GPU_FORM": 1}]
GRIDS = [(1, 1), (1, 32), (3, 7), (5, 64)]  # one thread for all; runs cut inside rows; idle threads


def _cases(rng):
    """(source view, destination view, NumPy source as the destination sees it) of several layouts."""
    a = rng.standard_normal((3, 5, 7, 2))
    b = rng.standard_normal((2, 3, 2, 5, 3))
    c = rng.standard_normal((4, 9))
    yield a.transpose(3, 1, 0, 2), lambda d: d.transpose(3, 1, 0, 2), np.empty((2, 5, 3, 7))
    yield a[::-1, :, ::-2], lambda d: d[::-1, :, ::-2], np.empty((3, 5, 4, 2))
    yield b.transpose(4, 0, 3, 1, 2), lambda d: d.transpose(4, 0, 3, 1, 2), np.empty((3, 2, 5, 3, 2))
    yield c[:, :1], lambda d: d[:, :1], np.empty((4, 1))                        # rows of one element
    yield c.T[:, ::-1], lambda d: d.T[:, ::-1], np.empty((9, 4))
    yield c[:1], lambda d: d[:1], np.empty((7, 3, 9))                           # broadcast: stride 0 axes


@pytest.mark.parametrize("form", FORMS, ids=["sim", "gpu"])
def test_strided_casts_place_every_element(form, rng, sim_order):
    for src_np, view, out_np in _cases(rng):
        base = src_np.base if src_np.base is not None else src_np
        dev = view(gpublas.to_device(np.ascontiguousarray(base)))
        want = np.broadcast_to(src_np, out_np.shape).astype(np.float32)
        for dst_perm in (None, "reversed"):
            dst_full = gpublas.zeros(out_np.shape[::-1] if dst_perm else out_np.shape, np.float32)
            dst = dst_full.transpose() if dst_perm else dst_full
            kind, args = layout.plan(dst.shape, dev, dst, flat=False)
            for suffix in ("_nd3", "_nd"):
                if suffix == "_nd3" and kind != "_nd3":
                    continue
                if suffix == "_nd":
                    args = layout.nd_args(dst.shape, dev, dst)
                k = get_kernel("memory", f"cast{suffix}_real", np.float32, **form)
                for grid, block in GRIDS:
                    dst_full[...] = 0
                    k(grid, block, dev, SRC_CODES[dev.dtype], dst, *args, views=True)
                    np.testing.assert_array_equal(dst.get(), want, err_msg=f"{src_np.shape} {suffix} {grid}x{block}")


@pytest.mark.parametrize("form", FORMS, ids=["sim", "gpu"])
def test_binary_nd_with_three_strided_operands(form, rng):
    """binary_nd_real (three operands of NdLayout<3>): a + b, a transposed, b reversed and broadcast, out a
    transposed view."""
    a = rng.standard_normal((4, 3, 5, 6)).astype(np.float32)
    b = rng.standard_normal((6, 1, 3)).astype(np.float32)
    av = gpublas.to_device(a).transpose(3, 0, 2, 1)            # (6, 4, 5, 3)
    bv = gpublas.to_device(b)[::-1]                            # (6, 1, 3), broadcast over 4 and 5 via stride 0
    out_full = gpublas.zeros((3, 5, 4, 6), np.float32)
    out = out_full.transpose(3, 2, 1, 0)
    k = get_kernel("elementwise", "binary_nd_real", np.float32, **form)
    bb = bv.reshape(6, 1, 1, 3)
    want = a.transpose(3, 0, 2, 1) + b[::-1].reshape(6, 1, 1, 3)
    args = layout.nd_args(out.shape, av, bb, out)
    for grid, block in GRIDS:
        out_full[...] = 0
        k(grid, block, av, bb, out, ew.ADD, *args, views=True)
        np.testing.assert_array_equal(out.get(), want, err_msg=f"{grid}x{block}")
