"""Level-1 BLAS against NumPy and scipy.linalg.blas (saxpy/daxpy, sscal, snrm2, isamax ...)."""
import numpy as np
import pytest
from scipy.linalg import blas as sblas

import gpublas
from reference import assert_close

DTYPES = [np.float32, np.float64]
SIZES = [0, 1, 2, 7, 31, 33, 64, 127, 129, 1000]


def blas(name, dtype):
    return getattr(sblas, ("s" if np.dtype(dtype) == np.float32 else "d") + name)


def close(got, want, dtype, k=1):
    rtol = 16 * float(np.finfo(dtype).eps) * max(1.0, np.sqrt(k))
    assert abs(got - want) <= rtol * (1.0 + abs(want)), (got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_axpy_scal_copy_swap(rng, dtype, n):
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)
    assert gpublas.axpy(-1.5, dx, dy) is dy
    assert_close(dy, blas("axpy", dtype)(x, y.copy(), a=-1.5) if n else y)  # scipy's BLAS refuses n = 0
    assert gpublas.scal(0.25, dx) is dx
    assert_close(dx, blas("scal", dtype)(0.25, x.copy()) if n else x)
    dz = gpublas.zeros(n, dtype)
    assert gpublas.copy(dx, dz) is dz
    np.testing.assert_array_equal(dz.get(), dx.get())
    before_x, before_y = dx.get(), dy.get()
    gpublas.swap(dx, dy)
    np.testing.assert_array_equal(dx.get(), before_y)
    np.testing.assert_array_equal(dy.get(), before_x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES + [300_000])  # 300k: more than 1024 blocks of 256, so grid-stride partials
def test_reductions(rng, dtype, n):
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    close(gpublas.dot(dx, dy), float(x64 @ y64), dtype, k=n)
    close(gpublas.asum(dx), float(np.abs(x64).sum()), dtype, k=n)
    close(gpublas.nrm2(dx), float(np.sqrt(x64 @ x64)), dtype, k=n)
    if n:
        close(gpublas.dot(dx, dy), float(blas("dot", dtype)(x, y)), dtype, k=n)
        close(gpublas.nrm2(dx), float(blas("nrm2", dtype)(x)), dtype, k=n)
        close(gpublas.asum(dx), float(blas("asum", dtype)(x)), dtype, k=n)
        isamax = getattr(sblas, "i" + ("s" if dtype == np.float32 else "d") + "amax")  # 0-based in scipy
        assert gpublas.iamax(dx) == int(np.argmax(np.abs(x))) == int(isamax(x))
    types = {type(gpublas.dot(dx, dy)), type(gpublas.nrm2(dx)), type(gpublas.asum(dx))}
    assert types == {float}


