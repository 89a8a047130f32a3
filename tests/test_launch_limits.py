"""Launch limits a GPU enforces, checked by launch.Kernel on every backend (so the simulator refuses
what a GPU would), and the launches that could exceed them striding or chunking instead."""
import numpy as np
import pytest

import gpublas
from gpublas.runtime.launch import load_source

SRC = """
extern "C" __global__ void touch(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 1.f;
}
extern "C" __global__ void dyn_reverse(const float* x, float* y, int n) {
    extern __shared__ float buf[];
    int t = threadIdx.x;
    for (int i = t; i < n; i += blockDim.x) buf[i] = x[i];
    __syncthreads();
    for (int i = t; i < n; i += blockDim.x) y[i] = buf[n - 1 - i];
}
#ifndef BOUND
#define BOUND 96
#endif
extern "C" __global__ void __launch_bounds__(BOUND, 2) bounded(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 1.f;
}
"""


def _kernel(name):
    return load_source(SRC, None, "limits_check.cu").get(name)


@pytest.mark.parametrize("grid, block, shared, why", [
    ((1, 65536), 32, 0, r"grid.y = 65536 is outside 0..65,535"),
    ((1, 1, 70000), 32, 0, r"grid.z = 70000 is outside 0..65,535"),
    (2**31, 32, 0, r"grid.x = 2147483648 is outside 0..2,147,483,647"),
    (1, 2048, 0, r"block.x = 2048 is outside 1..1024"),
    (1, (1, 1, 65), 0, r"block.z = 65 is outside 1..64"),
    (1, (32, 32, 2), 0, r"2048 threads per block exceeds 1024"),
    (1, (0, 4), 0, r"block.x = 0 is outside 1..1024"),
    (1, 32, 48 * 1024 + 4, r"0 B static \+ 49156 B dynamic shared memory exceeds 49152 B .*allow_shared"),
    (1, 32, -1, r"negative shared memory"),
])
def test_launch_refuses_what_a_gpu_refuses(grid, block, shared, why):
    k = _kernel("touch")
    y = gpublas.zeros((4,), np.float32)
    with pytest.raises(gpublas.LaunchError, match=r"kernel 'touch' \(grid .*\): " + why):
        k(grid, block, y, 4, shared=shared)
    assert not y.get().any()  # nothing ran


def test_limits_are_inclusive_and_empty_grids_do_nothing():
    k = _kernel("touch")
    y = gpublas.zeros((4,), np.float32)
    k((1, 0), 32, y, 4)  # an empty grid is not an error
    assert not y.get().any()
    k((1, 1, 1), (4, 1, 64), y, 4)  # block.z = 64 and 256 threads are allowed
    np.testing.assert_array_equal(y.get(), np.ones(4, np.float32))


@pytest.mark.parametrize("defines, bound", [(None, 96), ({"BOUND": 64}, 64)])
def test_a_block_past_the_kernels_launch_bounds_is_refused(defines, bound):
    # a GPU refuses the launch (too many resources requested), the simulator reads the bound from the source
    k = load_source(SRC, defines, "limits_check.cu").get("bounded")
    y = gpublas.zeros((4,), np.float32)
    with pytest.raises(gpublas.LaunchError, match=rf"kernel 'bounded' .*: {bound + 32} threads per block exceeds "
                                                  rf"{bound}, .*__launch_bounds__"):
        k(1, bound + 32, y, 4)
    k(1, bound, y, 4)
    np.testing.assert_array_equal(y.get(), np.ones(4, np.float32))


def test_dynamic_shared_memory_above_48k_needs_an_opt_in():
    n = 16 * 1024  # 64 KB of floats
    k = _kernel("dyn_reverse")
    x = gpublas.to_device(np.arange(n, dtype=np.float32))
    y = gpublas.zeros((n,), np.float32)
    with pytest.raises(gpublas.LaunchError, match="dyn_reverse.*opt in"):
        k(1, 256, x, y, n, shared=n * 4)
    with pytest.raises(gpublas.LaunchError, match="opt-in limit"):
        k.allow_shared(1 << 20)
    assert k.allow_shared(n * 4) is k
    k(1, 256, x, y, n, shared=n * 4)
    np.testing.assert_array_equal(y.get(), np.arange(n, dtype=np.float32)[::-1])


def test_transpose_strides_over_more_row_tiles_than_grid_y_holds():
    rows = 32 * 65535 + 33  # 65,537 row tiles: the blocks of grid.y = 65,535 take two steps each at the start
    x = (np.arange(rows * 2, dtype=np.float32) % 1021).reshape(rows, 2)
    np.testing.assert_array_equal(gpublas.transpose(gpublas.to_device(x)).get(), x.T)


def test_prebuild_compiles_families_as_get_kernel_finds_them():
    from gpublas.runtime.launch import prebuild
    b = gpublas._current_backend()
    results = prebuild(families=["memory", "transpose"], dtypes=[np.float32], workers=2)
    assert sorted(results) == [("memory", "float32", None), ("transpose", "float32", None)]
    before = dict(b.modules)
    gpublas.get_kernel("transpose", "transpose_tiled", np.float32)
    assert b.modules == before  # the kernel came from the pre-built module: nothing compiled
    (bad,) = prebuild(families=["no_such_family"], dtypes=[np.float32])
    assert bad[0] == "no_such_family" and "FileNotFoundError" in bad[2]
