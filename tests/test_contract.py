"""Issue 32 item 3 against NumPy: einsum (random subscripts: traces, diagonals, '...', outer products, several
operands), tensordot, NumPy's N-d dot (gpublas.dot stays BLAS's), outer, trace, linalg.norm; through
numpy.<name>(DeviceArray) and gpublas.<name>."""
import numpy as np
import pytest

import gpublas

SPECS = ["ij,jk->ik", "ij,jk", "ii", "ii->i", "iij->j", "ijk->", "ij->ji", "i,j->ij", "i,i", "bij,bjk->bik",
         "...ij,...jk->...ik", "...i,i...->...", "ij,jk,kl->il", "ijk,kj->i", "i,i,i->", "ba,a->b", "ab,ab->"]
SIZES = {"i": 3, "j": 4, "k": 2, "l": 5, "a": 1, "b": 3}


def _operands(spec, rng, dtype):
    ins = spec.split("->")[0].split(",")
    out = []
    for s in ins:
        shape = tuple(SIZES[c] for c in s.replace("...", ""))
        if "..." in s:
            shape = ((2, 1) if s.startswith("...") else ()) + shape + ((2,) if s.endswith("...") else ())
        out.append((rng.standard_normal(shape) * 3).astype(dtype))
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_einsum_matches_numpy(dtype, rng):
    for spec in SPECS:
        hs = _operands(spec, rng, dtype)
        ds = [gpublas.to_device(h) for h in hs]
        got, want = np.einsum(spec, *ds), np.einsum(spec, *hs)
        want = np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype, (spec, got.shape, want.shape)
        np.testing.assert_allclose(got.get(), want, rtol=1e-5 if dtype == np.float32 else 1e-12, err_msg=spec)


def test_einsum_views_zero_sizes_and_errors(rng):
    h = rng.standard_normal((6, 8))
    d = gpublas.to_device(h)
    np.testing.assert_allclose(gpublas.einsum("ij,kj->ik", d[::-2, 1::3], d[:2, ::-3]).get(),
                               np.einsum("ij,kj->ik", h[::-2, 1::3], h[:2, ::-3]))
    z = np.zeros((0, 3))
    np.testing.assert_array_equal(gpublas.einsum("ij,jk->ik", gpublas.to_device(z), d[:3]).get(), z @ h[:3])
    np.testing.assert_array_equal(gpublas.einsum("ji,jk->ik", gpublas.to_device(z), d[:0]).get(), np.zeros((3, 8)))
    with pytest.raises(NotImplementedError, match="subscripts string"):
        gpublas.einsum(d, [0, 1])
    with pytest.raises(ValueError, match="sizes"):
        gpublas.einsum("ij,ij->", d, d[:2])
    with pytest.raises(ValueError, match="subscripts"):
        gpublas.einsum("ijk", d)


def test_tensordot_dot_outer_trace(rng):
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((4, 5, 2))
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    for axes in (2, 0, ([1, 2], [0, 1]), ([-1], [1]), 1):
        y = b if axes != 1 else rng.standard_normal((5, 3))
        np.testing.assert_allclose(np.tensordot(da, gpublas.to_device(y), axes).get(), np.tensordot(a, y, axes))
    for x, y in [(a, b), (a, b[0, :, 0]), (a[0], b[0]), (a[0, 0], b[:, :, 1].T), (a[:, ::-1], b[::-1, :, ::-1])]:
        np.testing.assert_allclose(np.dot(gpublas.to_device(x), gpublas.to_device(y)).get(), np.dot(x, y))
    assert np.dot(da[0, 0], da[0, 0]).get() == pytest.approx(np.dot(a[0, 0], a[0, 0]))   # 1-D . 1-D: a 0-d array
    np.testing.assert_allclose((da.dot(2.0)).get(), a * 2)
    assert gpublas.dot(da[0, 0], da[0, 0]) == pytest.approx(np.dot(a[0, 0], a[0, 0]))  # BLAS's, unchanged
    for x, y in [(a, b), (a[0], b[0]), (a, b[0, :, 0]), (a[0, 0], b[:, :, 1].T), (a[1], 3.0)]:
        got = gpublas.dot(gpublas.to_device(x), y if np.isscalar(y) else gpublas.to_device(y))  # NumPy's, as cupy.dot
        assert isinstance(got, gpublas.DeviceArray) and got.shape == np.dot(x, y).shape, (np.shape(x), np.shape(y))
        np.testing.assert_allclose(got.get(), np.dot(x, y))
    out = gpublas.empty((4, 2), np.float64)
    assert gpublas.dot(da[0], db[0], out=out) is out and np.allclose(out.get(), a[0] @ b[0])
    with pytest.raises(ValueError, match="shape-mismatch"):
        gpublas.dot(da, da)
    ints = rng.integers(-3, 4, (3, 4)).astype(np.int32)
    got = np.dot(gpublas.to_device(ints), gpublas.to_device(ints.T))
    assert got.dtype == np.int32 and np.array_equal(got.get(), ints @ ints.T)
    np.testing.assert_allclose(np.outer(da[0], db[1, 0]).get(), np.outer(a[0], b[1, 0]))
    for args in ((), (1,), (-1, 1, 2), (0, -1, 0)):
        np.testing.assert_allclose(np.trace(da, *args).get(), np.trace(a, *args))
    assert np.trace(gpublas.to_device(ints)).dtype == np.trace(ints).dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int32])
def test_norm_matches_numpy(dtype, rng):
    h = (rng.standard_normal((3, 5)) * 4).astype(dtype)
    if np.dtype(dtype).kind == "c":
        h = h + 1j * rng.standard_normal((3, 5)).astype(dtype)
    d = gpublas.to_device(h)
    tol = 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
    cases = [({}, h), ({}, h[0]), ({"ord": 1}, h[0, ::-2]), ({"ord": np.inf}, h[1]), ({"ord": -np.inf}, h[1]),
             ({"ord": 0}, h[2]), ({"ord": 3}, h[2]), ({"ord": 2}, h[2]), ({"ord": "fro"}, h), ({"ord": 1}, h),
             ({"ord": -1}, h), ({"ord": np.inf}, h), ({"ord": -np.inf}, h), ({"axis": -1}, h), ({"axis": 0}, h),
             ({"axis": (1, 0), "keepdims": True}, h), ({"ord": 1, "axis": (1, 0)}, h), ({"keepdims": True}, h),
             ({}, h[:0])]
    for kw, x in cases:
        dx = d[tuple(slice(None) for _ in range(x.ndim))] if x is h else gpublas.to_device(x)
        got, want = np.linalg.norm(dx, **kw), np.asarray(np.linalg.norm(x, **kw))
        assert isinstance(got, gpublas.DeviceArray) and got.shape == want.shape and got.dtype == want.dtype, kw
        np.testing.assert_allclose(got.get(), want, rtol=tol, err_msg=str(kw))
    with pytest.raises(NotImplementedError, match="SVD"):
        gpublas.linalg.norm(d, 2)
