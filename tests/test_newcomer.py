"""What a CuPy or NumPy user types right after the README (issue 34, the array side), each checked
against NumPy: 0-d arrays (iteration, format, 1-D @ 1-D, int64 arg-reductions), complex @, astype's
ComplexWarning and copy=False, pickle and deepcopy, and the refusal's message for a NumPy function
gpublas lacks."""
import copy
import pickle
import warnings

import numpy as np
import pytest

import gpublas


def dev(h):
    return gpublas.to_device(np.asarray(h))


# -- 0-d arrays ------------------------------------------------------------------------------------
def test_zero_d_iteration_raises_as_numpy():
    a = dev(np.arange(6, dtype=np.float32).reshape(2, 3))
    for it in (list, tuple, iter, lambda x: list(zip(x, x))):
        with pytest.raises(TypeError, match="iteration over a 0-d array"):
            it(a.sum())
        with pytest.raises(TypeError):
            it(np.array(1.0))  # NumPy raises too
    rows = list(a)  # n-d: the subarrays along the first axis, as NumPy's
    assert len(rows) == 2 and all(isinstance(r, gpublas.DeviceArray) for r in rows)
    np.testing.assert_array_equal(rows[1].get(), [3, 4, 5])
    assert [float(v) for v in a[0]] == [0.0, 1.0, 2.0]


def test_format_of_a_zero_d_array_is_numpys():
    h = np.array([[1.0, 2.5], [3.25, 7.0]], np.float32)
    a = dev(h)
    assert f"{a.mean():.3f}" == f"{h.mean():.3f}" == "3.438"
    assert f"{a.sum():>8.2e}" == f"{h.sum():>8.2e}"
    assert f"{dev(np.array(7, np.int64)):04d}" == "0007"
    assert f"{a}" == str(h) and format(a.sum()) == format(h.sum())
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{a:.3f}"  # noqa: B018 (NumPy refuses a spec for an n-d array too)


