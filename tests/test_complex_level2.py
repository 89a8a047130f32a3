"""symv and syr (cuBLAS's csymv / csyr, Z too: symmetric, nothing conjugated) and hemv and her (chemv / cher:
Hermitian) in complex64 and complex128, one test each for both kinds: against scipy.linalg.blas's ?syr,
?hemv, ?her (symv against NumPy: scipy has no csymv), strided and reversed x, complex alpha and beta (her's
alpha real), the triangle not named never read, beta == 0 over NaN y, alpha == 0 over NaN a and x."""
import numpy as np
import pytest

import gpublas
from reference import assert_close, crandn, poison_other_triangle, scipy_blas

DTYPES = [np.complex64, np.complex128]
ALPHA, BETA = 0.5 - 1.5j, -1 + 0.25j


def _symv_ref(alpha, a, x, beta=0.0, y=None, lower=0):
    t = np.tril(a) if lower else np.triu(a)
    full = t + t.T - np.diag(np.diag(a))
    return alpha * full @ x + (0 if y is None else beta * y)


# kind -> (mv, rank-1 update, mv's reference, the update's reference, the update's alpha)
KINDS = {"symmetric": (gpublas.symv, gpublas.syr, lambda dtype: _symv_ref, lambda dtype: scipy_blas("syr", dtype),
                       ALPHA),
         "hermitian": (gpublas.hemv, gpublas.her, lambda dtype: scipy_blas("hemv", dtype),
                       lambda dtype: scipy_blas("her", dtype), 0.25)}


def dev(x):
    return gpublas.to_device(np.ascontiguousarray(x))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [False, True])
def test_mv_and_rank_one(rng, leaf, kind, dtype, lower):
    mv, r1, mv_ref, r1_ref, r1_alpha = KINDS[kind]
    mv_ref, r1_ref = mv_ref(dtype), r1_ref(dtype)
    for n in (1, 2, 13):
        a = crandn(rng, (n, n), dtype)
        x, y = crandn(rng, 2 * n, dtype), crandn(rng, n, dtype)
        dx = dev(x)
        got = mv(dev(poison_other_triangle(a, lower)), dx[::2], lower=lower, alpha=ALPHA)
        assert_close(got, mv_ref(ALPHA, a, x[::2], lower=int(lower)), k=n)
        dy = dev(y)
        assert mv(dev(a), dx[1::2], dy, lower=lower, alpha=ALPHA, beta=BETA) is dy
        assert_close(dy, mv_ref(ALPHA, a, x[1::2], beta=BETA, y=y, lower=int(lower)), k=n)
        da = dev(a)
        assert r1(dx[::-2], da, alpha=r1_alpha, lower=lower) is da
        assert_close(da, r1_ref(r1_alpha, x[::-2], a=a, lower=int(lower)), k=2)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_read_nothing_they_need_not(rng, kind, dtype):
    mv, r1, mv_ref, _, _ = KINDS[kind]
    n = 7
    a, x = crandn(rng, (n, n), dtype), crandn(rng, n, dtype)
    nan_a, nan_x = dev(np.full((n, n), np.nan, dtype)), dev(np.full(n, np.nan, dtype))
    y = dev(np.full(n, np.nan, dtype))     # beta == 0: y never read
    assert_close(mv(dev(a), dev(x), y, alpha=ALPHA), mv_ref(dtype)(ALPHA, a, x), k=n)
    y0 = crandn(rng, n, dtype)              # alpha == 0: neither a nor x read
    assert_close(mv(nan_a, nan_x, dev(y0), alpha=0.0, beta=BETA), BETA * y0)
    da = dev(a)
    r1(nan_x, da, alpha=0.0)               # nothing read nor written (her: BLAS's quick return, the diagonal too)
    np.testing.assert_array_equal(da.get(), a)
