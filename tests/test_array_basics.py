"""Array basics against NumPy: arange and linspace (device kernels), squeeze, expand_dims and
a.view(dtype) (views), concatenate and stack (copies into views of the output), and reductions over
a tuple of axes; shapes with 0 and 1, strided and reversed views, both sim thread orders."""
import numpy as np
import pytest
from reference import assert_close

import gpublas


def dev(x):
    return gpublas.to_device(x)


# -- arange and linspace ---------------------------------------------------------------------------
@pytest.mark.parametrize("args, kwargs", [
    ((10,), {}), ((0,), {}), ((-3,), {}), ((1,), {}), ((3, 10), {}), ((10, 3), {}), ((10, 0, -3), {}),
    ((0, 1, 0.1), {}), ((1, -1, -0.25), {}), ((5,), {"dtype": np.float32}), ((0.5, 7.3, 0.7), {"dtype": np.float32}),
    ((0, 5, 0.5), {"dtype": np.int32}), ((-4, 1000, 7), {"dtype": np.int64}), ((0, 250, 3), {"dtype": np.uint8}),
    ((np.float32(1.5),), {}), ((2, 2.5), {}), ((0.0, 1.0, np.inf), {}), ((2 ** 40, 2 ** 40 + 5), {}),
])
def test_arange_matches_numpy(args, kwargs):
    want = np.arange(*args, **kwargs)
    got = gpublas.arange(*args, **kwargs)
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind == "f":
        assert_close(got, want, want.dtype)
    else:
        np.testing.assert_array_equal(got.get(), want)


def test_arange_refuses_what_it_cannot_make():
    with pytest.raises(ZeroDivisionError):
        gpublas.arange(0, 5, 0)
    with pytest.raises(TypeError, match="dtype"):
        gpublas.arange(5, dtype=np.bool_)
    with pytest.raises(TypeError, match="scalar"):
        gpublas.arange(np.arange(3))


@pytest.mark.parametrize("args, kwargs", [
    ((0, 1), {}), ((0, 1, 1), {}), ((0, 1, 0), {}), ((0, 1, 2), {}), ((-5, 5, 7), {"endpoint": False}),
    ((3, -2, 131), {}), ((2.5, 2.5, 4), {}), ((0, 10, 4), {"dtype": np.int32}), ((-7, 7, 9), {"dtype": np.int64}),
    ((0, 1, 33), {"dtype": np.float32}), ((np.float32(0), np.float32(3), 7), {}), ((1e-3, 1e3, 1000), {}),
    ((0, 1, 1), {"endpoint": False}),
])
def test_linspace_matches_numpy(args, kwargs):
    want = np.linspace(*args, **kwargs)
    got = gpublas.linspace(*args, **kwargs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.get(), want) if want.dtype.kind != "f" else assert_close(got, want, want.dtype)
    if want.size > 1 and kwargs.get("endpoint", True):
        assert got.get()[-1] == want[-1]  # exactly stop


def test_linspace_retstep_and_errors():
    got, step = gpublas.linspace(-1, 2, 13, endpoint=False, retstep=True)
    want, want_step = np.linspace(-1, 2, 13, endpoint=False, retstep=True)
    assert step == want_step
    assert_close(got, want, np.float64)
    assert np.isnan(gpublas.linspace(0, 1, 1, retstep=True)[1])
    with pytest.raises(ValueError, match="non-negative"):
        gpublas.linspace(0, 1, -1)


# -- squeeze, expand_dims, view(dtype) ------------------------------------------------------------
@pytest.mark.parametrize("shape, axis", [
    ((1, 3, 1), None), ((1, 3, 1), 0), ((1, 3, 1), -1), ((1, 3, 1), (0, 2)), ((1,), None), ((1, 1), None),
    ((2, 0, 1), None), ((2, 0, 1), 2), ((5, 7), None), ((), None),
])
def test_squeeze_is_numpys_view(shape, axis, rng):
    x = rng.standard_normal(shape)
    d = dev(x)
    got = d.squeeze(axis) if axis is not None else d.squeeze()
    want = x.squeeze(axis)
    assert got.shape == want.shape and got.base is d
    np.testing.assert_array_equal(got.get(), want)
    np.testing.assert_array_equal(gpublas.squeeze(dev(x), axis).get(), want)


def test_squeeze_of_a_strided_view_writes_through(rng):
    x = rng.standard_normal((4, 1, 9))
    d = dev(x)
    v = d[::-2, :, 1::3].squeeze(1)
    np.testing.assert_array_equal(v.get(), x[::-2, :, 1::3].squeeze(1))
    v[...] = 7.0
    x[::-2, :, 1::3] = 7.0
    np.testing.assert_array_equal(d.get(), x)
    with pytest.raises(ValueError, match="size is not 1"):
        d.squeeze(0)
    with pytest.raises(np.exceptions.AxisError):
        d.squeeze(3)