@pytest.mark.parametrize("dtype", DTYPES)
def test_iamax_first_of_ties(dtype):
    x = np.array([1, -5, 3, 5, -5, 2], dtype)
    assert gpublas.iamax(gpublas.to_device(x)) == 1
    big = np.zeros(70_000, dtype)
    big[[40_000, 512, 69_999]] = [-7, 7, 7]  # ties across blocks: the lowest index wins
    assert gpublas.iamax(gpublas.to_device(big)) == 512
    assert gpublas.iamax(gpublas.to_device(np.zeros(33, dtype))) == 0
    with pytest.raises(ValueError, match="no elements"):
        gpublas.iamax(gpublas.zeros(0, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_iamax_iamin_skip_nan_and_find_the_first_across_runs(rng, dtype):
    # runs of about a thousand elements a thread on the simulator, scanned 16 at a time: the best value sits on
    # a scan group's last element, ties in other runs and inside the group, NaNs before it
    x = rng.uniform(-1, 1, 5003).astype(dtype)
    x[[7, 1500, 4000]] = np.nan
    x[[1023, 2047, 4001]] = [-9, 9, 9]
    x[[15, 3001, 3002]] = [0, 0, 0]
    for view in (slice(None), slice(None, None, 2), slice(None, None, -1), slice(1, None, 3)):
        v = x[view]
        assert gpublas.iamax(gpublas.to_device(x)[view]) == int(np.nanargmax(np.abs(v)))
        assert gpublas.iamin(gpublas.to_device(x)[view]) == int(np.nanargmin(np.abs(v)))
    inf = np.full(3000, np.inf, dtype)
    inf[2500] = 1
    assert gpublas.iamin(gpublas.to_device(inf)) == 2500
    assert gpublas.iamax(gpublas.to_device(inf)) == 0


def test_nrm2_scaled_float32():
    for value in (1e30, 1e36, 1e-30, 1e-44):  # squares overflow / underflow float32
        x = np.full(1000, value, np.float32)
        x[::3] *= -1
        want = float(sblas.snrm2(x))
        assert np.isfinite(want) and want > 0
        got = gpublas.nrm2(gpublas.to_device(x))
        if value > 1e-40:
            close(got, want, np.float32, k=1000)
        else:  # 1e-44 is subnormal: only a few bits of precision in each element
            np.testing.assert_allclose(got, want, rtol=1e-2)
    mixed = np.array([1e30, 1e-30, -3e29, 0, 4e29], np.float32)
    close(gpublas.nrm2(gpublas.to_device(mixed)), float(np.linalg.norm(mixed.astype(np.float64))), np.float32, k=5)
    assert gpublas.nrm2(gpublas.zeros(10)) == 0.0
    overflow = np.full(1000, 3e38, np.float32)  # the norm itself exceeds float32: inf, as the reference
    assert gpublas.nrm2(gpublas.to_device(overflow)) == float(sblas.snrm2(overflow)) == np.inf
    assert gpublas.nrm2(gpublas.to_device(np.array([1, np.inf, 2], np.float32))) == np.inf
    assert np.isnan(gpublas.nrm2(gpublas.to_device(np.array([1, np.nan, 1e30], np.float32))))


def test_nrm2_scaled_float64():
    for value in (1e300, 1e-300):
        x = np.full(64, value)
        close(gpublas.nrm2(gpublas.to_device(x)), 8 * value, np.float64, k=64)


@pytest.mark.parametrize("values", [
    [1e300, 1e-300, 3.0],            # a big, a tiny and a middle element: Blue's big sum with the middle one
    [1e-160] * 1000,                 # squares below the normal range: the small sum alone
    [1e-160] * 999 + [1e-150],       # two small ones
    [1e-300] * 64 + [2.0, -3.0],     # the small sum with the middle one
    [1e200] * 100,                   # squares above the range: the big sum
    [1e154, -1e154],                 # each square fits, their sum does not
    [0.0] * 40,                      # nothing but zeros: the second walk finds zeros too
    [3e-155, 4e-155],                # at the small threshold
])
def test_nrm2_float64_in_one_pass_as_the_reference(values):
    # a plain sum of squares where it stays in range, else Blue's three scaled sums (the reference dnrm2's)
    x = np.array(values, np.float64)
    want = float(sblas.dnrm2(x))
    for stride in (1, 2):
        host = np.repeat(x, stride) if stride > 1 else x
        got = gpublas.nrm2(gpublas.to_device(host)[::stride])
        assert got == pytest.approx(want, rel=8e-16 * len(x), abs=0), (values[:3], got, want)
    with_inf, with_nan = np.append(x, np.inf), np.append(x, np.nan)
    assert gpublas.nrm2(gpublas.to_device(with_inf)) == np.inf
    assert np.isnan(gpublas.nrm2(gpublas.to_device(with_nan)))
    assert np.isnan(gpublas.nrm2(gpublas.to_device(np.array([np.inf, np.nan, 1.0]))))


@pytest.mark.parametrize("dtype", DTYPES)
def test_axpy_alpha_zero_reads_nothing(rng, dtype):
    y = rng.standard_normal(33).astype(dtype)
    dy = gpublas.to_device(y)
    gpublas.axpy(0.0, gpublas.to_device(np.full(33, np.nan, dtype)), dy)
    np.testing.assert_array_equal(dy.get(), y)


def test_reductions_identical_under_thread_orders(rng, sim_order):
    x = gpublas.to_device(rng.standard_normal(5000).astype(np.float32))
    y = gpublas.to_device(rng.standard_normal(5000).astype(np.float32))
    first = gpublas.dot(x, y), gpublas.nrm2(x), gpublas.asum(x), gpublas.iamax(x)
    if gpublas.backend() == "sim":
        gpublas.sim_thread_order("random")
    assert (gpublas.dot(x, y), gpublas.nrm2(x), gpublas.asum(x), gpublas.iamax(x)) == first


def test_errors_name_shapes():
    x32, y32 = gpublas.zeros(3), gpublas.zeros(4)
    for f in (gpublas.dot, gpublas.copy, gpublas.swap):
        with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
            f(x32, y32)
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        gpublas.axpy(1.0, x32, y32)
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.axpy(1.0, x32, gpublas.zeros(3, np.float64))
    with pytest.raises(ValueError, match="int32"):
        gpublas.nrm2(gpublas.zeros(3, np.int32))
    with pytest.raises(TypeError, match="DeviceArray"):
        gpublas.dot(np.zeros(3, np.float32), x32)