def test_vector_dot_vector_is_a_zero_d_device_array():
    x, y = np.arange(1.0, 6.0), np.linspace(-1.0, 2.0, 5)
    for got in (dev(x) @ dev(y), np.matmul(dev(x), dev(y)), np.dot(dev(x), dev(y)), dev(x).dot(dev(y))):
        assert isinstance(got, gpublas.DeviceArray) and got.shape == () and got.dtype == np.float64
        np.testing.assert_allclose(got.get(), x @ y, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_arg_reductions_are_int64(dtype):
    h = np.array([[3, 9, 1], [7, 2, 7]], dtype)
    a = dev(h)
    for got, want in ((a.argmax(), h.argmax()), (a.argmax(axis=1), h.argmax(axis=1)), (np.argmax(a), np.argmax(h)),
                      (a.argmin(axis=0), h.argmin(axis=0)), (np.argmin(a, axis=1), np.argmin(h, axis=1))):
        assert got.dtype == np.int64 == np.asarray(want).dtype
        np.testing.assert_array_equal(got.get(), want)


# -- complex ---------------------------------------------------------------------------------------
def crand(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_matmul_runs_the_complex_gemm(dtype, rng):
    tol = 1e-5 if dtype == np.complex64 else 1e-12
    a, b, v = crand(rng, (3, 5), dtype), crand(rng, (5, 2), dtype), crand(rng, 5, dtype)
    s = crand(rng, (4, 3, 5), dtype)
    cases = [(dev(a) @ dev(b), a @ b), (np.matmul(dev(a), dev(b)), a @ b), (np.dot(dev(a), dev(b)), a @ b),
             (dev(a) @ dev(v), a @ v), (dev(v) @ dev(b), v @ b), (dev(v) @ dev(v), v @ v),
             (dev(s) @ dev(b), s @ b), (dev(a) @ dev(s).transpose(0, 2, 1), a @ s.transpose(0, 2, 1)),
             (dev(a.real.copy()) @ dev(b), a.real @ b)]  # float @ complex: NumPy's promotion
    for got, want in cases:
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.get(), want, rtol=tol, atol=tol * 10)


def test_astype_complex_to_real_warns_as_numpy():
    z = dev(np.array([1 + 2j, -3j], np.complex64))
    with pytest.warns(np.exceptions.ComplexWarning):
        r = z.astype(np.float32)
    np.testing.assert_array_equal(r.get(), [1, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(z.astype(np.bool_).get(), [True, True])  # NumPy: no warning to bool
        z.astype(np.complex128)


def test_astype_copy_false_returns_self_when_nothing_converts():
    a = dev(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert a.astype(np.float32, copy=False) is a and a.T.astype("float32", copy=False).base is a
    assert a.astype(np.float32) is not a
    b = a.astype(np.float64, copy=False)
    assert b is not a and b.dtype == np.float64


# -- pickle and deepcopy ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.complex64, gpublas.bfloat16])
def test_pickle_and_deepcopy_round_trip(dtype):
    h = np.arange(12).reshape(3, 4).astype(dtype)
    a = dev(h)
    for x, want in ((a, h), (a[:, 1::2], h[:, 1::2]), (a.T, h.T), (a[1, 2], h[1, 2])):
        for b in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x), copy.copy(x)):
            assert isinstance(b, gpublas.DeviceArray) and b.dtype == x.dtype and b.shape == x.shape
            assert b.c_contiguous and b.base is None and not gpublas.may_share_memory(a, b)
            np.testing.assert_array_equal(b.get(), want)
    nested = copy.deepcopy({"w": a, "same": a})
    assert nested["w"] is nested["same"]  # deepcopy's memo: one copy of one array


# -- refusals --------------------------------------------------------------------------------------
def test_refusal_names_the_function_and_every_array_argument():
    a = dev(np.ones(3, np.float32))  # functions gpublas lacks (allclose and linalg.norm, the issue's, now exist)
    with pytest.raises(TypeError, match=r"numpy\.convolve\(a\.get\(\), b\.get\(\)\)"):
        np.convolve(a, a)
    with pytest.raises(TypeError, match=r"numpy\.linalg\.cond is not implemented.*numpy\.linalg\.cond\(a\.get\(\), "
                                        r"p=2\)"):
        np.linalg.cond(a, p=2)
    with pytest.raises(TypeError, match=r"numpy\.logaddexp\(a\.get\(\), 1\.0\)"):
        np.logaddexp(a, 1.0)


# -- bitwise and logical ufuncs --------------------------------------------------------------------
def test_mask_operators_and_logical_functions():
    h = np.array([0.0, 1.5, 2.0, 4.0, 5.0, -1.0], np.float32)
    a = dev(h)
    m, hm = (a > 1) & (a < 5), (h > 1) & (h < 5)
    for got, want in ((m, hm), (~m, ~hm), ((a < 1) | (a > 4), (h < 1) | (h > 4)), (m ^ (a > 3), hm ^ (h > 3)),
                      (m & True, hm & True), (False | m, False | hm), (np.logical_and(a, m), np.logical_and(h, hm)),
                      (np.logical_or(a, 0), np.logical_or(h, 0)), (np.logical_not(a), np.logical_not(h)),
                      (np.logical_xor(a > 1, m), np.logical_xor(h > 1, hm)), (np.invert(m), np.invert(hm)),
                      (gpublas.logical_not(dev(h.astype(np.complex64))), np.logical_not(h.astype(np.complex64)))):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got.get(), want)
    m |= a < 0
    np.testing.assert_array_equal(m.get(), hm | (h < 0))
    with pytest.raises(TypeError):
        a & a  # noqa: B018 (NumPy: no bitwise and of floats)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_integer_bitwise_operators(dtype):
    info = np.iinfo(dtype)
    h = np.array([0, 1, 5, 12, info.max, info.min, info.max // 3], dtype)
    s = np.array([0, 1, 3, 7, 2, 1, info.bits - 1], dtype)
    a, b = dev(h), dev(s)
    cases = [(a & b, h & s), (a | b, h | s), (a ^ b, h ^ s), (~a, ~h), (a << b, h << s), (a >> b, h >> s),
             (a & 6, h & 6), (6 | a, 6 | h), (a ^ 3, h ^ 3), (a << 2, h << 2), (a >> 1, h >> 1), (1 << b, 1 << s),
             (np.bitwise_and(a, b), np.bitwise_and(h, s)), (np.left_shift(a, b), np.left_shift(h, s)),
             (np.bitwise_not(a), np.bitwise_not(h)), (-a, -h), (a + a, h + h), (a * 3, h * 3), (a // 3, h // 3),
             (a % 5, h % 5), (a.max(), h.max()), (a.min(axis=0), h.min(axis=0)), (a.sum(), h.sum()),
             (a.argmax(), h.argmax()), (a == b, h == s), (abs(a), np.abs(h))]
    for got, want in cases:
        assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
        np.testing.assert_array_equal(got.get(), want)
    width = np.array([info.bits, info.bits + 3, 100 % 127], dtype)  # NumPy: past the width, 0 (or the sign)
    np.testing.assert_array_equal((dev(h[:3]) << dev(width)).get(), h[:3] << width)
    np.testing.assert_array_equal((dev(h[4:7]) >> dev(width)).get(), h[4:7] >> width)
    c = a.copy()
    c &= 12
    c >>= 1
    np.testing.assert_array_equal(c.get(), (h & 12) >> 1)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint16, np.uint32, np.uint64])
def test_new_integer_dtypes_convert_and_round_trip(dtype):
    h = np.array([[0, 1, 7], [np.iinfo(dtype).max, np.iinfo(dtype).min, 3]], dtype)
    a = dev(h)
    assert a.dtype == dtype and a.get().dtype == dtype
    np.testing.assert_array_equal(a.get(), h)
    for t in (np.float64, np.int64, np.uint8, np.bool_):
        np.testing.assert_array_equal(a.astype(t).get(), h.astype(t))
    f = np.array([0.0, 1.9, 99.5, 127.0], np.float32)  # in every type's range (C's conversion truncates)
    np.testing.assert_array_equal(dev(f).astype(dtype).get(), f.astype(dtype))
    np.testing.assert_array_equal(a.T[::-1].get(), h.T[::-1])  # a strided copy of the new dtype
    np.testing.assert_array_equal(a[a > 2].get(), h[h > 2])
    np.testing.assert_array_equal(gpublas.zeros(3, dtype).get(), np.zeros(3, dtype))
    np.testing.assert_array_equal((a + np.uint8(1)).get(), h + np.uint8(1))
    assert (a + 1.5).dtype == (h + 1.5).dtype


# -- indexing, astype(copy=), softmax(axis=) -------------------------------------------------------
def test_several_index_arrays_as_numpy():
    h = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    r, c = np.array([0, 2, 1, 2]), np.array([[1], [2]])
    keys = [(r, np.array([0, 1, 2, 3])), (r, slice(None), np.array([4, 0, 1, 2])), (slice(None), c, np.array([4, 0])),
            (1, r[:2], np.array([0, 4])), (r[:2], 0, np.array([0, 4])), (Ellipsis, np.array([0, 3]), np.array([1, 2])),
            (h[:, :, 0] > 20, np.array([1, 2, 3, 4, 0, 1, 2])), (c, slice(None, None, -1), np.array([1, 3, 4])),
            (slice(None, None, -1), r, np.array([[0], [4]])), ([0, 2], [1, 1], [2, 3])]
    for k in keys:
        dk = tuple(dev(x) if isinstance(x, np.ndarray) else x for x in k)
        want = h[k]
        got = dev(h)[dk]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.get(), want)
        h2, d2 = h.copy(), dev(h)
        h2[k] = -np.arange(want.size, dtype=np.float32).reshape(want.shape)
        d2[dk] = -np.arange(want.size, dtype=np.float32).reshape(want.shape)
        np.testing.assert_array_equal(d2.get(), h2)
    m, d = h[:, :, 0].copy(), dev(h[:, :, 0].copy())
    m[[0, 0, 2], [1, 1, 3]] = [5, 6, 7]
    d[[0, 0, 2], [1, 1, 3]] = np.array([5, 6, 7], np.float32)  # a repeated position: the last write wins
    np.testing.assert_array_equal(d.get(), m)
    with pytest.raises(IndexError, match="could not be broadcast together"):
        dev(h)[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 1"):
        dev(h)[[0, 1], [0, 5]]


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_softmax_and_logsumexp_on_any_axis(axis, rng):
    special = pytest.importorskip("scipy.special")
    h = rng.standard_normal((3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(gpublas.softmax(dev(h), axis=axis).get(), special.softmax(h, axis=axis), rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(gpublas.logsumexp(dev(h), axis=axis, keepdims=True).get(),
                               special.logsumexp(h, axis=axis, keepdims=True), rtol=1e-5)
    out = gpublas.empty((5, 4, 3), np.float32).T  # a transposed out is written through its strides
    assert gpublas.softmax(dev(h), axis=axis, out=out) is out
    np.testing.assert_allclose(out.get(), special.softmax(h, axis=axis), rtol=1e-5, atol=1e-7)