@pytest.mark.parametrize("shape, axis", [
    ((3, 4), 0), ((3, 4), 2), ((3, 4), -1), ((3, 4), (0, 3)), ((3, 4), (-1, 0)), ((), 0), ((0, 2), 1), ((5,), (0, 1, 2)),
])
def test_expand_dims_is_numpys_view(shape, axis, rng):
    x = rng.standard_normal(shape)
    d = dev(x)
    got = gpublas.expand_dims(d, axis)
    want = np.expand_dims(x, axis)
    assert got.shape == want.shape and got.base is d and got.c_contiguous
    np.testing.assert_array_equal(got.get(), want)
    v = gpublas.expand_dims(d.T, axis)  # a transposed view stays a view
    np.testing.assert_array_equal(v.get(), np.expand_dims(x.T, axis))
    with pytest.raises(ValueError):
        gpublas.expand_dims(d, (0, 0))


@pytest.mark.parametrize("src, dst", [(np.float32, np.int32), (np.int32, np.float32), (np.float64, np.int64),
                                      (np.int64, np.float64), (np.uint8, np.bool_), (np.float32, np.float32)])
def test_view_reinterprets_same_itemsize(src, dst, rng):
    x = (rng.standard_normal((6, 5)) * 100).astype(src) if src != np.uint8 else rng.integers(0, 2, (6, 5), np.uint8)
    d = dev(x)
    for dv, xv in [(d, x), (d[::-2, 1:], x[::-2, 1:]), (d.T, x.T)]:
        got = dv.view(dst)
        assert got.dtype == np.dtype(dst) and got.shape == xv.shape and got.base is d
        np.testing.assert_array_equal(got.get(), xv.view(dst))
    d.view(dst)[0] = 0
    x.view(dst)[0] = 0
    np.testing.assert_array_equal(d.get(), x)
    assert d.view().dtype == d.dtype and d.view().base is d


def test_view_refuses_another_itemsize():
    with pytest.raises(ValueError, match="itemsize"):
        gpublas.zeros((4,), np.float32).view(np.float64)
    with pytest.raises(TypeError, match="unsupported"):
        gpublas.zeros((4,), np.float32).view(np.float128 if hasattr(np, "float128") else np.str_)


# -- concatenate and stack -------------------------------------------------------------------------
@pytest.mark.parametrize("shapes, axis", [
    ([(3, 4), (5, 4)], 0), ([(3, 4), (3, 1), (3, 7)], 1), ([(3, 4), (3, 0), (3, 2)], -1), ([(0, 4), (0, 4)], 0),
    ([(2, 3, 5), (2, 1, 5)], 1), ([(1,), (7,), (31,)], 0), ([(2, 3), (4,)], None), ([(2, 2)], 0),
])
def test_concatenate_matches_numpy(shapes, axis, rng, sim_order):
    xs = [rng.standard_normal(s) for s in shapes]
    want = np.concatenate(xs, axis=axis)
    got = gpublas.concatenate([dev(x) for x in xs], axis=axis)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.get(), want)


def test_concatenate_views_dtypes_and_out(rng):
    x = rng.standard_normal((6, 8))
    d = dev(x)
    parts = [d[::-1, :3], d.T[:2].T, d[1::2, ::-3]]
    want = np.concatenate([x[::-1, :3], x.T[:2].T, x[1::2, ::-3]][:2], axis=1)
    np.testing.assert_array_equal(gpublas.concatenate(parts[:2], axis=1).get(), want)
    mixed = gpublas.concatenate([dev(x[:2].astype(np.float32)), x[2:4], dev(np.ones((1, 8), np.int32))])
    assert mixed.dtype == np.float64  # NumPy's result_type; ndarrays are taken too
    np.testing.assert_array_equal(mixed.get(), np.concatenate([x[:2].astype(np.float32), x[2:4], np.ones((1, 8))]))
    out = gpublas.zeros((12, 8), np.float32)
    assert gpublas.concatenate([d, d[::-1]], out=out) is out
    np.testing.assert_array_equal(out.get(), np.concatenate([x, x[::-1]]).astype(np.float32))
    with pytest.raises(ValueError, match="must match"):
        gpublas.concatenate([d, d.T])
    with pytest.raises(ValueError, match="zero-dimensional"):
        gpublas.concatenate([dev(np.float64(1.0)), dev(np.float64(2.0))])
    with pytest.raises(ValueError, match="at least one"):
        gpublas.concatenate([])
    with pytest.raises(ValueError, match="shape"):
        gpublas.concatenate([d, d], out=gpublas.zeros((12, 7)))


