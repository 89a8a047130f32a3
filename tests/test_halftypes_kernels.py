"""Kernels on float16 / bfloat16 data: elementwise maps, comparisons, where, reductions, softmax and
logsumexp load 16 bits, compute in float32 and round once to the dtype when they store. Arithmetic is
bit-exact against NumPy / ml_dtypes (which compute 16-bit ufuncs the same way); math functions are
the float32 function rounded once (within one 16-bit ulp: float32 libm may differ in its last bit);
reductions accumulate in float32."""
import ml_dtypes
import numpy as np
import pytest

import gpublas

HALVES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


def bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.itemsize}")


def same(got, ref):
    """Bit-equal, except that any NaN matches any NaN (CUDA's canonical NaN vs NumPy's payloads)."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    nan = np.isnan(ref.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(bits(got)[~nan], bits(ref)[~nan])


def sample(dtype, rng, shape, scale=4.0):
    x = (rng.standard_normal(shape) * scale).astype(dtype)
    flat = x.reshape(-1)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-7, 65504.0, 3e38], np.float32).astype(dtype)
    flat[:len(specials)] = specials[:flat.size]
    return x


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_arithmetic_is_the_float32_op_rounded_once(dtype, rng):
    a_h, b_h = sample(dtype, rng, (37, 41)), sample(dtype, rng, (37, 41))
    a, b = gpublas.to_device(a_h), gpublas.to_device(b_h)
    with np.errstate(all="ignore"):
        for got, ref in ((a + b, a_h + b_h), (a - b, a_h - b_h), (a * b, a_h * b_h), (a / b, a_h / b_h),
                         (gpublas.maximum(a, b), np.maximum(a_h, b_h)), (gpublas.minimum(a, b), np.minimum(a_h, b_h)),
                         (-a, -a_h), (abs(a), np.abs(a_h)), (a * dtype.type(0.1), a_h * dtype.type(0.1)),
                         (3 - a, 3 - a_h), (a / 7, a_h / 7),
                         (gpublas.relu(a), np.where(a_h > 0, a_h, np.where(np.isnan(a_h), a_h, 0)).astype(dtype)),
                         (gpublas.clip(a, dtype.type(-1), dtype.type(2.5)), np.clip(a_h, dtype.type(-1), dtype.type(2.5)).astype(dtype))):
            assert got.dtype == dtype
            same(got.get(), ref)
        # a Python float takes NumPy's promotion: float16 stays float16 (NEP 50's weak scalar),
        # bfloat16 * 0.1 is float32 in NumPy with ml_dtypes, and so here
        same((a * 0.1).get(), a_h * 0.1)
    # the float32 op rounded once, spelled out: a + b in float32, one cast
    same((a + b).get(), (a_h.astype(np.float32) + b_h.astype(np.float32)).astype(dtype))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_views_broadcasting_and_in_place(dtype, rng, sim_order):
    m_h = sample(dtype, rng, (6, 9, 5))
    row_h = sample(dtype, rng, (5,))
    m, row = gpublas.to_device(m_h), gpublas.to_device(row_h)
    with np.errstate(all="ignore"):
        same((m[:, ::2] * row).get(), m_h[:, ::2] * row_h)
        same((m.transpose(2, 0, 1) + m.transpose(2, 0, 1)[::-1]).get(),
             m_h.transpose(2, 0, 1) + m_h.transpose(2, 0, 1)[::-1])
        m[1:4] += row
        m_h[1:4] += row_h
    same(m.get(), m_h)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_math_functions_round_the_float32_result(dtype, rng):
    x_h = (rng.random(4001) * 6 - 3).astype(dtype)
    x = gpublas.to_device(x_h)
    x32 = x_h.astype(np.float32)
    for f, ref in ((gpublas.exp, np.exp), (gpublas.tanh, np.tanh), (gpublas.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
                   (lambda v: gpublas.log(abs(v)), lambda v: np.log(np.abs(v))),
                   (lambda v: gpublas.sqrt(abs(v)), lambda v: np.sqrt(np.abs(v))), (lambda v: v ** 2, np.square)):
        with np.errstate(all="ignore"):
            got = f(x).get()
            want = ref(x32).astype(np.float32).astype(dtype)
        assert got.dtype == dtype
        finite = np.isfinite(want.astype(np.float32))
        # one rounding of a float32 result that may differ from NumPy's in its last bit: equal or adjacent
        step = np.abs(bits(got)[finite].astype(np.int32) - bits(want)[finite].astype(np.int32))
        assert step.max() <= 1 and np.mean(step == 0) > 0.99


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_comparisons_and_where(dtype, rng):
    a_h, b_h = sample(dtype, rng, (50,)), sample(dtype, rng, (50,))
    a_h[10:15] = b_h[10:15]
    a, b = gpublas.to_device(a_h), gpublas.to_device(b_h)
    for got, ref in ((a == b, a_h == b_h), (a != b, a_h != b_h), (a < b, a_h < b_h), (a <= b, a_h <= b_h),
                     (a > 0.5, a_h > dtype.type(0.5)), (2 >= a, dtype.type(2) >= a_h)):
        np.testing.assert_array_equal(got.get(), ref)
    same(gpublas.where(a > b, a, b).get(), np.where(a_h > b_h, a_h, b_h))
    same(gpublas.where(a > 0, a, 0.3).get(), np.where(a_h > 0, a_h, dtype.type(0.3)))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_sums_accumulate_in_float32(dtype, sim_order):
    ones = gpublas.ones(3000, dtype) if hasattr(gpublas, "ones") else gpublas.full(3000, 1.0, dtype)
    total = gpublas.sum(ones)
    assert total.dtype == dtype and float(total) == float(np.array(3000.0, dtype))  # 3000 rounded once
    assert gpublas.sum(ones, dtype=np.float32).dtype == np.float32
    assert float(gpublas.sum(ones, dtype=np.float32)) == 3000.0  # a 16-bit accumulator stalls at 256 (bf16)
    assert float(gpublas.mean(ones)) == 1.0
    for n in (1, 31, 4096 * 3 + 7, 100_000):  # serial, warp, and two-pass row reductions
        x_h = np.full(n, 0.1, dtype)
        got = gpublas.sum(gpublas.to_device(x_h), dtype=np.float32).get()
        np.testing.assert_allclose(got, n * float(x_h[0]), rtol=1e-6)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("shape, axis", [((1,), None), ((7, 300), 1), ((300, 7), 0), ((4, 33, 5), 1),
                                         ((2, 9000), 1), ((3, 5), 0)])
def test_reductions_against_float32(dtype, shape, axis, rng, sim_order):
    x_h = (rng.standard_normal(shape) * 3).astype(dtype)
    x32 = x_h.astype(np.float32)
    x = gpublas.to_device(x_h)
    got = gpublas.sum(x, axis=axis, dtype=np.float32).get()
    np.testing.assert_allclose(got, x32.astype(np.float64).sum(axis=axis), rtol=1e-5, atol=1e-4)
    same(gpublas.sum(x, axis=axis).get(), got.astype(dtype))  # the float32 sum, rounded once
    same(gpublas.mean(x, axis=axis).get(), gpublas.mean(x, axis=axis, dtype=np.float32).get().astype(dtype))
    same(gpublas.max(x, axis=axis).get(), np.max(x_h, axis=axis))
    same(gpublas.min(x, axis=axis).get(), np.min(x_h, axis=axis))
    np.testing.assert_array_equal(gpublas.argmax(x, axis=axis).get(), np.argmax(x32, axis=axis))
    np.testing.assert_array_equal(gpublas.argmin(x, axis=axis).get(), np.argmin(x32, axis=axis))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_softmax_and_logsumexp(dtype, rng, sim_order):
    from scipy.special import logsumexp, softmax
    x_h = (rng.standard_normal((5, 77)) * 8).astype(dtype)
    x_h[0, :3] = [40000, -40000, 0] if dtype == np.float16 else [1e30, -1e30, 0]
    x = gpublas.to_device(x_h)
    x64 = x_h.astype(np.float64)
    p = gpublas.softmax(x).get()
    assert p.dtype == dtype
    ref = softmax(x64, axis=-1)
    np.testing.assert_allclose(p.astype(np.float64), ref, rtol=2 * float(ml_dtypes.finfo(dtype).eps), atol=1e-7)
    lse = gpublas.logsumexp(x).get()
    assert lse.dtype == dtype
    np.testing.assert_allclose(lse.astype(np.float64), logsumexp(x64, axis=-1), rtol=float(ml_dtypes.finfo(dtype).eps))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_transpose_and_axpby(dtype, rng):
    m_h = sample(dtype, rng, (33, 70))
    same(gpublas.transpose(gpublas.to_device(m_h)).get(), m_h.T)
    y_h = sample(dtype, rng, (33, 70))
    got = gpublas.axpby(0.5, gpublas.to_device(m_h), -2.0, gpublas.to_device(y_h)).get()
    with np.errstate(all="ignore"):
        same(got, (np.float32(0.5) * m_h.astype(np.float32) + np.float32(-2.0) * y_h.astype(np.float32)).astype(dtype))


def test_user_kernels_on_16bit_data():
    a_h = np.arange(-3, 5).astype(ml_dtypes.bfloat16)
    a = gpublas.to_device(a_h)
    k = gpublas.ElementwiseKernel("const __nv_bfloat16* x, float s, __nv_bfloat16* y",
                                  "y[i] = convert<__nv_bfloat16>(load_as(x[i]) * s)")
    y = gpublas.empty_like(a)
    k(a, 0.1, y)
    same(y.get(), (a_h.astype(np.float32) * np.float32(0.1)).astype(ml_dtypes.bfloat16))
    with pytest.raises(TypeError, match="__nv_bfloat16|bfloat16"):
        k(a.astype(np.float16), 0.1, y)  # a float16 array for a __nv_bfloat16* argument


def test_sum_and_mean_methods_take_dtype_as_the_functions_do():
    h = gpublas.to_device(np.ones(3000, gpublas.bfloat16))
    assert h.sum().get() == 3008 and h.sum(dtype=np.float32).get() == 3000.0  # one rounding vs FP32 kept
    assert h.mean(dtype=np.float32).dtype == np.float32
    with pytest.raises(TypeError):
        h.max(dtype=np.float32)  # max takes no dtype, as before
