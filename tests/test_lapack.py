"""getrf_batched and getrs_batched against scipy.linalg.lu_factor / lu_solve: the shared-memory kernel
(n <= 32) and the global one (n > 32), batches, views, singular matrices reported, ill-conditioned ones
solved to a small backward error."""
import warnings

import numpy as np
import pytest
from scipy.linalg import lu_factor, lu_solve

import gpublas
from gpublas.blas import lapack
from reference import assert_close

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 7, 31, 32, 33, 45])
def test_getrf_getrs_match_scipy(rng, sim_order, dtype, n):
    batch = 3
    a = rng.standard_normal((batch, n, n)).astype(dtype)
    lu, piv = gpublas.getrf_batched(gpublas.to_device(a))
    assert lu.shape == (batch, n, n) and piv.shape == (batch, n) and piv.dtype == np.int32
    b = rng.standard_normal((batch, n, 4)).astype(dtype)
    for i in range(batch):
        want_lu, want_piv = lu_factor(a[i])
        np.testing.assert_array_equal(piv.get()[i], want_piv)
        assert_close(lu.get()[i], want_lu, k=8 * n)
    for trans in (0, 1):
        db = gpublas.to_device(b)
        assert gpublas.getrs_batched(lu, piv, db, trans=trans) is db
        want = [lu_solve(lu_factor(a[i]), b[i], trans=trans) for i in range(batch)]
        x = db.get().astype(np.float64)
        for i in range(batch):  # compared through the residual: some random matrices are ill-conditioned
            op = a[i].T if trans else a[i]
            res = np.linalg.norm(op.astype(np.float64) @ x[i] - b[i]) / (np.linalg.norm(op) * np.linalg.norm(x[i]))
            assert res < 16 * n * np.finfo(dtype).eps, res
            cond = np.linalg.cond(a[i].astype(np.float64))
            assert_close(x[i], want[i], rtol=cond * 64 * np.finfo(dtype).eps, atol=cond * 64 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("n", [7, 33])
def test_getrf_with_the_gpu_block_shape(rng, sim_order, monkeypatch, n, dtype):
    # the simulator launches one warp per matrix; a GPU 32 x ROWS threads, whose rows share the update
    monkeypatch.setattr(lapack, "SIM_ROWS", lapack.ROWS)
    a = rng.standard_normal((2, n, n)) + (1j * rng.standard_normal((2, n, n)) if dtype == np.complex128 else 0)
    lu, piv = gpublas.getrf_batched(gpublas.to_device(a))
    for i in range(2):
        want_lu, want_piv = lu_factor(a[i])
        np.testing.assert_array_equal(piv.get()[i], want_piv)
        assert_close(lu.get()[i], want_lu, k=8 * n)


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_d_views_and_vectors(rng, dtype):
    n = 6
    big = rng.standard_normal((9, 8)).astype(dtype) + 3 * np.eye(9, 8, dtype=dtype)
    da = gpublas.to_device(big)
    lu, piv = gpublas.getrf_batched(da[1:7, 1:7].T)        # a transposed block, not copied by the caller
    want_lu, want_piv = lu_factor(big[1:7, 1:7].T)
    assert lu.shape == (n, n) and piv.shape == (n,)
    np.testing.assert_array_equal(piv.get(), want_piv)
    assert_close(lu, want_lu, k=8 * n)
    np.testing.assert_array_equal(da.get(), big)            # a itself untouched
    b = rng.standard_normal(2 * n).astype(dtype)
    db = gpublas.to_device(b)
    gpublas.getrs_batched(lu, piv, db[::2], trans="T")       # one right-hand side, a strided view
    assert_close(db.get()[::2], lu_solve((want_lu, want_piv), b[::2], trans=1), k=16 * n)
    assert_close(db.get()[1::2], b[1::2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [5, 40])
def test_singular_matrices_are_reported(rng, dtype, n):
    a = rng.standard_normal((4, n, n)).astype(dtype)
    a[1, :, 3] = 0                      # a zero column: U[3, 3] = 0 exactly
    a[3] = 1.0                          # rank one: U[1, 1] = 0 (after the first step every row cancels)
    with pytest.warns(gpublas.SingularMatrixWarning, match=r"2 of 4 matrices are singular \(matrix 1: U\[3, 3\]"):
        lu, piv = gpublas.getrf_batched(gpublas.to_device(a))
    lu2, piv2, info = gpublas.getrf_batched(gpublas.to_device(a), info=True)
    np.testing.assert_array_equal(info.get(), [0, 4, 0, 2])
    for i in (0, 1, 2, 3):              # the factors are LAPACK's all the same
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want_lu, want_piv = lu_factor(a[i])
        np.testing.assert_array_equal(piv.get()[i], want_piv)
        assert_close(lu.get()[i], want_lu, k=8 * n)
    np.testing.assert_array_equal(lu2.get(), lu.get())


@pytest.mark.parametrize("dtype", DTYPES)
def test_ill_conditioned_solve(rng, dtype):
    # a Hilbert-like matrix of condition ~1e6 (float32) / 1e12: the solution is checked by its backward error
    n = 8 if dtype == np.float64 else 5
    i = np.arange(n)
    a = (1.0 / (i[:, None] + i[None, :] + 1)).astype(dtype)[None]
    b = rng.standard_normal((1, n, 2)).astype(dtype)
    lu, piv = gpublas.getrf_batched(gpublas.to_device(a))
    x = gpublas.getrs_batched(lu, piv, gpublas.to_device(b)).get().astype(np.float64)[0]
    res = np.linalg.norm(a[0].astype(np.float64) @ x - b[0]) / (np.linalg.norm(a[0]) * np.linalg.norm(x))
    assert res < 16 * n * np.finfo(dtype).eps and np.abs(x).max() > 10


def test_empty_and_bad_arguments():
    lu, piv = gpublas.getrf_batched(gpublas.zeros((0, 4, 4), np.float64))
    assert lu.shape == (0, 4, 4) and piv.shape == (0, 4)
    lu, piv = gpublas.getrf_batched(gpublas.zeros((2, 0, 0), np.float64))
    assert lu.shape == (2, 0, 0)
    with pytest.raises(ValueError, match="square"):
        gpublas.getrf_batched(gpublas.zeros((2, 3, 4), np.float64))
    lu, piv = gpublas.getrf_batched(gpublas.to_device(np.eye(3)[None]))
    with pytest.raises(ValueError, match="piv must be the contiguous int32"):
        gpublas.getrs_batched(lu, piv.astype(np.int64), gpublas.zeros((1, 3), np.float64))
    with pytest.raises(ValueError, match="b must be"):
        gpublas.getrs_batched(lu, piv, gpublas.zeros((1, 4), np.float64))
    assert lapack.GETRF_SHARED == 32


def test_laswp_grid_stride(rng, monkeypatch):
    monkeypatch.setattr(lapack, "MAX_GRID_Y", 1)
    a, b = rng.standard_normal((1, 6, 6)), rng.standard_normal((1, 6, 300))
    lu, piv = gpublas.getrf_batched(gpublas.to_device(a))
    x = gpublas.getrs_batched(lu, piv, gpublas.to_device(b)).get()
    assert_close(x[0], np.linalg.solve(a[0], b[0]), k=1000)


@pytest.mark.parametrize("dtype,scale", [(np.float32, 1e-39), (np.float64, 1e-310)])
def test_tiny_pivots_stay_finite(rng, dtype, scale):
    # a matrix of subnormal entries: 1 / pivot would overflow to inf. The factors are checked by what they
    # reconstruct (subnormal arithmetic keeps few digits, so the pivot order may differ from LAPACK's)
    n = 6
    a = (rng.standard_normal((1, n, n)) * scale).astype(dtype)
    lu, piv = gpublas.getrf_batched(gpublas.to_device(a))
    got, p = lu.get()[0].astype(np.float64), piv.get()[0]
    assert np.isfinite(got).all()
    rows = np.arange(n)
    for k in range(n):                 # the row order P a that L U reproduces
        rows[[k, p[k]]] = rows[[p[k], k]]
    recon = (np.tril(got, -1) + np.eye(n)) @ (np.triu(got) / scale)   # L is O(1), U as small as a
    np.testing.assert_allclose(recon, a[0][rows].astype(np.float64) / scale, atol=1e-3 if dtype == np.float32 else 1e-9)
