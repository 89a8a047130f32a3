"""docs/array-api.md is true: every NumPy function it marks `yes` is called here through numpy.<name> on
DeviceArrays (strided views) and gives NumPy's answer on the host copies; its gpublas column names exist."""
import re
from pathlib import Path

import numpy as np
import pytest

import gpublas

DOC = Path(__file__).resolve().parent.parent / "docs" / "array-api.md"
ROW = re.compile(r"\| `numpy\.([\w.]+)` \| `?([\w.—]+)`?[^|]* \| (yes|—) \|")


def rows():
    return [m.groups() for m in map(ROW.match, DOC.read_text().splitlines()) if m]


YES = [name for name, _, mark in rows() if mark == "yes"]


def _resolve(root, dotted):
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


# name -> the arguments after the arrays' stand-ins: "x" a (4, 3) float64 view, "v" a 1-D view of 5, "m" a 3 x 3
# view, "b" a bool (4, 3), "i" an int32 (4, 3); other values passed as they are
ARGS = {
    "where": ("b", "x", 0.0), "clip": ("x", -0.5, 0.5), "take": ("x", [2, 0], 1), "reshape": ("x", (3, 4)),
    "expand_dims": ("x", 1), "squeeze": ("x",), "concatenate": (["x", "x"], -1), "stack": (["x", "x"],),
    "full_like": ("x", 2.5), "add": ("x", "x"), "subtract": ("x", 1.5), "multiply": ("x", "x"),
    "divide": ("x", 3.0), "power": ("x", 2.0), "maximum": ("x", 0.0), "minimum": ("x", "x"),
    "equal": ("x", "x"), "not_equal": ("x", 0.0), "less": ("x", 0.0), "less_equal": ("x", "x"),
    "greater": ("x", 0.0), "greater_equal": ("x", 0.0), "matmul": ("x", "m"), "log": ("pos",), "sqrt": ("pos",),
    "quantile": ("x", 0.3), "percentile": ("x", 40.0), "cumsum": ("x", -1), "cumprod": ("x", 0),
    "moveaxis": ("x", 0, -1), "swapaxes": ("x", 0, 1), "broadcast_to": ("v", (2, 5)), "roll": ("x", 2),
    "repeat": ("x", 2, -1), "tile": ("x", (2, 1)), "split": ("v", 5), "array_split": ("x", 3, 1),
    "hstack": (["x", "x"],), "vstack": (["x", "x"],), "dstack": (["x", "x"],), "diag": ("m", 1),
    "diagonal": ("m", -1), "tril": ("x",), "triu": ("x", 1), "argwhere": ("b",), "round": ("x", 2),
    "around": ("x", 1), "nan_to_num": ("nan",), "isnan": ("nan",), "isinf": ("nan",), "isfinite": ("nan",),
    "allclose": ("x", "x"), "isclose": ("x", 0.5), "array_equal": ("x", "x"), "dot": ("x", "m"),
    "outer": ("v", "v"), "tensordot": ("x", "x", ([0, 1], [0, 1])), "einsum": ("ij,kj->ik", "x", "x"),
    "trace": ("m",), "linalg.norm": ("x",), "unique": ("i",), "count_nonzero": ("i",), "nonzero": ("i",),
}


def _inputs(rng):
    base = {"x": rng.standard_normal((8, 6)), "v": rng.standard_normal(10), "m": rng.standard_normal((6, 3)),
            "b": rng.random((8, 6)) < 0.5, "i": rng.integers(0, 4, (8, 6)).astype(np.int32),
            "pos": rng.random((8, 6)) + 0.1,
            "nan": np.where(rng.random((8, 6)) < 0.3, np.nan, np.where(rng.random((8, 6)) < 0.3, np.inf, 1.5))}
    keys = {"x": np.s_[::-2, ::2], "v": np.s_[::2], "m": np.s_[::2, :], "b": np.s_[::2, ::2], "i": np.s_[1::2, ::2],
            "pos": np.s_[::2, ::2], "nan": np.s_[::2, ::2]}
    return {k: (h[keys[k]], gpublas.to_device(h)[keys[k]]) for k, h in base.items()}


def _args(name, inputs, side):
    def one(a):
        if isinstance(a, list):
            return [one(x) for x in a]
        return inputs[a][side] if isinstance(a, str) and a in inputs else a
    return [one(a) for a in ARGS.get(name, ("x",))]


INT32_INDICES = set()  # argmax/argmin give int64 indices, as NumPy (issue 34)


def _same(got, want, name):
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            _same(g, w, name)
        return
    if isinstance(got, gpublas.DeviceArray):
        want = np.asarray(want)
        want = want.astype(np.int32) if name in INT32_INDICES else want
        assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, got.dtype, want.shape, want.dtype)
        got = got.get()
    else:
        assert not isinstance(want, np.ndarray) or want.ndim == 0, (name, type(got))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)


def test_doc_rows_name_real_functions():
    assert len(YES) > 90
    for name, ours, mark in rows():
        if mark == "yes" and not ours.startswith("a."):
            assert callable(_resolve(gpublas, ours.removeprefix("gpublas."))), ours
            assert callable(_resolve(np, name)), name


@pytest.mark.parametrize("name", YES)
def test_every_yes_runs_through_numpy(name, rng):
    if name in ("empty_like",):  # its values are whatever the memory held: shape and dtype only
        d = np.empty_like(gpublas.to_device(np.zeros((2, 3))))
        assert isinstance(d, gpublas.DeviceArray) and d.shape == (2, 3)
        return
    inputs = _inputs(rng)
    f = _resolve(np, name)
    got, want = f(*_args(name, inputs, 1)), f(*_args(name, inputs, 0))
    _same(got, want, name)
