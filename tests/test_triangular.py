"""trsm, trsm_batched, trmm, trsv and trmv against scipy.linalg.blas (?trsm, ?trmm, ?trsv, ?trmv) in every
(side, lower, trans, unit_diagonal) combination. The recursion's diagonal blocks are LEAF rows; the
`leaf` fixture shrinks LEAF so that small matrices run several levels of it (diagonal kernels and the
GEMM updates), and one test keeps the real LEAF with a matrix past it."""
import itertools

import numpy as np
import pytest
from scipy.linalg import blas as sblas

import gpublas
from gpublas.blas import blas3_tri
from reference import assert_close, tol

DTYPES = [np.float32, np.float64]
COMBOS = list(itertools.product(("left", "right"), (False, True), (False, True), (False, True)))
IDS = [f"{s}-{'L' if lo else 'U'}-{'T' if t else 'N'}-{'unit' if u else 'diag'}" for s, lo, t, u in COMBOS]


def blas(name, dtype):
    return getattr(sblas, ("s" if np.dtype(dtype) == np.float32 else "d") + name)


@pytest.fixture
def leaf(monkeypatch):
    monkeypatch.setattr(blas3_tri, "LEAF", 4)


def triangular(rng, n, dtype, scale=4.0):
    """A well-conditioned matrix for a triangular solve: a random one with a heavy diagonal."""
    return (rng.standard_normal((n, n)) + scale * np.eye(n)).astype(dtype)


def scipy_args(side, lower, trans, unit):
    return dict(side=int(side == "right"), lower=int(lower), trans_a=int(trans), diag=int(unit))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side,lower,trans,unit", COMBOS, ids=IDS)
