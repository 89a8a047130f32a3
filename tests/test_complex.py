"""complex64 / complex128 DeviceArrays (issue 23 item 1): transfers, casts, views, .real / .imag views,
DLPack, + - * / (arrays, scalars, broadcasts, views), abs (a real result), conj, exp / log / sqrt,
== / !=, sum / mean, each against NumPy in both sim thread orders. Kernels compute each part in the
component precision; products and sums may round differently from NumPy's SIMD loops (which fuse
multiply-adds), so values are compared within a few ulps of the component type."""
import numpy as np
import pytest

import gpublas

COMPLEX = [np.dtype(np.complex64), np.dtype(np.complex128)]
SHAPES = [(0,), (1,), (7,), (5, 13), (3, 1, 33)]


def crandn(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def close(got, ref, dtype, ulps=8):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape, ref.shape)
    eps = np.finfo(np.dtype(dtype).char.lower() if np.dtype(dtype).kind == "c" else dtype).eps
    scale = np.max(np.abs(ref)) if ref.size else 1
    np.testing.assert_allclose(got, ref, rtol=ulps * eps, atol=ulps * eps * scale)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_transfers_views_and_casts(dtype, rng):
    h = crandn(rng, (6, 9), dtype)
    a = gpublas.to_device(h)
    assert a.dtype == dtype and a.itemsize == dtype.itemsize
    np.testing.assert_array_equal(a.get(), h)
    np.testing.assert_array_equal(a[1::2, ::-3].get(), h[1::2, ::-3])
    np.testing.assert_array_equal(a.T.copy().get(), h.T)
    other = np.complex128 if dtype == np.complex64 else np.complex64
    np.testing.assert_array_equal(a.astype(other).get(), h.astype(other))
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for real in (np.float32, np.float64, np.int32, np.bool_):  # NumPy's: the real part; bool: nonzero
                np.testing.assert_array_equal(a.astype(real).get(), h.astype(real))
    h[0, :3] = 0
    h[1, 0] = 1j
    np.testing.assert_array_equal(gpublas.to_device(h).astype(np.bool_).get(), h.astype(np.bool_))
    r = rng.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_array_equal(gpublas.to_device(r).astype(dtype).get(), r.astype(dtype))
    np.testing.assert_array_equal(gpublas.full((3,), 2 - 5j, dtype).get(), np.full((3,), 2 - 5j, dtype))
    np.testing.assert_array_equal(gpublas.zeros((2, 2), dtype).get(), np.zeros((2, 2), dtype))
    b = gpublas.empty((4,), dtype)
    b[1:3] = 1 + 1j
    b[0] = 3j
    b[3] = -1
    np.testing.assert_array_equal(b.get(), np.array([3j, 1 + 1j, 1 + 1j, -1], dtype))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_real_and_imag_are_views(dtype, rng):
    h = crandn(rng, (5, 8), dtype)
    a = gpublas.to_device(h)
    part = np.dtype(dtype.char.lower())
    for got, ref in ((a.real, h.real), (a.imag, h.imag), (a[::2, 1::3].imag, h[::2, 1::3].imag),
                     (a.T.real, h.T.real)):
        assert got.dtype == part
        np.testing.assert_array_equal(got.get(), ref)
    a.imag[1] = 7  # writes through the view, as NumPy's
    a.real[:, ::2] *= 2
    h.imag[1] = 7
    h.real[:, ::2] *= 2
    np.testing.assert_array_equal(a.get(), h)
    r = gpublas.to_device(h.real.copy())
    assert r.real is r
    np.testing.assert_array_equal(r.imag.get(), np.zeros_like(h.real))


@pytest.mark.parametrize("dtype", COMPLEX)
def test_dlpack_round_trip(dtype, rng):
    h = crandn(rng, (3, 4), dtype)
    a = gpublas.to_device(h)
    if gpublas.backend() == "sim":
        np.testing.assert_array_equal(np.from_dlpack(a), h)
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(a)
    assert t.dtype == (torch.complex64 if dtype == np.complex64 else torch.complex128)
    b = gpublas.from_dlpack(t)
    assert b.dtype == dtype
    np.testing.assert_array_equal(b.get(), h)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape", SHAPES)
