"""Views as NumPy has them: basic indexing, strides, reshape, .T, item assignment (with overlap),
elementwise ops, reductions and BLAS on views, each checked against the same NumPy expression."""
import numpy as np
import pytest
from reference import assert_close

import gpublas

DTYPES = [np.float32, np.float64, np.int32]

# index expressions applied to a (7, 11, 5) array (shapes with primes, 1 and 0 after indexing)
KEYS = [
    np.s_[2], np.s_[-1], np.s_[1:5], np.s_[::2], np.s_[::-1], np.s_[5:1:-2], np.s_[:, 3:8], np.s_[:, ::-3],
    np.s_[..., 1], np.s_[None, 2], np.s_[:, None, 1:4, ::2], np.s_[3, -2, 4], np.s_[3:3], np.s_[-1:, :, 4:],
    np.s_[1::3, 10:0:-4, np.newaxis, ::-1], np.s_[..., None], np.s_[2, ...,  ::2], (),
]


def values(shape, dtype, rng):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_basic_indexing_gives_views_with_numpy_strides(dtype, rng):
    h = values((7, 11, 5), dtype, rng)
    d = gpublas.to_device(h)
    for key in KEYS:
        v, hv = d[key], h[key]
        assert v.shape == hv.shape and v.strides == hv.strides, key
        np.testing.assert_array_equal(v.get(), hv)
        if v.size:
            assert gpublas.may_share_memory(v, d)
    assert d[1:4].c_contiguous and not d[:, 1:4].c_contiguous and d[::2].base is d