def test_trsm_and_trmm_every_combination(rng, leaf, sim_order, dtype, side, lower, trans, unit):
    for m, n in [(1, 1), (11, 7), (13, 17)]:
        k = m if side == "left" else n
        a, b = triangular(rng, k, dtype), rng.standard_normal((m, n)).astype(dtype)
        kw = dict(side=side, lower=lower, trans=trans, unit_diagonal=unit, alpha=1.5)
        db = gpublas.to_device(b)
        assert gpublas.trsm(gpublas.to_device(a), db, **kw) is db
        want = blas("trsm", dtype)(1.5, a, b, **scipy_args(side, lower, trans, unit))
        # normwise: a unit triangle of random entries is ill-conditioned, so X grows (|x| to ~100) and a small
        # element is the difference of large ones; summed in another order (a GPU's fused multiply-adds) it
        # moves by eps |X|, not eps |x|
        assert_close(db, want, k=4 * k, atol=tol(dtype, 4 * k)[1] * max(1.0, float(np.abs(want).max())))
        got = gpublas.trmm(gpublas.to_device(a), gpublas.to_device(b), **kw)
        assert_close(got, blas("trmm", dtype)(1.5, a, b, **scipy_args(side, lower, trans, unit)), k=4 * k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("nrhs", [5, 67])
def test_trsm_past_the_real_leaf(rng, dtype, side, nrhs):
    # 131 rows: blocks of 64, 64 and 3 through two GEMM updates with the real LEAF; 5 right-hand sides
    # solve the blocks by substitution (trsm_leaf), 67 by GEMMs with their inverses (trtri_blocks)
    m, n = (131, nrhs) if side == "left" else (nrhs, 131)
    k = 131
    a, b = triangular(rng, k, dtype, scale=8.0), rng.standard_normal((m, n)).astype(dtype)
    for lower, trans in itertools.product((False, True), repeat=2):
        args = scipy_args(side, lower, trans, False)
        got = gpublas.trsm(gpublas.to_device(a), gpublas.to_device(b), side=side, lower=lower, trans=trans)
        assert_close(got, blas("trsm", dtype)(1.0, a, b, **args), k=4 * k)
        got = gpublas.trmm(gpublas.to_device(a), gpublas.to_device(b), side=side, lower=lower, trans=trans)
        assert_close(got, blas("trmm", dtype)(1.0, a, b, **args), k=4 * k)


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_in_and_out(rng, leaf, dtype):
    # a is the transpose of a slice (strides swapped), b a column block of a wider matrix written in place
    big_a = rng.standard_normal((20, 23)).astype(dtype) + 6 * np.eye(20, 23, k=1, dtype=dtype)
    big_b = rng.standard_normal((19, 20)).astype(dtype)
    da, db = gpublas.to_device(big_a), gpublas.to_device(big_b)
    av, a = da[1:18, 2:19].T, big_a[1:18, 2:19].T
    for side, region in (("left", np.s_[:17, 3:9]), ("right", np.s_[2:8, :17])):
        before, bview = db.get(), db[region]
        gpublas.trsm(av, bview, side=side, lower=True, alpha=-2.0)
        want = before.copy()
        want[region] = blas("trsm", dtype)(-2.0, a, before[region], side=int(side == "right"), lower=1)
        assert_close(db, want, k=68)
        got = gpublas.trmm(av, bview, side=side, trans=True)
        assert_close(got, blas("trmm", dtype)(1.0, a, bview.get(), side=int(side == "right"), trans_a=1), k=68)


@pytest.mark.parametrize("dtype", DTYPES)
def test_b_strided_both_ways(rng, leaf, dtype):
    # b[::2, ::3]: no leading dimension gemm can take; the leaf kernel walks it, gemm goes through a copy
    a, big = triangular(rng, 9, dtype), rng.standard_normal((18, 21)).astype(dtype)
    dbig = gpublas.to_device(big)
    gpublas.trsm(gpublas.to_device(a), dbig[::2, ::3], lower=True, trans=True)
    want = big.copy()
    want[::2, ::3] = blas("trsm", dtype)(1.0, a, big[::2, ::3], lower=1, trans_a=1)
    assert_close(dbig, want, k=36)


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_and_alpha_zero(rng, dtype):
    a = gpublas.to_device(triangular(rng, 5, dtype))
    for shape in [(5, 0), (0, 5)]:
        side = "left" if shape[0] == 5 else "right"
        assert gpublas.trsm(a, gpublas.empty(shape, dtype), side=side).shape == shape
        assert gpublas.trmm(a, gpublas.empty(shape, dtype), side=side).shape == shape
    # alpha == 0: zeros, neither a nor b read (NaN there does not leak)
    nan_a, nan_b = gpublas.to_device(np.full((5, 5), np.nan, dtype)), gpublas.to_device(np.full((5, 3), np.nan, dtype))
    assert (gpublas.trsm(nan_a, nan_b, alpha=0.0).get() == 0).all()
    assert (gpublas.trmm(nan_a, nan_b, alpha=0.0).get() == 0).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_only_the_named_triangle_and_diagonal_are_read(rng, leaf, dtype):
    a = triangular(rng, 9, dtype)
    poisoned = a.copy()
    poisoned[np.triu_indices(9, 1)] = np.nan     # upper triangle: never read by lower=True
    unit = poisoned.copy()
    np.fill_diagonal(unit, np.nan)               # nor the diagonal with unit_diagonal
    b = rng.standard_normal((9, 4)).astype(dtype)
    for aa, u in ((poisoned, False), (unit, True)):
        got = gpublas.trsm(gpublas.to_device(aa), gpublas.to_device(b), lower=True, unit_diagonal=u)
        assert_close(got, blas("trsm", dtype)(1.0, a, b, lower=1, diag=int(u)), k=36)
        got = gpublas.trmm(gpublas.to_device(aa), gpublas.to_device(b), lower=True, unit_diagonal=u, side="left")
        assert_close(got, blas("trmm", dtype)(1.0, a, b, lower=1, diag=int(u)), k=36)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nrhs", [3, 8])
def test_trsm_ill_conditioned_and_singular(rng, leaf, dtype, nrhs):
    # a = L0 D: L0 unit lower (entries ~0.3), D from 1 down to 1e-6 (float32) / 1e-12: condition ~1/tiny,
    # a solution up to ~1/tiny that cancels, so it is checked by its backward error,
    # ||a x - b|| / (||a|| ||x||), as LAPACK's tests do. 3 right-hand sides (< LEAF 4): substitution;
    # 8: GEMMs with the blocks' inverses, whose residual bound 2 LEAF eps |A_dd| |W_d| |b_d| (blas3_tri's
    # docstring) meets the same 8 n eps: W_d = D_d^-1 inv(L0_dd), so |W_d| |b_d| = D_d^-1 |inv(L0_dd)| |b_d|
    # is |x_d| = D_d^-1 |inv(L0_dd) b_d| within a factor of the well-conditioned L0's (the grading cancels)
    n = 23
    tiny = 1e-6 if dtype == np.float32 else 1e-12
    a = ((np.tril(rng.standard_normal((n, n)), -1) * 0.3 + np.eye(n)) * np.geomspace(1.0, tiny, n)).astype(dtype)
    b = rng.standard_normal((n, nrhs)).astype(dtype)
    x = gpublas.trsm(gpublas.to_device(a), gpublas.to_device(b), lower=True).get().astype(np.float64)
    assert np.isfinite(x).all() and np.abs(x).max() > 1e3
    backward = np.linalg.norm(a.astype(np.float64) @ x - b) / (np.linalg.norm(a) * np.linalg.norm(x))
    assert backward < 8 * n * np.finfo(dtype).eps, backward
    # an exact zero on the diagonal: no exception, inf or NaN from that row on, as BLAS
    a[5, 5] = 0
    x = gpublas.trsm(gpublas.to_device(a), gpublas.to_device(b), lower=True).get()
    assert np.isfinite(x[:5]).all() and not np.isfinite(x[5:]).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side,lower,trans,unit", COMBOS[::3], ids=IDS[::3])
def test_trsm_batched(rng, leaf, sim_order, dtype, side, lower, trans, unit):
    batch, m, n = 3, 10, 6
    k = m if side == "left" else n
    a = np.stack([triangular(rng, k, dtype) for _ in range(batch)])
    b = rng.standard_normal((batch, m, n)).astype(dtype)
    db = gpublas.to_device(b)
    gpublas.trsm_batched(gpublas.to_device(a), db, side=side, lower=lower, trans=trans, unit_diagonal=unit,
                         alpha=0.5)
    want = [blas("trsm", dtype)(0.5, a[i], b[i], **scipy_args(side, lower, trans, unit)) for i in range(batch)]
    assert_close(db, np.stack(want), k=4 * k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower,trans,unit", list(itertools.product((False, True), repeat=3)))
def test_trsv_trmv(rng, leaf, dtype, lower, trans, unit):
    for n in (1, 2, 13):
        a, x = triangular(rng, n, dtype), rng.standard_normal(2 * n).astype(dtype)
        kw, args = dict(lower=lower, trans=trans, unit_diagonal=unit), dict(lower=int(lower), trans=int(trans),
                                                                            diag=int(unit))
        dx = gpublas.to_device(x)
        assert gpublas.trsv(gpublas.to_device(a), dx[::2], **kw).shape == (n,)  # a strided x, in place
        assert_close(dx.get()[::2], blas("trsv", dtype)(a, x[::2], **args), k=4 * n)
        assert_close(dx.get()[1::2], x[1::2])
        dx = gpublas.to_device(x)
        gpublas.trmv(gpublas.to_device(a), dx[::-2], **kw)
        assert_close(dx.get()[::-2], blas("trmv", dtype)(a, x[::-2], **args), k=4 * n)


def test_bad_arguments():
    a, b = gpublas.zeros((4, 4), np.float64), gpublas.zeros((4, 3), np.float64)
    with pytest.raises(ValueError, match="side must be"):
        gpublas.trsm(a, b, side="up")
    with pytest.raises(ValueError, match="trans must be"):
        gpublas.trmm(a, b, trans="X")
    with pytest.raises(ValueError, match="a must be 3 x 3"):
        gpublas.trsm(a, b, side="right")
    with pytest.raises(ValueError, match="shares memory"):
        gpublas.trsm(a, a[:, :2])
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.trsm(a, gpublas.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match="batch sizes differ"):
        gpublas.trsm_batched(gpublas.zeros((2, 4, 4), np.float64), gpublas.zeros((3, 4, 1), np.float64))
    with pytest.raises(ValueError, match="x of length n"):
        gpublas.trsv(a, gpublas.zeros(5, np.float64))


def test_grid_stride_past_a_capped_grid(rng, leaf, monkeypatch):
    # one block row of the grid (as when the columns exceed grid.y's 65,535 blocks) walks every column
    monkeypatch.setattr(blas3_tri, "MAX_GRID_Y", 1)
    a, b = triangular(rng, 9, np.float64), rng.standard_normal((9, 300))
    got = gpublas.trsm(gpublas.to_device(a), gpublas.to_device(b), lower=True)
    assert_close(got, blas("trsm", np.float64)(1.0, a, b, lower=1), k=36)
    got = gpublas.symm(gpublas.to_device(a), gpublas.to_device(b))
    assert_close(got, blas("symm", np.float64)(1.0, a, b), k=9)


@pytest.mark.parametrize("n,nrhs,inverted", [(9, 4, True), (9, 3, False), (4, 9, False), (5, 4, True)])
def test_diagonal_blocks_inverted_or_substituted(rng, leaf, n, nrhs, inverted):
    # blas3_tri's rule: a triangle of more than one LEAF block with at least LEAF right-hand sides inverts its
    # diagonal blocks (one trtri_blocks launch, the solves GEMMs); else trsm_leaf substitutes
    a, b = triangular(rng, n, np.float64), rng.standard_normal((n, nrhs))
    with gpublas.profile() as p:
        got = gpublas.trsm(gpublas.to_device(a), gpublas.to_device(b), lower=True)
    launches = {e.name: e.count for e in p.key_averages() if e.kind == "kernel"}
    assert launches.get("trtri_blocks", 0) == int(inverted), launches
    assert ("trsm_leaf" in launches) != inverted, launches
    assert_close(got, blas("trsm", np.float64)(1.0, a, b, lower=1), k=4 * n)


@pytest.mark.parametrize("n,fills", [(8, 1), (11, 2)])
def test_trmm_diagonal_blocks_at_once(rng, leaf, n, fills):
    # trmm's LEAF-row diagonal blocks: one tri_fill and one batched GEMM for the stack of full blocks (grid z: how
    # many), one more for a short last block, whatever the number of blocks
    a, b = triangular(rng, n, np.float64), rng.standard_normal((n, 5))
    with gpublas.profile() as p:
        got = gpublas.trmm(gpublas.to_device(a), gpublas.to_device(b), lower=True)
    rows = [e for e in p.key_averages() if e.name == "tri_fill"]
    assert sum(e.count for e in rows) == fills and max((tuple(e.grid) + (1, 1))[2] for e in rows) == n // 4, rows
    assert_close(got, blas("trmm", np.float64)(1.0, a, b, lower=1), k=4 * n)
