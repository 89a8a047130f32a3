"""The conveniences a CuPy user types first, each against NumPy: ones, ones_like, full_like, item,
tolist, dot, std/var, clip, // and % (elementwise.cu's BIN_FLOOR_DIVIDE, BIN_REMAINDER), ** with
arrays, reshape(order=), print(a) and repr(a)."""
import numpy as np
import pytest

import gpublas

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def sample(shape, dtype, rng):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-20, 20, shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES + [np.uint8, np.bool_])
def test_ones_and_likes(dtype):
    h = np.zeros((3, 5), dtype)
    d = gpublas.to_device(h)
    for got, want in ((gpublas.ones((3, 5), dtype), np.ones((3, 5), dtype)), (gpublas.ones_like(d), np.ones_like(h)),
                      (gpublas.full_like(d, 1), np.full_like(h, 1)), (np.ones_like(d), np.ones_like(h)),
                      (gpublas.ones_like(d, np.float64), np.ones_like(h, np.float64)),
                      (np.full_like(d, 1), np.full_like(h, 1)), (gpublas.zeros_like(d), np.zeros_like(h))):
        assert isinstance(got, gpublas.DeviceArray) and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.get(), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_item_and_tolist(dtype, rng):
    h = sample((3, 4), dtype, rng)
    d = gpublas.to_device(h)
    assert d.tolist() == h.tolist() and d[::-1, 1].tolist() == h[::-1, 1].tolist()
    for args in ((5,), (-1,), (1, 2), ((2, 3),)):
        got, want = d.item(*args), h.item(*args)
        assert got == want and type(got) is type(want), args
    assert d[1:2, 2:3].item() == h[1:2, 2:3].item() and type(d.sum().item()) is type(h.sum().item())
    with pytest.raises(ValueError, match="size 1"):
        d.item()
    with pytest.raises(IndexError):
        d.item(12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dot(dtype, rng):
    a, b, v = sample((4, 3), dtype, rng), sample((3, 5), dtype, rng), sample((3,), dtype, rng)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for x, y in ((a, b), (a, v), (v, v), (v, b.T.copy().T)):
        got = gpublas.to_device(x).dot(gpublas.to_device(y))  # vector . vector: a Python float (blas1.dot)
        np.testing.assert_allclose(got.get() if isinstance(got, gpublas.DeviceArray) else got, x.dot(y), rtol=rtol)
    np.testing.assert_allclose(gpublas.to_device(a).dot(2.0).get(), a.dot(2.0), rtol=rtol)
    np.testing.assert_allclose(np.dot(gpublas.to_device(a), gpublas.to_device(b)).get(), a.dot(b), rtol=rtol)
    c = rng.random((2, 3, 4)).astype(dtype)  # N-d . 2-d: NumPy's rule (a sum over a's last and b's second-to-last axis)
    np.testing.assert_allclose(gpublas.to_device(c).dot(gpublas.to_device(a)).get(), c.dot(a), rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_std_var(dtype, rng):
    h = sample((6, 7), dtype, rng)
    d = gpublas.to_device(h)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for kw in ({}, {"axis": 0}, {"axis": 1, "ddof": 1}, {"axis": -1, "keepdims": True}, {"ddof": 2}):
        for name in ("var", "std"):
            got, want = getattr(d, name)(**kw), getattr(h, name)(**kw)
            assert got.dtype == want.dtype and got.shape == np.shape(want), (name, kw)
            np.testing.assert_allclose(got.get(), want, rtol=rtol, err_msg=f"{name} {kw}")
            np.testing.assert_allclose(getattr(np, name)(d, **kw).get(), want, rtol=rtol)
    np.testing.assert_allclose(d[::2, ::-3].var().get(), h[::2, ::-3].var(), rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_method(dtype, rng):
    h = sample((5, 9), dtype, rng)
    d = gpublas.to_device(h)
    for lo, hi in ((-3, 4), (None, 2), (-1, None), (-2.5, 3.5)):
        got, want = d.clip(lo, hi), h.clip(lo, hi)
        assert got.dtype == want.dtype, (lo, hi)
        np.testing.assert_array_equal(got.get(), want)
    np.testing.assert_array_equal(np.clip(d, -1, 1).get(), np.clip(h, -1, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_floor_divide_remainder_power_with_arrays(dtype, rng, sim_order):
    a, b = sample((7, 1, 5), dtype, rng), sample((3, 5), dtype, rng)
    b[b == 0] = 3
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    for got, want in ((da // db, a // b), (da % db, a % b), (da[::-1] // 4, a[::-1] // 4), (-7 % db, -7 % b),
                      (gpublas.floor_divide(da, db[1]), np.floor_divide(a, b[1])), (np.remainder(da, db), a % b)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.get(), want)
    e = np.abs(b) % 4 if dtype in (np.int32, np.int64) else b
    with np.errstate(all="ignore"):
        want = a ** e
    got = (da ** gpublas.to_device(e)).get()
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, equal_nan=True)
    d = gpublas.to_device(a)
    d //= 2
    d %= 5
    np.testing.assert_array_equal(d.get(), a // 2 % 5)


def test_print_and_repr_like_numpy():
    h = np.arange(30, dtype=np.float32).reshape(5, 6) / 4
    d = gpublas.to_device(h)
    assert str(d) == str(h)  # all of a small array, as NumPy prints it
    assert repr(d) == np.array2string(h, separator=", ", prefix="DeviceArray(").join(
        ("DeviceArray(", ", dtype=float32, backend=" + gpublas.backend() + ")"))
    assert "..." not in repr(gpublas.zeros(500)) and "..." in repr(gpublas.zeros(5000))
    assert str(gpublas.to_device(np.arange(3))) == "[0 1 2]" and str(d.sum()) == str(h.sum())
