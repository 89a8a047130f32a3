"""Zero-copy interop: DLPack both ways with NumPy on sim (device memory is host memory there), the
CUDA array interface and CuPy / PyTorch round trips on the cuda backend (skipped elsewhere)."""
import gc

import numpy as np
import pytest

import gpublas
from gpublas import interop

sim_only = pytest.mark.skipif(gpublas.backend() != "sim", reason="kDLCPU exchange is the sim backend's")
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_]


@sim_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_from_dlpack_shares_device_memory(dtype):
    h = (np.arange(35) % 7).astype(dtype).reshape(5, 7)
    d = gpublas.to_device(h)
    assert d.__dlpack_device__() == (interop.KDLCPU, 0)
    for key in [np.s_[:], np.s_[1:4, ::-2], np.s_[..., 3], np.s_[::2, None, 1:]]:
        v = np.from_dlpack(d[key])
        assert v.dtype == dtype and v.shape == h[key].shape and v.strides == h[key].strides
        np.testing.assert_array_equal(v, h[key])
    v = np.from_dlpack(d)
    d.fill(1)                               # a kernel writes; the NumPy view sees it: no copy was made
    assert (v == 1).all()


@sim_only
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpublas_from_numpy_without_copy(dtype):
    h = np.zeros((6, 9), dtype)
    d = gpublas.from_dlpack(h[1:, ::-3])
    assert d.shape == (5, 3) and d.strides == h[1:, ::-3].strides
    d[...] = 1                              # written by gpublas's copy kernel into NumPy's memory
    expect = np.zeros((6, 9), dtype)
    expect[1:, ::-3] = 1
    np.testing.assert_array_equal(h, expect)
    assert gpublas.as_device_array(h).ptr == h.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(gpublas.from_dlpack(h)), h)   # round trip


@sim_only
def test_lifetimes_follow_the_consumers():
    d = gpublas.to_device(np.arange(10.0))
    held = interop._exported.copy()
    v = np.from_dlpack(d[2:])
    del d
    gc.collect()
    np.testing.assert_array_equal(v, np.arange(2.0, 10.0))   # the capsule keeps the memory alive
    del v
    gc.collect()
    assert interop._exported == held                         # ... and lets it go with the consumer
    capsule = gpublas.zeros(3).__dlpack__()
    del capsule                                              # never consumed: its destructor frees it
    gc.collect()
    assert interop._exported == held
    h = np.arange(4.0)
    d = gpublas.from_dlpack(h)
    del h
    gc.collect()
    np.testing.assert_array_equal(d.get(), np.arange(4.0))   # the import keeps NumPy's memory alive


def test_interop_errors():
    d = gpublas.zeros(3)
    if gpublas.backend() == "sim":
        assert not hasattr(d, "__cuda_array_interface__")
        with pytest.raises(BufferError, match="device"):
            d.__dlpack__(dl_device=(interop.KDLCUDA, 0))
    with pytest.raises(TypeError, match="neither"):
        gpublas.as_device_array([1, 2, 3])
    with pytest.raises(TypeError, match="16 bits.*not one gpublas holds"):
        gpublas.from_dlpack(np.zeros(3, np.float16))
    d.free()
    with pytest.raises(gpublas.FreedArrayError):
        d.__dlpack__()


@pytest.mark.cuda
def test_cuda_array_interface_and_dlpack_device():
    gpublas.use("cuda")
    d = gpublas.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    cai = d[:, ::2].__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "<f4" and cai["shape"] == (3, 2)
    assert cai["strides"] == (16, 8) and cai["data"][0] == d.ptr and "stream" in cai
    assert d.__dlpack_device__() == (interop.KDLCUDA, 0)
    same = gpublas.as_device_array(d[1:])
    same[...] = 5
    assert (d.get()[1:] == 5).all()


@pytest.mark.cuda
def test_cupy_round_trip():
    cp = pytest.importorskip("cupy")
    gpublas.use("cuda")
    d = gpublas.to_device(np.arange(20, dtype=np.float32).reshape(4, 5))
    c = cp.asarray(d[:, 1:4])                   # through __cuda_array_interface__, no copy
    c *= 2
    np.testing.assert_array_equal(d.get()[:, 1:4], np.arange(20, dtype=np.float32).reshape(4, 5)[:, 1:4] * 2)
    back = gpublas.from_dlpack(cp.arange(6, dtype=cp.float64))
    np.testing.assert_array_equal(back.get(), np.arange(6.0))
    e = cp.from_dlpack(d)
    assert int(e.data.ptr) == d.ptr


@pytest.mark.cuda
def test_torch_round_trip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    gpublas.use("cuda")
    d = gpublas.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    t = torch.from_dlpack(d)
    assert t.data_ptr() == d.ptr and t.is_cuda
    t.add_(1)
    np.testing.assert_array_equal(d.get(), np.arange(12, dtype=np.float32).reshape(3, 4) + 1)
    back = gpublas.from_dlpack(torch.arange(5, device="cuda", dtype=torch.int32).flip(0))
    np.testing.assert_array_equal(back.get(), np.arange(5, dtype=np.int32)[::-1])
