"""The simulator's run forms of nn's elementwise kernels (nn/cuda/activation.cu: a thread's run taken 16 at a time,
tanh and GELU-tanh through vector_math.h's tanh): the same bits as the grid-stride form a GPU runs
(GRID_STRIDE_GPU_FORM builds it on the simulator), at sizes that cut runs and blocks of 16, grids with threads
that find no element, every activation, float32 and float64, a bias over (outer, C, inner) and the
pre-activation."""
import numpy as np
import pytest

import gpublas
from gpublas.runtime import launch
from nn.kernels import KERNELS
from nn.kernels.activation import ACT

FORMS = {"sim": {}, "gpu": {"GRID_STRIDE_GPU_FORM": 1}}
SIZES = [1, 37, 1000, 4099]
GRIDS = [(1, 32), (3, 64)]


def kernel(name, dtype, form):
    return launch.get_kernel("activation", name, dtype, root=KERNELS, **FORMS[form])


def both_forms(run):
    """run(form) -> list of arrays, for both builds: equal bit for bit."""
    a, b = run("sim"), run("gpu")
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activations_and_gradients_equal_the_gpu_form(rng, dtype):
    for n in SIZES:
        x = (rng.standard_normal(n) * 3).astype(dtype)
        dy = rng.standard_normal(n).astype(dtype)
        for act in sorted(set(ACT.values())):
            for grid, block in GRIDS:
                def run(form):
                    dx_, dy_ = gpublas.to_device(x), gpublas.to_device(dy)
                    y_ = gpublas.empty(x.shape, dtype)
                    g_ = gpublas.empty(x.shape, dtype)
                    kernel("act_forward", dtype, form)(grid, block, dx_, y_, n, act)
                    kernel("act_backward_input", dtype, form)(grid, block, dx_, dy_, g_, n, act)
                    o_ = gpublas.empty(x.shape, dtype)
                    kernel("act_backward", dtype, form)(grid, block, y_, dy_, o_, n, act)
                    return [y_.get(), g_.get(), o_.get()]
                y, g, _ = both_forms(run)
                if act == ACT["gelu_tanh"]:
                    x64 = x.astype(np.float64)
                    t = np.tanh(0.7978845608028654 * (x64 + 0.044715 * x64 ** 3))
                    np.testing.assert_allclose(y, 0.5 * x64 * (1 + t), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_act_equals_the_gpu_form(rng, dtype):
    for outer, C, inner in [(3, 5, 7), (37, 64, 1), (2, 3, 700)]:
        n = outer * C * inner
        x = rng.standard_normal(n).astype(dtype)
        b = rng.standard_normal(C).astype(dtype)
        for act in (ACT["identity"], ACT["relu"], ACT["gelu_tanh"], ACT["gelu"]):
            for grid, block in GRIDS:
                def run(form):
                    dx_, db_ = gpublas.to_device(x), gpublas.to_device(b)
                    y_, pre_ = gpublas.empty(x.shape, dtype), gpublas.empty(x.shape, dtype)
                    kernel("bias_act_forward", dtype, form)(grid, block, dx_, db_, y_, pre_, n,
                                                            launch.fast_divisor(C), launch.fast_divisor(inner), act)
                    return [y_.get(), pre_.get()]
                y, pre = both_forms(run)
                want = x.reshape(outer, C, inner) + b[:, None]
                np.testing.assert_array_equal(pre, want.reshape(-1))
