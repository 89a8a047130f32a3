"""NumPy's semantics at the edges a newcomer meets first: reshape, ravel and flatten copy exactly where
NumPy's do; np.asarray on a DeviceArray refuses (CuPy's rule) instead of making an object array;
NumPy's functions and ufuncs on a DeviceArray run gpublas' own or say what to call."""
import numpy as np
import pytest

import gpublas


def _random_view(h, d, rng):
    """The same random basic view (steps of any sign, a transpose, an axis of 1) of ndarray h and
    DeviceArray d."""
    key = []
    for n in h.shape:
        step = int(rng.choice([1, 1, 2, -1, -2, 3]))
        start = int(rng.integers(0, n)) if rng.random() < 0.3 else None
        key.append(slice(start, None, step))
    if len(key) > 1 and rng.random() < 0.2:  # (NumPy's h[i] of a 1-D h is a scalar, not a view)
        k = int(rng.integers(0, len(key)))
        key[k] = int(rng.integers(0, h.shape[k]))
    hv, dv = h[tuple(key)], d[tuple(key)]
    if hv.ndim > 1 and rng.random() < 0.4:
        axes = tuple(rng.permutation(hv.ndim))
        hv, dv = hv.transpose(axes), dv.transpose(axes)
    return hv, dv


def _random_op(hv, rng):
    """(name, function) applied to both: ravel, flatten or reshape to a random shape, in C, F or A."""
    order = str(rng.choice(["C", "C", "F", "A"]))
    kind = str(rng.choice(["ravel", "flatten", "reshape"]))
    if kind == "ravel":
        return f"ravel({order})", lambda v: v.ravel(order)
    if kind == "flatten":
        return f"flatten({order})", lambda v: v.flatten(order)
    shape = [hv.size] if hv.size else [0]
    for d in (2, 3, 5, 7):
        if shape[-1] % d == 0 and shape[-1] > d and rng.random() < 0.6:
            shape = shape[:-1] + [d, shape[-1] // d]
    if rng.random() < 0.5:
        shape = shape[::-1]
    if rng.random() < 0.3:
        shape.insert(int(rng.integers(0, len(shape) + 1)), 1)
    return f"reshape({shape}, {order})", lambda v: v.reshape(tuple(shape), order=order)


def test_reshape_ravel_flatten_copy_where_numpy_copies(rng):
    """Randomized: for a random view and op, write through the result and check that the base
    changed exactly as NumPy's did (a view) or not at all (a copy)."""
    for trial in range(150):
        shape = tuple(int(s) for s in rng.integers(1, 6, size=int(rng.integers(1, 4))))
        h = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        d = gpublas.to_device(h)
        hv, dv = _random_view(h, d, rng)
        name, op = _random_op(hv, rng)
        hr, dr = op(hv), op(dv)
        assert dr.shape == hr.shape, (trial, name)
        np.testing.assert_array_equal(dr.get(), hr, err_msg=f"{trial} {name}")
        hr[...] = -1 - np.arange(hr.size).reshape(hr.shape)
        dr[...] = gpublas.to_device(-1 - np.arange(hr.size, dtype=np.float64).reshape(hr.shape))
        np.testing.assert_array_equal(d.get(), h, err_msg=f"{trial} {name} on {hv.shape} {hv.strides}")


def test_issue_cases_ravel_copies():
    h = np.arange(12.0).reshape(3, 4)
    for key in (np.s_[::-1], np.s_[:, ::2], np.s_[0, ::2]):
        d = gpublas.to_device(h)
        r = d[key].ravel()
        r[0] = 99
        np.testing.assert_array_equal(d.get(), h)
        assert d[key].reshape(-1).size == r.size
    d = gpublas.to_device(h)
    assert d.ravel().base is d and not gpublas.may_share_memory(d.flatten(), d) and d.T.ravel("F").base is d


def test_reshape_order_argument():
    h = np.arange(30.0).reshape(5, 6)
    d = gpublas.to_device(h)
    for order in "CFA":
        np.testing.assert_array_equal(d.reshape(3, 10, order=order).get(), h.reshape(3, 10, order=order))
        np.testing.assert_array_equal(d.T.reshape((2, 15), order=order).get(), h.T.reshape((2, 15), order=order))
    with pytest.raises(ValueError, match="order must be"):
        d.reshape(30, order="K")


def test_array_protocol_refuses_implicit_copies():
    """np.asarray(a) raises (CuPy's choice), never an object array of 0-d DeviceArrays."""
    d = gpublas.to_device(np.arange(6.0))
    for f in (np.asarray, np.array, lambda a: np.asarray([a, a])):
        with pytest.raises(TypeError, match=r"call \.get\(\)"):
            f(d)
    np.testing.assert_array_equal(d.get(), np.arange(6.0))


@pytest.mark.parametrize("call", [
    lambda x: np.sum(x), lambda x: np.mean(x, axis=0), lambda x: np.max(x, axis=1), lambda x: np.min(x),
    lambda x: np.argmax(x, axis=0), lambda x: np.any(x > 3), lambda x: np.transpose(x),
    lambda x: np.reshape(x, (4, 3)), lambda x: np.ravel(x.T), lambda x: np.where(x > 2, x, 0.0),
    lambda x: np.clip(x, 1.0, 4.0), lambda x: np.exp(x), lambda x: np.maximum(x, 2.5), lambda x: np.add(x, x),
    lambda x: np.multiply(2.0, x), lambda x: np.less(x, 5.0), lambda x: np.matmul(x, x.T), lambda x: abs(-x),
    lambda x: np.sin(x), lambda x: np.arctan2(x, 2.0 * x + 1),
])
def test_numpy_functions_dispatch_to_gpublas(call):
    h = np.arange(12.0).reshape(3, 4) / 3
    got = call(gpublas.to_device(h))
    assert isinstance(got, gpublas.DeviceArray)
    np.testing.assert_allclose(got.get(), call(h), rtol=1e-12)


def test_numpy_shape_and_mixed_operands():
    h = np.arange(6.0).reshape(2, 3)
    d = gpublas.to_device(h)
    assert np.shape(d) == (2, 3) and np.ndim(d) == 2 and np.size(d) == 6
    r = h + d  # ndarray (op) DeviceArray: np.add's __array_ufunc__, a DeviceArray
    assert isinstance(r, gpublas.DeviceArray)
    np.testing.assert_array_equal(r.get(), 2 * h)
    np.maximum(d, 2.0, out=d)
    np.testing.assert_array_equal(d.get(), np.maximum(h, 2.0))


def test_numpy_functions_gpublas_lacks_say_what_to_call():
    d = gpublas.to_device(np.arange(6.0))
    with pytest.raises(TypeError, match=r"numpy.convolve is not implemented for DeviceArray.*a\.get\(\)"):
        np.convolve(d, d)
    with pytest.raises(TypeError, match=r"numpy.add.reduce .*a\.sum\(\)"):
        np.add.reduce(d)
    with pytest.raises(TypeError, match="gpublas' sum, which cannot take these arguments"):
        np.sum(d, initial=1.0)
    with pytest.raises(TypeError, match="writes into a DeviceArray only"):
        np.add(d, d, out=np.empty(6))
