"""The simulator's run forms of Conv2d's and the pools' data movement (nn/cuda/conv.cu, nn/cuda/pool.cu,
swap01 of cuda_src/transpose.cu: a thread's run walked in row segments or, for conv's small planes, whole planes
through a tap table, the divisions hoisted): the same bits as
the grid-stride form a GPU runs (GRID_STRIDE_GPU_FORM builds it on the simulator), over strides, padding and
dilation that cut rows at both ends, sizes that cut runs mid-row and mid-plane, and grids with threads that find
no element."""
import numpy as np
import pytest

import gpublas
from gpublas.runtime import launch
from gpublas.runtime.launch import fast_divisor as fd
from nn.kernels import KERNELS
from nn.kernels.activation import ACT
from nn.layers.conv import out_size

# "rows": the simulator's row-segment forms of im2col and col2im, which it takes for planes too large for its
# tap table (CONV_SIM_TABLE entries; these tests' small planes take the table)
FORMS = {"sim": {}, "gpu": {"GRID_STRIDE_GPU_FORM": 1}, "rows": {"CONV_SIM_TABLE": 0}}
GRIDS = [(1, 1), (1, 32), (3, 64), (2, 7)]
# (N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw)
CONVS = [(2, 3, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1), (3, 2, 7, 9, 3, 2, 2, 3, 1, 2, 1, 1),
         (1, 2, 9, 6, 2, 3, 1, 2, 0, 3, 2, 2), (2, 1, 5, 5, 5, 5, 1, 1, 2, 2, 1, 1), (2, 3, 4, 11, 1, 4, 3, 1, 0, 0, 1, 3)]
# (N, C, H, W, kh, kw, sh, sw, ph, pw): non-overlapping windows (backward by cells) and overlapping ones
POOLS = [(2, 3, 8, 8, 2, 2, 2, 2, 0, 0), (1, 2, 7, 9, 3, 2, 3, 2, 1, 1), (2, 2, 9, 7, 3, 3, 2, 1, 1, 1),
         (1, 3, 5, 6, 2, 3, 1, 2, 1, 0), (1, 2, 7, 9, 2, 2, 2, 1, 1, 1)]  # the last: the unrolled 2 x 2 window, padded


def kernel(family, name, dtype, form, root=KERNELS):
    return launch.get_kernel(family, name, dtype, root=root, **FORMS[form])


def both_forms(run, forms=("sim", "gpu")):
    """run(form) -> array, for each build: equal bit for bit."""
    a = run(forms[0])
    for form in forms[1:]:
        np.testing.assert_array_equal(a, run(form), err_msg=f"{forms[0]} and {form} forms differ")
    return a


