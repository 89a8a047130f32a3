"""Launch shapes picked per backend and the cached launch plan: what the profiler sees nn's launchers
and the GEMM dispatcher launch, and that a cached shape behaves as a fresh one."""
import numpy as np
import pytest

import gpublas
import nn
from gpublas import LaunchError
from gpublas.runtime import geometry, launch, source
from gpublas.core.elementwise import grid_for
from nn import kernels as K


def _launches(p):
    return {(e.name, e.grid, e.block): e.count for e in p.key_averages() if e.kind == "kernel"}


def test_nn_grid_stride_launchers_follow_the_backends_rule():
    x = gpublas.to_device(np.linspace(-1, 1, 32768).astype(np.float32))
    with gpublas.profile() as p:
        y = K.act_forward(x, gpublas.empty_like(x), K.act_code("relu"))
    # flat_geometry's: a GPU's 128 blocks of 256 threads; the sim's runs of SIM_RUN elements (32 threads in one block)
    grid, block = (128, 256) if gpublas.backend() == "cuda" else (1, 32768 // launch.SIM_RUN)
    assert geometry.flat_geometry(x.size) == (grid, block)
    assert _launches(p) == {("act_forward", (grid, 1, 1), (block, 1, 1)): 1}
    np.testing.assert_array_equal(y.get(), np.maximum(x.get(), 0))


@pytest.mark.parametrize("n", [1, 255, 2049])
def test_grid_stride_launchers_cover_every_element(n):
    x = gpublas.to_device(np.arange(n, dtype=np.float32) - n / 2)
    y = K.act_forward(x, gpublas.empty_like(x), K.act_code("relu"))
    np.testing.assert_array_equal(y.get(), np.maximum(x.get(), 0))


def test_gemm_dispatch_on_the_digits_conv_shapes():
    rng = np.random.default_rng(0)
    w, cols = rng.standard_normal((32, 144)).astype(np.float32), rng.standard_normal((144, 512)).astype(np.float32)
    dw, dcols = gpublas.to_device(w), gpublas.to_device(cols)
    with gpublas.profile() as p:
        y = gpublas.gemm(dw, dcols)                        # forward: 32 x 512 x 144
        g = gpublas.gemm(y, dcols, trans_b=True)           # weight gradient: 32 x 144 x 512
    names = sorted(name for name, _, _ in _launches(p))
    if gpublas.backend() == "sim":
        assert names == ["gemm_direct", "gemm_direct"]  # two launch shapes
    np.testing.assert_allclose(g.get(), (w @ cols) @ cols.T, rtol=2e-4, atol=2e-2)


def test_cached_plan_behaves_as_a_fresh_launch():
    k = gpublas.get_kernel("memory", "fill_real", np.float32)
    a = gpublas.zeros(600, np.float32)
    for value in (1.0, 2.0):
        k(3, 256, a, value, 600)                  # the second call takes the cached plan
        np.testing.assert_array_equal(a.get(), np.full(600, value, np.float32))
    assert k._plans[3, 256, 0][:2] == ((3, 1, 1), (256, 1, 1))  # then the sim's bound launch
    k([1, 1], [256], a, 5.0, 256)                 # lists are not hashable: converted every time
    np.testing.assert_array_equal(a.get()[:256], 5.0)
    k(0, 256, a, 9.0, 600)                        # an empty grid launches nothing, cached as such
    assert k._plans[0, 256, 0] is None and a.get()[-1] == 2.0
    for _ in range(2):                            # a refused shape is never cached
        with pytest.raises(LaunchError, match="block.x = 1025"):
            k(1, 1025, a, 0.0, 1)
    assert (1, 1025, 0) not in k._plans
    with pytest.raises(TypeError, match="takes 3 arguments"):
        k(3, 256, a, 1.0)                         # a cached shape still checks its arguments


@pytest.mark.parametrize("n", [1, 255, 1024, 1025, 2049, 32769, 131071, 131072, 262145])
def test_flat_launches_take_a_thread_per_run_on_the_sim(n):
    x = gpublas.to_device(np.arange(n, dtype=np.float32))
    y = gpublas.to_device(np.full(n, 0.5, np.float32))
    with gpublas.profile() as p:
        z = x + y
    grid, block = launch.flat_geometry(n)
    if gpublas.backend() == "sim":  # a thread per run of SIM_RUN elements: one block, then blocks the cores share
        runs = -(-n // launch.SIM_RUN)
        want = ((1, 1, 1), (runs, 1, 1)) if n < geometry.SIM_SPREAD else \
            ((-(-runs // geometry.SIM_BLOCK_RUNS), 1, 1), (geometry.SIM_BLOCK_RUNS, 1, 1))
    else:
        want = ((grid_for(n), 1, 1), (256, 1, 1))
    assert (grid, block) == (want[0][0], want[1][0])
    assert _launches(p) == {("binary_real", *want): 1}
    np.testing.assert_array_equal(z.get(), np.arange(n, dtype=np.float32) + 0.5)
    assert launch.geometry_1d(0)[0] == 0


def test_flat_kernels_say_their_blocks_spread_over_the_cores():
    # blas1.cu's and elementwise.cu's `// sim spread:` lines: a flat launch's few heavy blocks go to every core
    for family, name in [("blas1", "axpy_real"), ("blas1", "dot_partial"), ("elementwise", "binary_real")]:
        k = gpublas.get_kernel(family, name, np.float32)
        assert name in k._module._spread
        if gpublas.backend() == "sim":
            assert k._handle.spread[name] == [16]
    assert "sum_final" not in gpublas.get_kernel("blas1", "sum_final", np.float32)._module._spread
    with pytest.raises(LookupError, match="nope: not a kernel"):
        source.sim_spread("// sim spread: k nope\n", ["k"])