@pytest.mark.parametrize("shape, n, axis", [((3, 4), 2, 0), ((3, 4), 3, 1), ((3, 4), 2, -1), ((3, 4), 1, 2),
                                            ((0, 5), 3, 1), ((1,), 5, 0), ((), 4, 0), ((2, 3, 5), 2, -2)])
def test_stack_matches_numpy(shape, n, axis, rng, sim_order):
    xs = [rng.standard_normal(shape) for _ in range(n)]
    want = np.stack(xs, axis=axis)
    got = gpublas.stack([dev(x) for x in xs], axis=axis)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.get(), want)


def test_stack_views_and_errors(rng):
    x = rng.standard_normal((5, 6))
    d = dev(x)
    got = gpublas.stack([d[::-1, ::2], d.T[:3, :5].T, d[:, 1::2]], axis=1)
    np.testing.assert_array_equal(got.get(), np.stack([x[::-1, ::2], x.T[:3, :5].T, x[:, 1::2]], axis=1))
    with pytest.raises(ValueError, match="all must be equal"):
        gpublas.stack([d, d.T])
    with pytest.raises(np.exceptions.AxisError):
        gpublas.stack([d, d], axis=3)


# -- reductions over a tuple of axes -----------------------------------------------------------------
AXES = [(0, 2), (0, 1), (1, 2), (0, 1, 2), (-1, 0), (1,), (), (2, 0, 1)]
SHAPES3 = [(4, 5, 6), (1, 7, 1), (3, 1, 33), (2, 0, 3)]


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_over_a_tuple_of_axes(name, dtype, rng, sim_order):
    for shape in SHAPES3:
        x = rng.standard_normal(shape).astype(dtype)
        for axis in AXES:
            for keepdims in (False, True):
                empty = any(shape[i] == 0 for i in axis)
                if empty and name in ("max", "min"):
                    with pytest.raises(ValueError, match="identity"):
                        getattr(dev(x), name)(axis=axis, keepdims=keepdims)
                    continue
                with np.errstate(all="ignore"):
                    want = getattr(x, name)(axis=axis, keepdims=keepdims)
                got = getattr(dev(x), name)(axis=axis, keepdims=keepdims)
                assert got.shape == want.shape, (shape, axis, keepdims)
                assert_close(got, want, dtype, k=8)


def test_tuple_axes_of_views_ints_and_bools(rng):
    x = rng.standard_normal((6, 5, 8))
    d = dev(x)
    for view, host in [(d[::-2, :, 1::3], x[::-2, :, 1::3]), (d.transpose(2, 0, 1), x.transpose(2, 0, 1))]:
        assert_close(view.sum(axis=(0, 2)), host.sum(axis=(0, 2)), np.float64, k=8)
        assert_close(gpublas.max(view, axis=(2, 0)), host.max(axis=(2, 0)), np.float64)
    i = rng.integers(-50, 50, (4, 3, 5)).astype(np.int32)
    got = dev(i).sum(axis=(0, 2))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.get(), i.sum(axis=(0, 2)))
    np.testing.assert_array_equal(dev(i).min(axis=(1, 2)).get(), i.min(axis=(1, 2)))
    m = x > 0.5
    for axis in [(0, 2), (1,), ()]:
        np.testing.assert_array_equal(gpublas.any(dev(m), axis=axis).get(), m.any(axis=axis))
        np.testing.assert_array_equal(gpublas.all(dev(m), axis=axis).get(), m.all(axis=axis))
    np.testing.assert_array_equal(gpublas.all(dev(np.zeros((2, 0, 3), bool)), axis=(0, 1)).get(), np.ones(3, bool))


def test_tuple_axes_errors():
    d = gpublas.zeros((2, 3, 4))
    with pytest.raises(TypeError, match="axis must be an int"):
        d.argmax(axis=(0, 1))  # NumPy's argmax takes one axis
    with pytest.raises(ValueError, match="duplicate"):
        d.sum(axis=(0, -3))
    with pytest.raises(np.exceptions.AxisError):
        d.sum(axis=(0, 3))


def test_numpys_names_reach_them(rng):
    x = rng.standard_normal((3, 1, 4))
    d = dev(x)
    for got, want in [(np.concatenate([d, d], axis=2), np.concatenate([x, x], axis=2)),
                      (np.stack([d, d], axis=1), np.stack([x, x], axis=1)),
                      (np.squeeze(d), np.squeeze(x)), (np.expand_dims(d, 0), np.expand_dims(x, 0)),
                      (np.sum(d, axis=(0, 2)), np.sum(x, axis=(0, 2)))]:
        assert isinstance(got, gpublas.DeviceArray)
        assert_close(got, want, np.float64)
