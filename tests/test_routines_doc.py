"""docs/routines.md, the cuBLAS routine table, is true: every routine it lists with a `yes` is called here in
each type it marks and checked against NumPy/SciPy (one small case each; the routines' own test files go
further), every routine called here is listed, and no row claims a gpublas name that does not exist."""
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

import gpublas
from reference import assert_close

DOC = Path(__file__).resolve().parent.parent / "docs" / "routines.md"
TYPES = {"S": np.float32, "D": np.float64, "C": np.complex64, "Z": np.complex128}


def table():
    """[(gpublas name, type letter)] for every `yes` cell of the doc's tables."""
    rows, cols = [], None
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if not cells:
            cols = None
            continue
        if cells[0] == "cuBLAS":
            cols = cells
            continue
        if cols is None or set(cells[0]) <= {"-"}:
            continue
        name = re.fullmatch(r"`(\w+)`", cells[1])
        marks = dict(zip(cols[2:], cells[2:]))
        assert all(m in ("yes", "—", "n/a") for m in marks.values()), line   # n/a: cuBLAS has no such type
        rows += [(name.group(1), t) for t, m in marks.items() if m == "yes"] if name else []
        assert name or all(m != "yes" for m in marks.values()), f"a `yes` with no gpublas name: {line}"
    return rows


def dev(x):
    return gpublas.to_device(np.ascontiguousarray(x))


def _tri(rng, n, dtype):
    """A well-conditioned n x n matrix, the same on every call (a recipe builds it for gpublas and its reference)."""
    return (np.random.default_rng(11).standard_normal((n, n)) + 4 * np.eye(n)).astype(dtype)


def abs1(x):
    """|x|, or cuBLAS's |re| + |im| for complex x (what icamax compares)."""
    return abs(x.real) + abs(x.imag)


def hermitian(a, lower=False):
    """The Hermitian matrix stored in a's `lower` (else upper) triangle, its diagonal's imaginary parts taken as 0."""
    t = np.tril(a, -1) if lower else np.triu(a, 1)
    return t + t.conj().T + np.diag(a.diagonal().real)


def _her(rng, a, x, dtype):
    want = a + np.triu(np.outer(x, x.conj()))
    want[np.diag_indices(len(x))] = want.diagonal().real
    assert_close(gpublas.her(dev(x), dev(a)), want, k=2)


def _rot(rng, x, y, dtype):
    dx, dy = dev(x), dev(y)
    c, s = gpublas.rotg(3.0, 4.0, dtype=dtype)
    gpublas.rot(dx, dy, c, s)
    assert_close(dx, 0.6 * x + 0.8 * y, k=2)


def _rotm(rng, x, y, dtype):
    param = gpublas.rotmg(2.0, 1.0, 4.0, 1.0, dtype=dtype)   # flag 0: h21, h12
    dx, dy = dev(x), dev(y)
    gpublas.rotm(dx, dy, param)
    assert_close(dy, param[2] * x + y, k=2)


def _getrs(rng, a, dtype):
    lu, piv = gpublas.getrf_batched(dev(a[None]))
    b = rng.standard_normal((1, 5, 2)).astype(dtype)
    assert_close(gpublas.getrs_batched(lu, piv, dev(b)), np.linalg.solve(a, b[0])[None], k=64)


