"""matmul and @ with NumPy's full rules against NumPy: batch axes broadcast over any number of
dimensions, a vector on either side of a stack, shapes with 0 and 1 (batch and matrix axes),
strided, transposed and broadcast views as operands, float32 and float64, both sim thread orders."""
import numpy as np
import pytest
from reference import assert_close

import gpublas

DTYPES = [np.float32, np.float64]
SHAPES = [
    ((2, 1, 5, 3), (1, 4, 3, 2)),   # the issue's: batch (2, 1) with (1, 4) -> (2, 4)
    ((3, 5, 7), (7,)),              # a 3-D stack @ a vector
    ((7,), (3, 7, 5)),              # a vector @ a 3-D stack
    ((2, 3, 4, 5), (5,)), ((5,), (2, 3, 5, 4)),
    ((4, 1, 3, 6, 2), (5, 1, 2, 3)),  # five and four dimensions
    ((6, 2), (3, 1, 2, 4)),          # a matrix beside a 4-D stack
    ((2, 3, 6, 2), (2, 4)),
    ((1, 1, 3, 4), (4, 2)), ((1, 3, 4), (1, 1, 4, 5)),
    ((0, 3, 4), (2, 1, 4, 5)),       # a batch axis of 0 broadcast against 2 ... gives 0
    ((2, 0, 3, 4), (4, 5)), ((2, 3, 0), (0, 5)), ((2, 3, 4), (4, 0)), ((2, 0, 4), (1, 4, 3)),
    ((1, 1, 1), (1, 1, 1)), ((3, 1, 1), (1,)), ((1,), (3, 1, 1)),
    ((5, 2, 31, 33), (2, 33, 17)),   # primes, non-tile multiples
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa, sb", SHAPES)
def test_matmul_matches_numpy(sa, sb, dtype, rng, sim_order):
    a, b = rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)
    want = np.matmul(a, b)
    got = gpublas.to_device(a) @ gpublas.to_device(b)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_close(got, want, dtype, k=max(sa[-1], 1))
    assert_close(gpublas.matmul(gpublas.to_device(a), gpublas.to_device(b)), want, dtype, k=max(sa[-1], 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_of_views(dtype, rng):
    """Operands whose batch strides merge (a[::2]), do not merge (a transposed stack, a broadcast
    middle axis) or are 0 (a side repeated along the batch) all give NumPy's product."""
    x = rng.standard_normal((6, 4, 9, 8)).astype(dtype)
    y = rng.standard_normal((4, 8, 9)).astype(dtype)
    dx, dy = gpublas.to_device(x), gpublas.to_device(y)
    cases = [
        (dx[::2], dy, x[::2], y),
        (dx.transpose(1, 0, 2, 3), dy[:, None], x.transpose(1, 0, 2, 3), y[:, None]),
        (dx[:, ::-1, 1::2, :], dy[::-1], x[:, ::-1, 1::2, :], y[::-1]),
        (dx[:, :, :, 2:6], dy.transpose(0, 2, 1)[:, 2:6, ::3], x[:, :, :, 2:6], y.transpose(0, 2, 1)[:, 2:6, ::3]),
        (dy[0].T, dy[None, :, :, :3], y[0].T, y[None, :, :, :3]),
        (dx[:, :, 3:4], dy[:, :, 5:6], x[:, :, 3:4], y[:, :, 5:6]),  # (6, 4, 1, 8) @ (4, 8, 1): rows times columns
        (dx[1, 2, 0], dy, x[1, 2, 0], y),  # a strided vector @ a stack
    ]
    for da, db, a, b in cases:
        got, want = da @ db, a @ b
        assert got.shape == want.shape
        assert_close(got, want, dtype, k=8)
    assert_close(dy, y, dtype)  # the operands are untouched


def test_matmul_errors():
    a, b = gpublas.zeros((2, 3, 4)), gpublas.zeros((3, 5, 6))
    with pytest.raises(ValueError, match=r"a \(2, 3, 4\) @ b \(3, 5, 6\): a has 4 columns, b 5 rows"):
        a @ b
    with pytest.raises(ValueError, match="batch axes"):
        a @ gpublas.zeros((3, 4, 6))
    with pytest.raises(ValueError, match="4 columns, b 3 rows"):
        a @ gpublas.zeros((3,))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        gpublas.matmul(a, gpublas.zeros(()))
    with pytest.raises(ValueError, match="mixed dtypes"):  # gemm keeps one dtype; @ promotes (below)
        gpublas.gemm(a[0], gpublas.zeros((4, 2), np.float64))


def test_matmul_promotes_mixed_dtypes(rng):
    a_h, b_h = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((4, 2))
    c = gpublas.to_device(a_h) @ gpublas.to_device(b_h)
    assert c.dtype == np.float64 and c.shape == (2, 3, 2)
    np.testing.assert_allclose(c.get(), a_h @ b_h, rtol=1e-12)
