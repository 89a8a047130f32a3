"""Device sorting (gpublas.numpy_api.sorting, cuda_src/sort.cu) against NumPy: sort, argsort (stable), topk (torch.topk's
order), every key dtype, both kernel geometries (the GPU's runs on the simulator too), axes, views, rows past one
block, NaN / -0.0 / integer extremes."""
import ml_dtypes
import numpy as np
import pytest

import gpublas
from gpublas.numpy_api import sorting

KEYS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64, np.uint8, np.bool_]


@pytest.fixture(params=["backend", "gpu"])
def geometry(request, monkeypatch):
    """The backend's own kernel geometry, and the GPU's (warps ranking 8-bit digits by match) forced on the simulator."""
    monkeypatch.setattr(sorting, "forced", sorting.GPU if request.param == "gpu" else None)
    return request.param


def keys(rng, shape, dtype, specials=True):
    """Random keys with duplicates; floats with NaN, -0.0 / +0.0 and infinities, ints with their extremes."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        flat = x.reshape(-1)
        flat[::5] = flat[(np.arange(flat[::5].size) * 3) % max(flat.size, 1)]  # duplicates
        if specials and flat.size > 4:
            flat[[0, 1, 2]] = info.min, info.max, 0
        return x
    x = np.round(rng.standard_normal(shape) * 4, 1).astype(np.float32)  # rounded: duplicates
    flat = x.reshape(-1)
    if specials and flat.size > 8:
        flat[::11] = np.nan
        flat[1::13], flat[2::13] = -0.0, 0.0
        flat[3], flat[4] = np.inf, -np.inf
    return x.astype(dtype)


def order_key(x):
    """An int64 per element that orders as gpublas sorts: NaN last, -0.0 before +0.0."""
    if x.dtype.kind in "iub":
        return x.astype(np.int64) if x.dtype != np.uint64 else x
    f = x.astype(np.float64)
    rank = np.unique(np.where(np.isnan(f), np.inf, f), return_inverse=True)[1].reshape(f.shape) * 4
    return rank + 2 * np.isnan(f) + (~np.signbit(f) & (f == 0))


def stable_argsort(x, axis=-1, descending=False):
    k = order_key(x)
    return np.argsort(-k if descending else k, axis=axis, kind="stable")


@pytest.mark.parametrize("dtype", KEYS, ids=lambda d: np.dtype(d).name)
def test_sort_argsort_every_dtype(dtype, geometry, rng):
    if geometry == "gpu" and np.dtype(dtype).itemsize != 4:
        pytest.skip("the GPU geometry is run for 4-byte keys (a build per key width)")
    for shape in [(0,), (1,), (3, 7), (2, 300), (5000,)]:
        x = keys(rng, shape, dtype)
        d = gpublas.to_device(x)
        p = gpublas.argsort(d)
        np.testing.assert_array_equal(p.get(), stable_argsort(x))
        assert p.dtype == np.int64
        s = gpublas.sort(d)
        assert s.dtype == x.dtype and s.shape == x.shape
        bits = f"u{x.itemsize}"  # floats compared bit for bit: -0.0 before +0.0, NumPy's quiet NaN
        np.testing.assert_array_equal(s.get().view(bits), np.take_along_axis(x, stable_argsort(x), -1).view(bits))


def test_axes_views_and_numpy_dispatch(rng):
    x = keys(rng, (4, 5, 6), np.float32)
    d = gpublas.to_device(x)
    for axis in (0, 1, -1, -2, None):
        np.testing.assert_array_equal(np.sort(d, axis=axis).get(), np.sort(x, axis=axis))
        np.testing.assert_array_equal(np.argsort(d, axis=axis, kind="stable").get(), stable_argsort(
            x.reshape(-1) if axis is None else x, axis=-1 if axis is None else axis))
    v = d[::-1, 1::2, ::-2]  # negative and non-unit strides
    np.testing.assert_array_equal(gpublas.sort(v, axis=1).get(), np.sort(x[::-1, 1::2, ::-2], axis=1))
    zero = gpublas.to_device(np.zeros((3, 0), np.int32))
    assert gpublas.sort(zero, axis=0).shape == (3, 0) and gpublas.argsort(zero).shape == (3, 0)
    with pytest.raises(np.exceptions.AxisError):
        gpublas.sort(d, axis=3)
    with pytest.raises(TypeError, match="cannot sort complex64"):
        gpublas.sort(gpublas.to_device(np.zeros(3, np.complex64)))
    with pytest.raises(TypeError, match="structured"):
        np.sort(d, order="x")


@pytest.mark.parametrize("dtype, n", [(np.float32, 100_003), (np.int64, 100_003), (np.float32, 2**20)])
def test_rows_past_one_block(dtype, n, rng):
    """The onesweep passes (histogram, then a look-back launch a digit place), with a batch of rows for the first
    cases: the look-back stops at each row's first tile."""
    x = keys(rng, (2, n // 2) if n < 2**20 else (n,), dtype)
    d = gpublas.to_device(x)
    p = gpublas.argsort(d).get()
    np.testing.assert_array_equal(p, stable_argsort(x))
    np.testing.assert_array_equal(gpublas.sort(d).get(), np.sort(x))


@pytest.mark.parametrize("wide, rank", [(False, "ballot"), (True, "match")], ids=["status32", "status64_match_any"])
def test_onesweep_tiles_of_the_gpu_geometry(wide, rank, rng, monkeypatch):
    """The GPU's onesweep on the simulator: warps rank by match (the ballot form here; with rank 'match' the GPU's
    __match_any_sync, built with SWEEP_MATCH_ANY), many tiles a row and rows a batch, so look-back chains cross tiles
    and stop at rows; 64-bit look-back words (rows of 2^30 keys and more) forced on a short row. The two GPU-only
    choices are independent, so one build takes both (64-bit words with match ranking: a build fewer than one
    each, about 4 s of g++)."""
    monkeypatch.setattr(sorting, "forced", sorting.GPU)
    if rank == "match" and gpublas.backend() == "sim":  # the cuda backend's build ranks by match already
        get = sorting.get_kernel
        monkeypatch.setattr(sorting, "get_kernel", lambda *a, **defines: get(*a, **defines, SWEEP_MATCH_ANY=1))
    if wide:
        monkeypatch.setattr(sorting, "STATUS_LIMIT", 1)
    x = keys(rng, (3, 9001), np.float32)
    d = gpublas.to_device(x)
    np.testing.assert_array_equal(gpublas.argsort(d).get(), stable_argsort(x))
    v, i = gpublas.topk(d, 3000, largest=False)  # sorts the whole rows: k * TOPK_SELECT >= n
    np.testing.assert_array_equal(i.get(), stable_argsort(x)[:, :3000])


def topk_reference(x, k, largest):
    order = stable_argsort(x, descending=largest)[..., :k]
    return np.take_along_axis(x, order, -1), order


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_topk_matches_a_stable_argsort(dtype, geometry, rng):
    if geometry == "gpu" and np.dtype(dtype).itemsize != 4:
        pytest.skip("the GPU geometry is run for 4-byte keys (a build per key width)")
    for shape, ks in [((3, 1), (0, 1)), ((4, 50), (1, 7, 50)), ((2, 9000), (1, 5, 100, 3000)), ((30000,), (64,))]:
        x = keys(rng, shape, dtype)
        x.reshape(-1)[5:40] = x.reshape(-1)[min(5, x.size - 1)]  # a run of ties
        d = gpublas.to_device(x)
        for k in ks:
            for largest in (True, False):
                v, i = gpublas.topk(d, k, largest=largest)
                want_v, want_i = topk_reference(x, k, largest)
                np.testing.assert_array_equal(i.get(), want_i, err_msg=f"{shape} k={k} largest={largest}")
                np.testing.assert_array_equal(v.get(), want_v)
    v, i = gpublas.topk(gpublas.to_device(x := keys(rng, (6, 5, 4), np.float32)), 2, axis=1)
    np.testing.assert_array_equal(i.get(), np.moveaxis(topk_reference(np.moveaxis(x, 1, -1), 2, True)[1], -1, 1))
    with pytest.raises(ValueError, match="k=6 is out of range"):
        gpublas.topk(gpublas.to_device(x), 6, axis=1)


def test_topk_is_torch_topk(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((8, 4000)).astype(np.float32)  # distinct values: torch's tie order is its own
    v, i = gpublas.topk(gpublas.to_device(x), 40)
    tv, ti = torch.topk(torch.from_numpy(x), 40)
    np.testing.assert_array_equal(v.get(), tv.numpy())
    np.testing.assert_array_equal(i.get(), ti.numpy())