# name -> (rng, a 5x5 matrix, x, y of 5, dtype) -> checks one call
RECIPES = {
    "iamax": lambda rng, a, x, y, t: gpublas.iamax(dev(x)) == np.argmax(abs1(x)) or pytest.fail("iamax"),
    "iamin": lambda rng, a, x, y, t: gpublas.iamin(dev(x)) == np.argmin(abs1(x)) or pytest.fail("iamin"),
    "asum": lambda rng, a, x, y, t: assert_close(np.array(gpublas.asum(dev(x))),
                                                 abs(x.real).sum() + abs(x.imag).sum(), t, k=5),
    "axpy": lambda rng, a, x, y, t: assert_close(gpublas.axpy(2.0, dev(x), dev(y)), 2 * x + y, k=2),
    "copy": lambda rng, a, x, y, t: assert_close(gpublas.copy(dev(x), dev(y)), x),
    "dot": lambda rng, a, x, y, t: assert_close(np.array(gpublas.dot(dev(x), dev(y))), x @ y, t, k=5),
    "dotc": lambda rng, a, x, y, t: assert_close(np.array(gpublas.dotc(dev(x), dev(y))), x.conj() @ y, t, k=5),
    "nrm2": lambda rng, a, x, y, t: assert_close(np.array(gpublas.nrm2(dev(x))), np.linalg.norm(x), t, k=5),
    "rot": lambda rng, a, x, y, t: _rot(rng, x, y, t),
    "rotg": lambda rng, a, x, y, t: assert_close(np.array(gpublas.rotg(3.0, 4.0, dtype=t)), np.array([0.6, 0.8], t)),
    "rotm": lambda rng, a, x, y, t: _rotm(rng, x, y, t),
    "rotmg": lambda rng, a, x, y, t: assert_close(gpublas.rotmg(2.0, 1.0, 4.0, 1.0, dtype=t)[2:4],
                                                  np.array([-0.25, 0.125], t)),
    "scal": lambda rng, a, x, y, t: assert_close(gpublas.scal(3.0, dev(x)), 3 * x),
    "swap": lambda rng, a, x, y, t: assert_close(gpublas.swap(dev(x), dev(y))[0], y),
    "gemv": lambda rng, a, x, y, t: assert_close(gpublas.gemv(dev(a), dev(x)), a @ x, k=5),
    "ger": lambda rng, a, x, y, t: assert_close(gpublas.ger(1.0, dev(x), dev(y), dev(a)), a + np.outer(x, y), k=2),
    "gerc": lambda rng, a, x, y, t: assert_close(gpublas.gerc(1.0, dev(x), dev(y), dev(a)), a + np.outer(x, y.conj()),
                                                 k=2),
    "symv": lambda rng, a, x, y, t: assert_close(gpublas.symv(dev(a), dev(x), lower=True),
                                                 (np.tril(a) + np.tril(a, -1).T) @ x, k=5),
    "syr": lambda rng, a, x, y, t: assert_close(gpublas.syr(dev(x), dev(a)), a + np.triu(np.outer(x, x)), k=2),
    "hemv": lambda rng, a, x, y, t: assert_close(gpublas.hemv(dev(a), dev(x), lower=True), hermitian(a, True) @ x,
                                                 k=5),
    "her": lambda rng, a, x, y, t: _her(rng, a, x, t),
    "trmv": lambda rng, a, x, y, t: assert_close(gpublas.trmv(dev(a), dev(x)), np.triu(a) @ x, k=5),
    "trsv": lambda rng, a, x, y, t: assert_close(gpublas.trsv(dev(_tri(rng, 5, t)), dev(x), lower=True),
                                                 scipy.linalg.solve_triangular(_tri(rng, 5, t), x, lower=True), k=64),
    "gemm": lambda rng, a, x, y, t: assert_close(gpublas.gemm(dev(a), dev(a.T)), a @ a.T, k=5),
    "gemm_batched": lambda rng, a, x, y, t: assert_close(gpublas.gemm_batched(dev(a[None]), dev(a[None])),
                                                         (a @ a)[None], k=5),
    "symm": lambda rng, a, x, y, t: assert_close(gpublas.symm(dev(a), dev(a)), (np.triu(a) + np.triu(a, 1).T) @ a,
                                                 k=5),
    "syrk": lambda rng, a, x, y, t: assert_close(gpublas.syrk(dev(a)), np.triu(a @ a.T), k=5),
    "syr2k": lambda rng, a, x, y, t: assert_close(gpublas.syr2k(dev(a), dev(a.T), lower=True),
                                                  np.tril(a @ a + a.T @ a.T), k=10),
    "hemm": lambda rng, a, x, y, t: assert_close(gpublas.hemm(dev(a), dev(a)), hermitian(a) @ a, k=5),
    "herk": lambda rng, a, x, y, t: assert_close(gpublas.herk(dev(a), trans="C"), np.triu(a.conj().T @ a), k=5),
    "her2k": lambda rng, a, x, y, t: assert_close(gpublas.her2k(dev(a), dev(a.T), lower=True),
                                                  np.tril(a @ a.T.conj().T + a.T @ a.conj().T), k=10),
    "trmm": lambda rng, a, x, y, t: assert_close(gpublas.trmm(dev(a), dev(a), side="right"), a @ np.triu(a), k=5),
    "trsm": lambda rng, a, x, y, t: assert_close(gpublas.trsm(dev(_tri(rng, 5, t)), dev(a)),
                                                 scipy.linalg.solve_triangular(_tri(rng, 5, t), a), k=64),
    "trsm_batched": lambda rng, a, x, y, t: assert_close(
        gpublas.trsm_batched(dev(_tri(rng, 5, t)[None]), dev(a[None])),
        scipy.linalg.solve_triangular(_tri(rng, 5, t), a)[None], k=64),
    "geam": lambda rng, a, x, y, t: assert_close(gpublas.geam(dev(a), dev(a), beta=2.0, trans_b=True), a + 2 * a.T,
                                                 k=2),
    "dgmm": lambda rng, a, x, y, t: assert_close(gpublas.dgmm(dev(a), dev(x)), x[:, None] * a),
    "getrf_batched": lambda rng, a, x, y, t: assert_close(gpublas.getrf_batched(dev(_tri(rng, 5, t)))[0],
                                                          scipy.linalg.lu_factor(_tri(rng, 5, t))[0], k=64),
    "getrs_batched": lambda rng, a, x, y, t: _getrs(rng, _tri(rng, 5, t), t),
}


def test_the_table_and_the_recipes_name_the_same_routines():
    listed = {name for name, _ in table()}
    assert len(listed) >= 30
    assert listed == set(RECIPES), listed ^ set(RECIPES)
    assert all(callable(getattr(gpublas, name, None)) for name in listed)


@pytest.mark.parametrize("name,letter", table(), ids=[f"{n}-{t}" for n, t in table()])
def test_every_listed_routine_runs(name, letter):
    dtype = TYPES[letter]
    rng = np.random.default_rng(7)   # the same draws for a recipe's operands and its reference
    a, x, y = (rng.standard_normal(s).astype(dtype) for s in ((5, 5), 5, 5))
    if np.dtype(dtype).kind == "c":  # complex operands with imaginary parts
        a, x, y = (v + (1j * rng.standard_normal(v.shape)).astype(dtype) for v in (a, x, y))
    RECIPES[name](np.random.default_rng(3), a, x, y, dtype)
