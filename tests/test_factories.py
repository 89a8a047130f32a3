"""ElementwiseKernel and ReductionKernel: generated CUDA C, run on the active backend."""
import numpy as np
import pytest
from reference import assert_close

import gpublas

SIZES = [1, 2, 7, 31, 33, 64, 127, 129, 255, 5000, 0]


def dev(x):
    return gpublas.to_device(x)


@pytest.fixture(scope="module")
def lin_comb():
    return gpublas.ElementwiseKernel("float a, float* x, float* y, float* z", "z[i] = a*x[i] + y[i]", "lin_comb")


def test_elementwise_kernel_lin_comb(lin_comb, rng):
    for n in SIZES:
        x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        z = gpublas.zeros(n, np.float32)
        lin_comb(2.0, dev(x), dev(y), z)
        assert_close(z, np.float32(2) * x + y, np.float32)


def test_elementwise_kernel_n_and_range(lin_comb, rng):
    x, y = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    z = gpublas.zeros(100, np.float32)
    lin_comb(1.0, dev(x), dev(y), z, n=10)
    want = np.zeros(100, np.float32)
    want[:10] = x[:10] + y[:10]
    assert_close(z, want, np.float32)
    z = gpublas.zeros(100, np.float32)
    lin_comb(1.0, dev(x), dev(y), z, range=slice(5, 95, 3))
    want = np.zeros(100, np.float32)
    want[5:95:3] = x[5:95:3] + y[5:95:3]
    assert_close(z, want, np.float32)
    with pytest.raises(ValueError, match="positive step"):
        lin_comb(1.0, dev(x), dev(y), z, range=slice(90, 0, -1))


def test_elementwise_kernel_with_preamble_double(sim_order, rng):
    k = gpublas.ElementwiseKernel(
        "const double* x, double* y, int shift",
        "y[i] = softplus(x[i]) + shift",
        "softplus_shift",
        preamble="__device__ double softplus(double v) { return v > 0 ? v + log1p(exp(-v)) : log1p(exp(v)); }")
    x = rng.standard_normal(129) * 10
    y = gpublas.empty(129, np.float64)
    k(dev(x), y, 3)
    assert_close(y, np.logaddexp(0, x) + 3, np.float64)
    assert "softplus" in k.source


def test_elementwise_kernel_argument_checks(lin_comb):
    x64 = gpublas.zeros(8, np.float64)
    x32 = gpublas.zeros(8, np.float32)
    with pytest.raises(TypeError, match="'x' is float32"):
        lin_comb(1.0, x64, x32, x32)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        lin_comb(1.0, x32, x32)
    with pytest.raises(TypeError, match="DeviceArray"):
        lin_comb(1.0, np.zeros(8, np.float32), x32, x32)


def test_n_beyond_an_array_or_the_index_type_raises_naming_it():
    # issue 14 item 2: these segfaulted (n past the array) or silently did nothing (2**70 wrapped)
    k = gpublas.ElementwiseKernel("float* x, const float* y", "x[i] = y[i] + 1", "y_plus_one")
    x, y = gpublas.zeros(4), gpublas.zeros(3)
    with pytest.raises(ValueError, match=r"n=65536 reaches index 65535 but argument 'x' has only 4 elements"):
        k(x, y, n=1 << 16)
    with pytest.raises(ValueError, match="argument 'y' has only 3 elements"):
        k(x, y, n=4)
    with pytest.raises(ValueError, match="64-bit index"):
        k(x, y, n=2**70)
    with pytest.raises(ValueError, match=r"range=range\(0, 4, 3\) reaches index 3 but argument 'y' has only 3"):
        k(x, y, range=range(0, 4, 3))
    with pytest.raises(ValueError, match="must not be negative"):
        k(x, y, range=range(-2, 2))
    k(x, y, range=range(0, 4, 2))  # last index 2: inside both
    np.testing.assert_array_equal(x.get(), [1, 0, 1, 0])
    k(x, y, n=0)
    r = gpublas.ReductionKernel(np.float32, "0", "a+b", "x[i]", "const float* x")
    with pytest.raises(ValueError, match="argument 'x' has only 4 elements"):
        r(x, n=1 << 16)
    with pytest.raises(ValueError, match="64-bit index"):
        r(x, n=2**70)
    assert float(r(x, n=3)) == 2.0


def test_compile_error_carries_the_log():
    with pytest.raises(gpublas.CompileError) as e:
        gpublas.ElementwiseKernel("float* z", "z[i] = no_such_variable * 2", "broken_kernel")
    assert "no_such_variable" in e.value.log
    assert "error" in e.value.log
    with pytest.raises(gpublas.CompileError) as e:
        gpublas.ReductionKernel(np.float32, "0", "a +* b", "x[i]", "float* x", name="broken_reduce")
    assert "error" in e.value.log


@pytest.fixture(scope="module")
def dot():
    return gpublas.ReductionKernel(np.float32, "0", "a+b", "x[i]*y[i]", "float* x, float* y", name="dot_f32")


def test_reduction_kernel_dot(dot, rng):
    for n in SIZES + [100003]:
        x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        r = dot(dev(x), dev(y))
        assert r.shape == () and r.dtype == np.float32
        assert_close(r, np.float32(np.dot(x.astype(np.float64), y)), np.float32, k=n)


def test_reduction_kernel_max_with_preamble_and_defaults(rng):
    preamble = "__device__ double magnitude(double v) { return fabs(v); }"
    absmax = gpublas.ReductionKernel(np.float64, "0", "a > b ? a : b", "magnitude(x[i])", "const double* x",
                                     name="absmax", preamble=preamble)
    total = gpublas.ReductionKernel(np.float64, "0", "a+b", name="plain_sum")  # arguments: const double* in
    for n in [1, 33, 255, 100003]:
        x = rng.standard_normal(n)
        assert float(absmax(dev(x))) == np.abs(x).max()
        assert_close(total(dev(x)), np.sum(x), np.float64, k=n)
        assert_close(total(dev(x), n=n // 2), np.sum(x[:n // 2]), np.float64, k=n)


def test_reduction_kernel_int_count(rng):
    count = gpublas.ReductionKernel(np.int32, "0", "a+b", "x[i] > threshold ? 1 : 0", "const float* x, float threshold",
                                    name="count_above")
    x = rng.standard_normal(10007).astype(np.float32)
    r = count(dev(x), 0.5)
    assert r.dtype == np.int32 and int(r) == int((x > 0.5).sum())


@pytest.mark.skipif(gpublas.backend() != "sim", reason="thread orders are a sim-backend property")
def test_reduction_kernel_identical_across_thread_orders(dot, rng):
    x, y = rng.standard_normal(100003).astype(np.float32), rng.standard_normal(100003).astype(np.float32)
    dx, dy = dev(x), dev(y)
    results = []
    try:
        for order in ["forward", "reverse", "random"]:
            gpublas.sim_thread_order(order)
            results.append(dot(dx, dy).get())
    finally:
        gpublas.sim_thread_order("forward")
    assert results[0] == results[1] == results[2]