def conv_args(N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw):
    OH, OW = out_size(H, kh, sh, ph, dh), out_size(W, kw, sw, pw, dw)
    return (OH, OW), (fd(N), fd(C), fd(H), fd(W), fd(kh), fd(kw), fd(sh), fd(sw), ph, pw, dh, dw, fd(OH), fd(OW))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_im2col_and_col2im_equal_the_gpu_form(rng, dtype):
    for shape in CONVS:
        N, C, H, W, kh, kw = shape[:6]
        (OH, OW), sizes = conv_args(*shape)
        x = rng.standard_normal((N, C, H, W)).astype(dtype)
        dcols = rng.standard_normal((C * kh * kw, N * OH * OW)).astype(dtype)
        for grid, block in GRIDS:
            def im2col(form):
                cols = gpublas.to_device(np.full(dcols.shape, np.nan, dtype))
                kernel("conv", "im2col_nchw", dtype, form)(grid, block, gpublas.to_device(x), cols, *sizes,
                                                          fd(N * OH * OW))
                return cols.get()
            cols = both_forms(im2col, ("sim", "gpu", "rows"))
            assert not np.isnan(cols).any()

            def col2im(form):
                dx = gpublas.to_device(np.full(x.shape, np.nan, dtype))
                kernel("conv", "col2im_nchw", dtype, form)(grid, block, gpublas.to_device(dcols), dx, *sizes)
                return dx.get()
            dx = both_forms(col2im, ("sim", "gpu", "rows"))
        # col2im is im2col's adjoint: <im2col(x), dcols> = <x, col2im(dcols)>
        np.testing.assert_allclose(np.vdot(cols, dcols), np.vdot(x, dx), rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cnp_to_nchw_bias_and_swap01_equal_the_gpu_form(rng, dtype):
    for N, C, P in [(2, 3, 5), (3, 4, 64), (5, 2, 17), (1, 7, 1)]:
        Y = (rng.standard_normal((C, N * P)) * 2).astype(dtype)
        b = rng.standard_normal(C).astype(dtype)
        want = Y.reshape(C, N, P).transpose(1, 0, 2) + b[None, :, None]
        for grid, block in GRIDS:
            for act in (ACT["identity"], ACT["relu"], ACT["tanh"]):
                for bias in (b, None):
                    def cnp(form):
                        y = gpublas.empty((N, C, P), dtype)
                        kernel("conv", "cnp_to_nchw_bias", dtype, form)(
                            grid, block, gpublas.to_device(Y), None if bias is None else gpublas.to_device(bias), y,
                            N, fd(C), fd(P), act)
                        return y.get()
                    y = both_forms(cnp)
                    if act == ACT["identity"] and bias is not None:
                        np.testing.assert_array_equal(y, want)

            def swap(form):
                y = gpublas.empty((C, N, P), dtype)
                kernel("transpose", "swap01", dtype, form, root=None)(
                    grid, block, gpublas.to_device(want), y, fd(N), C, fd(P))
                return y.get()
            np.testing.assert_array_equal(both_forms(swap), want.transpose(1, 0, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pools_equal_the_gpu_form(rng, dtype):
    for N, C, H, W, kh, kw, sh, sw, ph, pw in POOLS:
        OH, OW = out_size(H, kh, sh, ph), out_size(W, kw, sw, pw)
        sizes = (N * C, fd(H), fd(W), fd(OH), fd(OW), kh, kw, fd(sh), fd(sw), ph, pw)
        x = rng.standard_normal((N, C, H, W)).astype(dtype)
        x.flat[::7] = x.flat[1::7]  # ties: the first max wins
        x.flat[5] = np.nan          # a NaN wins its windows
        dy = rng.standard_normal((N, C, OH, OW)).astype(dtype)
        for grid, block in GRIDS:
            def forward(form):
                y, idx = gpublas.empty(dy.shape, dtype), gpublas.empty(dy.shape, np.int32)
                kernel("pool", "maxpool_forward", dtype, form)(grid, block, gpublas.to_device(x), y, idx, *sizes)
                a = gpublas.empty(dy.shape, dtype)
                kernel("pool", "avgpool_forward", dtype, form)(grid, block, gpublas.to_device(x), a, *sizes)
                return np.concatenate([y.get().ravel(), idx.get().ravel().astype(dtype), a.get().ravel()])
            out = both_forms(forward)
            idx = out[dy.size:2 * dy.size].astype(np.int32).reshape(dy.shape)

            def backward(form):
                dx = gpublas.to_device(np.full(x.shape, np.nan, dtype))
                kernel("pool", "maxpool_backward", dtype, form)(grid, block, gpublas.to_device(dy),
                                                               gpublas.to_device(idx), dx, *sizes)
                da = gpublas.to_device(np.full(x.shape, np.nan, dtype))
                kernel("pool", "avgpool_backward", dtype, form)(grid, block, gpublas.to_device(dy), da, *sizes)
                return np.concatenate([dx.get().ravel(), da.get().ravel()])
            dx = both_forms(backward)
            assert not np.isnan(dx[x.size:]).any()

            def stray(form):  # argmaxes moved by one (some outside their cell): what the GPU form writes
                dx = gpublas.to_device(np.full(x.shape, np.nan, dtype))
                kernel("pool", "maxpool_backward", dtype, form)(grid, block, gpublas.to_device(dy),
                                                               gpublas.to_device(idx + 1), dx, *sizes)
                return dx.get()
            both_forms(stray)