def test_arithmetic(dtype, shape, rng, sim_order):
    ha, hb = crandn(rng, shape, dtype), crandn(rng, shape, dtype)
    a, b = gpublas.to_device(ha), gpublas.to_device(hb)
    for got, ref in ((a + b, ha + hb), (a - b, ha - hb), (a * b, ha * hb), (a / b, ha / hb), (-a, -ha),
                     (a * (2 - 1j), ha * (2 - 1j)), ((1 + 2j) / a, (1 + 2j) / ha), (a - 3, ha - 3),
                     (2.5 + a, 2.5 + ha), (a / 4j, ha / 4j), (a.conj(), ha.conj())):
        close(got.get(), ref, dtype)
    c = a.copy()
    c *= b
    close(c.get(), ha * hb, dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_broadcasts_views_and_division_cases(dtype, rng, sim_order):
    ha, hb = crandn(rng, (6, 10), dtype), crandn(rng, (10,), dtype)
    a, b = gpublas.to_device(ha), gpublas.to_device(hb)
    close((a[:, ::-2] * b[::2]).get(), ha[:, ::-2] * hb[::2], dtype)
    close((a[1:4].T / b[:3]).get(), ha[1:4].T / hb[:3], dtype)
    a[::2] += b
    ha[::2] += hb
    close(a.get(), ha, dtype)
    # NumPy's scaled division: huge and tiny divisors stay finite, / 0 gives inf or nan as NumPy's
    big = np.finfo(dtype.char.lower()).max / 4
    hx = np.array([1 + 1j, 2 - 3j, 1 + 0j, 0j, 1j, 5 + 5j], dtype)
    hy = np.array([big + big * 1j, 3e-30 - 1e-30j, 0j, 0j, 2 + 0j, 0 - 2j], dtype)
    with np.errstate(all="ignore"):
        ref = hx / hy
    got = (gpublas.to_device(hx) / gpublas.to_device(hy)).get()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    close(got[fin], ref[fin], dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_real_scalars_and_arrays_promote(dtype, rng):
    """A complex Python scalar with a real array gives the complex type of the array's precision
    (NumPy's weak scalars)."""
    r = rng.standard_normal(5)
    for real in (np.float32, np.float64):
        got = gpublas.to_device(r.astype(real)) * 1j
        ref = r.astype(real) * 1j
        assert got.dtype == ref.dtype
        close(got.get(), ref, ref.dtype)
    hc = crandn(rng, 5, dtype)
    for real in (np.float32, np.float64, np.int32):  # arrays promote as NumPy's (gpublas.core.promotion)
        got = gpublas.to_device(hc) * gpublas.to_device(r.astype(real))
        ref = hc * r.astype(real)
        assert got.dtype == ref.dtype
        close(got.get(), ref, ref.dtype)
    got = gpublas.to_device(hc) == gpublas.to_device(hc.real.copy())
    np.testing.assert_array_equal(got.get(), hc == hc.real)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_math_abs_and_comparisons(dtype, rng, sim_order):
    h = crandn(rng, (4, 11), dtype)
    h[0, :4] = [0, -2, 1j, -1 - 0j]  # sqrt's and log's branch points and axes
    a = gpublas.to_device(h)
    part = np.dtype(dtype.char.lower())
    with np.errstate(all="ignore"):
        for f, ref in ((gpublas.exp, np.exp(h)), (gpublas.sqrt, np.sqrt(h))):
            close(f(a).get(), ref, dtype)
        fin = h != 0
        close(gpublas.log(a).get()[fin], np.log(h)[fin], dtype)
    got = abs(a[:, ::2])
    assert got.dtype == part
    close(got.get(), np.abs(h[:, ::2]), part)
    b = a.copy()
    b[1, 3] = 5
    hb = h.copy()
    hb[1, 3] = 5
    np.testing.assert_array_equal((a == b).get(), h == hb)
    np.testing.assert_array_equal((a != b).get(), h != hb)
    np.testing.assert_array_equal((a == 1j).get(), h == 1j)
    np.testing.assert_array_equal((a[0] != a[0, 2]).get(), h[0] != h[0, 2])
    for op in ("__lt__", "__ge__"):
        with pytest.raises(TypeError, match="complex"):
            getattr(a, op)(b)
    for f in (gpublas.maximum, gpublas.minimum, gpublas.floor_divide, gpublas.pow):
        with pytest.raises(TypeError, match="complex"):
            f(a, b)
    for f in (gpublas.tanh, gpublas.floor, gpublas.sin, gpublas.relu, gpublas.square):
        with pytest.raises(TypeError):
            f(a)
    with pytest.raises(TypeError):
        a.clip(0, 1)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape,axis", [((0,), None), ((1,), None), ((7,), None), ((3000,), None),
                                        ((5, 13), 0), ((5, 13), 1), ((4, 3, 37), (0, 2)), ((9, 700), 1)])
def test_sum_and_mean(dtype, shape, axis, rng, sim_order):
    h = crandn(rng, shape, dtype)
    a = gpublas.to_device(h)
    n = max(1, h.size)
    with np.errstate(all="ignore"):
        close(a.sum(axis=axis).get(), h.sum(axis=axis), dtype, ulps=4 * n)
        if h.size:
            close(a.mean(axis=axis).get(), h.mean(axis=axis), dtype, ulps=4 * n)
    with pytest.raises(TypeError, match="complex"):
        a.max()


def test_module_functions_and_numpy_names(rng):
    h = crandn(rng, (3, 4), np.complex64)
    a = gpublas.to_device(h)
    np.testing.assert_array_equal(gpublas.conj(a).get(), np.conj(h))
    np.testing.assert_array_equal(gpublas.real(a).get(), h.real)
    np.testing.assert_array_equal(gpublas.imag(a).get(), h.imag)
    np.testing.assert_array_equal(np.conjugate(a).get(), np.conjugate(h))
    close(np.abs(a).get(), np.abs(h), np.float32)