def test_index_errors():
    d = gpublas.zeros((3, 4))
    with pytest.raises(IndexError, match="out of bounds"):
        d[3]
    with pytest.raises(IndexError, match="out of bounds"):
        d[:, -5]
    with pytest.raises(IndexError, match="too many indices"):
        d[0, 0, 0]
    with pytest.raises(IndexError, match="unsupported index"):
        d[True]
    with pytest.raises(IndexError, match="unsupported index"):
        d[0.5]
    with pytest.raises(IndexError, match="single ellipsis"):
        d[..., ...]


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_transpose_ravel(dtype, rng):
    h = values((6, 10), dtype, rng)
    d = gpublas.to_device(h)
    cases = [lambda a: a.reshape(3, 20), lambda a: a.T, lambda a: a.T.reshape(-1), lambda a: a[:, 2:6].reshape(12, 2),
             lambda a: a[::2].reshape(3, 5, 2), lambda a: a[:, ::2].reshape(6, 5, 1), lambda a: a[::-1].ravel(),
             lambda a: a.reshape(2, 3, 10).transpose(1, 0, 2), lambda a: a.reshape(2, 3, 10).transpose((2, -3, 1)),
             lambda a: a[:, 1:2].reshape(2, 3), lambda a: a[1:1].reshape(0, 7), lambda a: a.flatten(),
             lambda a: a[:, 2:6].reshape(6, 2, 2), lambda a: a[:, 2:6].reshape(12, 2), lambda a: a.T.reshape(5, 2, 6)]
    for f in cases:
        np.testing.assert_array_equal(f(d).get(), f(h))
        # a view exactly where NumPy's reshape gives one, a copy where NumPy copies
        assert gpublas.may_share_memory(f(d), d) == np.shares_memory(f(h), h)
    assert d.reshape(3, 20).base is d and d.T.base is d
    with pytest.raises(ValueError, match="permutation"):
        d.transpose(0, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_setitem_scalar_array_and_broadcast(dtype, rng):
    h = values((7, 11), dtype, rng)
    d = gpublas.to_device(h)
    row = values((11,), dtype, rng)
    col = values((4, 1), dtype, rng)
    for key, val in [(np.s_[2], 5), (np.s_[:, 3:9:2], -2), (np.s_[::-2, 1], row[:4]), (np.s_[1:5, ::-1], col),
                     (np.s_[:], row), (np.s_[..., 0], 7.9 if dtype != np.int32 else 7), (np.s_[3:3], row),
                     (np.s_[6, 10], 1)]:
        dv = gpublas.to_device(val) if isinstance(val, np.ndarray) and key != np.s_[:] else val
        d[key] = dv
        h[key] = val
        np.testing.assert_array_equal(d.get(), h)
    d[1:3] = h[4:6].astype(np.float64)  # another dtype is converted, as NumPy's
    h[1:3] = h[4:6]
    np.testing.assert_array_equal(d.get(), h)


def test_setitem_errors_leave_the_array_untouched():
    h = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = gpublas.to_device(h)
    with pytest.raises(ValueError, match="broadcast"):
        d[1:] = gpublas.zeros((3, 4))
    with pytest.raises(ValueError):
        d[:, 1] = np.zeros(4)
    with pytest.raises(TypeError, match="assign"):
        d[0] = "x"
    np.testing.assert_array_equal(d.get(), h)


@pytest.mark.parametrize("dtype", DTYPES)
def test_overlapping_in_place_matches_numpy(dtype, rng):
    # NumPy buffers a right-hand side that overlaps the target: x[1:] += x[:-1] adds the old values
    for n in [1, 2, 7, 129]:
        h = values((n,), dtype, rng)
        d = gpublas.to_device(h)
        d[1:] += d[:-1]
        h[1:] += h[:-1]
        np.testing.assert_array_equal(d.get(), h)
        d[:-1] -= d[1:]
        h[:-1] -= h[1:]
        np.testing.assert_array_equal(d.get(), h)
        d[::-1] = d
        h[::-1] = h.copy()
        np.testing.assert_array_equal(d.get(), h)
    h = values((5, 7), dtype, rng)
    d = gpublas.to_device(h)
    d[1:, :] *= d[:-1, ::-1]
    h[1:, :] *= h[:-1, ::-1]
    np.testing.assert_array_equal(d.get(), h)
    d.T[2:4] += d[:, 1:3].T   # columns 1, 2 into columns 2, 3, through transposed views
    h.T[2:4] += h[:, 1:3].T
    np.testing.assert_array_equal(d.get(), h)



def test_a_target_that_overlaps_itself_is_written_in_c_order(rng, sim_order):
    # elements of the target at one address (rows a row apart, strides of 0): the last in C order wins, as in
    # NumPy's loop; one copy kernel would race there (the simulator's reverse order shows it)
    for shape, strides in [((2, 3, 4), (32, 32, 8)), ((3, 4), (0, 8)), ((4, 3, 2), (16, 0, 8)), ((5,), (0,))]:
        for v in (rng.standard_normal(shape), rng.standard_normal(shape[1:])):  # the second one broadcast
            want = np.zeros(16)
            for index in np.ndindex(*shape):
                want[sum(i * s for i, s in zip(index, strides)) // 8] = np.broadcast_to(v, shape)[index]
            d = gpublas.zeros(16, np.float64)
            d._view(shape, strides)[...] = gpublas.to_device(v)
            np.testing.assert_array_equal(d.get(), want, err_msg=f"{shape} {strides} from {v.shape}")

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_and_reductions_on_views(dtype, rng):
    h = values((9, 13, 3), dtype, rng)
    d = gpublas.to_device(h)
    dv, hv = d[::-2, 1:12:3], h[::-2, 1:12:3]
    assert_close(gpublas.exp(dv), np.exp(hv), dtype)
    assert_close(dv * 2 - d[1:6, ::4], hv * 2 - h[1:6, ::4], dtype)
    assert_close(dv + d[0, 0], hv + h[0, 0], dtype)
    assert_close(gpublas.maximum(dv, d.T[1:2, ::4, ::2].T), np.maximum(hv, h.T[1:2, ::4, ::2].T), dtype)
    assert_close(dv.sum(axis=1), hv.sum(axis=1), dtype, k=4)
    assert_close(dv.max(axis=0), hv.max(axis=0), dtype)
    assert_close(d.T.mean(), h.T.mean(), dtype, k=h.size)
    assert int(dv.argmax()) == int(hv.argmax())
    assert_close(gpublas.softmax(d[:, ::-1, 0]), np.exp(h[:, ::-1, 0]) / np.exp(h[:, ::-1, 0]).sum(1, keepdims=True),
                 dtype)
    out = gpublas.zeros((5, 4, 3), dtype)
    gpublas.add(dv, 1.0, out=out[:, ::-1])
    assert_close(out[:, ::-1], hv + 1, dtype)


def test_kernels_refuse_views_they_cannot_walk():
    d = gpublas.zeros((4, 6))
    with pytest.raises(gpublas.LaunchError, match="non-contiguous"):
        gpublas.get_kernel("memory", "fill_real", np.float32)(1, 32, d[:, ::2], 1.0, 12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_blas_on_views(dtype, rng):
    A, B, X = values((9, 14), dtype, rng), values((14, 6), dtype, rng), values((30,), dtype, rng)
    a, b, x = gpublas.to_device(A), gpublas.to_device(B), gpublas.to_device(X)
    assert_close(a[:, 2:9] @ b[3:10, ::-1], A[:, 2:9] @ B[3:10, ::-1], dtype, k=7)
    assert_close(b.T @ a.T, B.T @ A.T, dtype, k=9)
    assert_close(gpublas.gemv(a[1:8, ::2], x[::4][:7]), A[1:8, ::2] @ X[::4][:7], dtype, k=7)
    assert_close(gpublas.gemv(a[:, 3:11], x[:9], trans=True), A[:, 3:11].T @ X[:9], dtype, k=9)
    assert_close(gpublas.gemv(a.T[2:], x[:9]), A.T[2:] @ X[:9], dtype, k=9)
    assert_close(gpublas.dot(x[::-3], x[1::3]), X[::-3] @ X[1::3], dtype, k=10)
    assert_close(gpublas.nrm2(a[:, 5]), np.linalg.norm(A[:, 5]), dtype, k=9)
    assert gpublas.iamax(x[::2]) == int(np.argmax(np.abs(X[::2])))
    gpublas.axpy(2.0, x[:15], x[15:][::-1])
    X[15:][::-1] += 2 * X[:15]
    assert_close(x, X, dtype)
    before = gpublas.memory_stats()["allocations"]
    gpublas.axpy(-1.0, x[1:29:4], x[26::-4])   # 1-D views go in with their stride as incx: no temporaries
    gpublas.scal(0.5, a[:, 4])
    gpublas.swap(x[:3], a[1, ::-5])
    assert gpublas.memory_stats()["allocations"] == before
    X[26::-4] -= X[1:29:4]
    A[:, 4] *= 0.5
    X[:3], A[1, ::-5] = A[1, ::-5].copy(), X[:3].copy()
    assert_close(x, X, dtype)
    assert_close(a, A, dtype)
    gpublas.copy(a[::-2, 6], x[2:7])
    X[2:7] = A[::-2, 6]
    assert_close(x, X, dtype)
    assert_close(gpublas.asum(a[3, ::-2]), np.abs(A[3, ::-2]).sum(), dtype, k=7)
    gpublas.ger(0.5, x[:5], x[::5], a[2:7, 3:9])
    A[2:7, 3:9] += 0.5 * np.outer(X[:5], X[::5])
    assert_close(a, A, dtype, k=2)
    gpublas.ger(0.5, x[:6], x[:5], a.T[3:9, 2:7])
    A.T[3:9, 2:7] += 0.5 * np.outer(X[:6], X[:5])
    assert_close(a, A, dtype, k=2)
    gpublas.scal(3.0, a[::2, ::3])
    A[::2, ::3] *= 3
    assert_close(a, A, dtype, k=2)
    c = gpublas.to_device(values((9, 12), dtype, rng))
    C = c.get()
    gpublas.gemm(a[:, :7], b[:7, :], c[:, ::2], alpha=2.0, beta=-1.0)
    C[:, ::2] = 2 * A[:, :7] @ B[:7, :] - C[:, ::2]
    assert_close(c, C, dtype, k=7)
