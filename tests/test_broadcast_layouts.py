"""The three layouts an elementwise launch can take after merging axes (elementwise.plan): flat, the
low-rank _nd3 kernels (at most 3 axes, FastDivmod index math) and the general 8-axis _nd kernels.
Each case checks the kernel the profiler saw and the result against NumPy."""
import numpy as np
import pytest

import gpublas
from gpublas.core import elementwise as ew

DTYPES = [np.float32, np.float64, np.int32]


def launched(f):
    """(result, names of the kernels launched by f())."""
    with gpublas.profile() as p:
        out = f()
    return out, [r.name for r in p.key_averages() if r.kind == "kernel"]


def host(rng, shape, dtype):
    return (rng.standard_normal(shape) * 10).astype(dtype)


# (a shape, a view key, b shape, b view key, kernel suffix expected)
BINARY = [
    ((64, 128), (), (128,), (), "_nd3"),                      # a bias over rows: 2 axes
    ((32, 16, 8, 8), (), (1, 16, 1, 1), (), "_nd3"),          # a per-channel scale: 3 axes after merging
    ((1, 64, 128), (), (64, 128), (), ""),                    # merges to one contiguous axis: flat
    ((64, 128), np.s_[:, ::2], (64,), (), "_nd3"),            # a column step
    ((7, 13), np.s_[::-1, ::-2], (7, 1), (), "_nd3"),         # negative strides, column broadcast
    ((13, 7), np.s_[...], (7, 13), "T", "_nd3"),              # a transposed operand
    ((3, 1, 5), (), (4, 1), (), "_nd3"),                      # both broadcast: (3, 4, 5)
    ((1,), (), (1,), (), ""),
    ((2, 3, 4, 5, 6), (), (3, 1, 5, 1), (), "_nd"),           # 5 axes that do not merge: the 8-axis walk
    ((2, 3, 2, 3, 2, 3, 2, 3), np.s_[:, :, :, :, :, :, :, ::2], (3, 1, 3, 1, 3, 1, 2), (), "_nd"),
]


def _view(d, key):
    return d.T if key == "T" else d[key]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa, ka, sb, kb, kind", BINARY)
def test_binary_layouts(rng, dtype, sa, ka, sb, kb, kind):
    ha, hb = host(rng, sa, dtype), host(rng, sb, dtype)
    a, b = _view(gpublas.to_device(ha), ka), _view(gpublas.to_device(hb), kb)
    ha, hb = _view(ha, ka), _view(hb, kb)
    for op, ref in ((gpublas.add, np.add), (gpublas.multiply, np.multiply), (gpublas.maximum, np.maximum)):
        got, names = launched(lambda: op(a, b))
        assert names == [f"binary{kind}_real"], names
        np.testing.assert_allclose(got.get(), ref(ha, hb), rtol=1e-6)
    cmp_kind = kind or "_nd3"  # comparisons have no flat kernel: one merged axis is the low-rank walk
    got, names = launched(lambda: a < b)
    assert names == [f"compare{cmp_kind}_real"], names
    np.testing.assert_array_equal(got.get(), ha < hb)
    got, names = launched(lambda: gpublas.where(a > 0, a, b))
    np.testing.assert_array_equal(got.get(), np.where(ha > 0, ha, hb))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_and_scalar_forms_on_views(rng, dtype):
    h = host(rng, (9, 20), dtype)
    d = gpublas.to_device(h)
    for key, kind in [(np.s_[:, ::3], "_nd3"), (np.s_[::-1], "_nd3"), (np.s_[None, 2:5], ""), (np.s_[2:5], "")]:
        got, names = launched(lambda: gpublas.tanh(d[key]))
        assert names == [f"unary{kind}_real"], (key, names)
        np.testing.assert_allclose(got.get(), np.tanh(h[key]), rtol=1e-6)
        got, names = launched(lambda: d[key] * 3)
        assert names == [f"unary{kind}_real"], (key, names)
        np.testing.assert_allclose(got.get(), h[key] * 3, rtol=1e-6)
    out = gpublas.zeros((9, 40), dtype)
    gpublas.exp(d, out=out[:, ::2])                                   # a strided output
    want = np.zeros((9, 40), dtype)
    want[:, ::2] = np.exp(h)
    np.testing.assert_allclose(out.get(), want, rtol=1e-6)


def test_copies_and_casts_take_the_low_rank_walk(rng):
    h = host(rng, (6, 10), np.float64)
    d = gpublas.to_device(h)
    got, names = launched(lambda: d.T.astype(np.float32))
    assert names == ["cast_nd3_real"], names
    np.testing.assert_array_equal(got.get(), h.T.astype(np.float32))
    big = gpublas.zeros((2, 3, 4, 5, 6), np.int32)
    src = gpublas.to_device(np.arange(6, dtype=np.int32))
    _, names = launched(lambda: big.__setitem__(np.s_[:, ::2], src))      # 4 axes after merging
    assert names == ["cast_nd_real"], names
    want = np.zeros((2, 3, 4, 5, 6), np.int32)
    want[:, ::2] = np.arange(6)
    np.testing.assert_array_equal(big.get(), want)


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (3, 0), (31, 17), (2, 3, 5)])
def test_shapes_one_zero_primes(rng, shape):
    h = host(rng, shape, np.float32)
    row = host(rng, shape[-1:], np.float32)
    d, r = gpublas.to_device(h), gpublas.to_device(row)
    np.testing.assert_allclose((d[..., ::-1] - r).get(), h[..., ::-1] - row, rtol=1e-6)
    np.testing.assert_array_equal((d.T == 0).get(), h.T == 0)


def test_plan_picks_by_merged_rank_and_size():
    x, b = gpublas.empty((64, 128)), gpublas.empty((128,))
    kind, args = ew.plan((64, 128), x, b, x)
    assert kind == "_nd3" and args[0] == 64 * 128 and len(args) == 3 + 3 * 3
    assert args[3:] == [0, 128, 1, 0, 0, 1, 0, 128, 1]         # per array: strides of 3 axes (one padded)
    assert ew.plan((64, 128), x, x, x) == ("", [64 * 128])
    five = gpublas.empty((2, 3, 4, 5, 6))
    assert ew.plan(five.shape, five, gpublas.empty((3, 1, 5, 1)), five)[0] == "_nd"
    assert ew.plan((64, 128), x, b, x, flat=False)[0] == "_nd3"
    # 2^31 elements or more: the 64-bit general walk (nothing is allocated: plan reads layouts only)
    huge = gpublas.empty((1,))._view((2 ** 16, 2 ** 15), (0, 4))
    assert ew.plan(huge.shape, huge, huge, flat=False)[0] == "_nd"
