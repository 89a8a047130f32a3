"""Zero-copy interop: DLPack both ways with NumPy on sim (device memory is host memory there), the
CUDA array interface and CuPy / PyTorch round trips on the cuda backend (skipped elsewhere)."""
import gc

import numpy as np
import pytest

import gpublas
from gpublas.core import interop

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


def _library(name):
    """(from_dlpack, arange, to_numpy) of NumPy or PyTorch (skipped where PyTorch is missing)."""
    if name == "numpy":
        return np.from_dlpack, np.arange, np.asarray
    torch = pytest.importorskip("torch")
    return torch.from_dlpack, lambda n: torch.arange(float(n)), lambda t: t.numpy()


@sim_only
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_lifetimes_follow_the_consumers(lib):
    consume, arange, to_numpy = _library(lib)
    held = interop._exported.copy()
    d = gpublas.to_device(np.arange(10.0))
    v = consume(d[2:])
    del d
    gc.collect()
    np.testing.assert_array_equal(to_numpy(v), np.arange(2.0, 10.0))   # the capsule keeps the memory alive
    del v
    gc.collect()
    assert interop._exported == held                                   # ... and lets it go with the consumer
    capsule = gpublas.zeros(3).__dlpack__()
    del capsule                                                        # never consumed: its destructor frees it
    gc.collect()
    assert interop._exported == held
    src = arange(4)
    d = gpublas.from_dlpack(src)
    del src
    gc.collect()
    np.testing.assert_array_equal(d.get(), np.arange(4.0))   # the import keeps the producer's memory alive


def test_interop_errors():
    d = gpublas.zeros(3)
    if gpublas.backend() == "sim":
        assert not hasattr(d, "__cuda_array_interface__")
        with pytest.raises(BufferError, match="device"):
            d.__dlpack__(dl_device=(interop.KDLCUDA, 0))
    with pytest.raises(TypeError, match="neither"):
        gpublas.as_device_array([1, 2, 3])
    if gpublas.backend() == "sim":  # kDLCPU exchange: every NumPy integer type is held
        for t in (np.int8, np.int16, np.uint16, np.uint32, np.uint64):
            h = np.arange(3, dtype=t)
            np.testing.assert_array_equal(gpublas.from_dlpack(h).get(), h)
    else:
        with pytest.raises(BufferError, match="device"):  # a host array, for the cuda backend
            gpublas.from_dlpack(np.zeros(3, np.float32))
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


# -- PyTorch CPU on sim (kDLCPU both ways); the cuda round trip is test_torch_round_trip above ---------
TORCH_DTYPES = [np.float32, np.float64, np.int32]


def _torch():
    return pytest.importorskip("torch")


@sim_only
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_from_dlpack_shares_device_memory(dtype):
    torch = _torch()
    h = np.arange(35).astype(dtype).reshape(5, 7)
    d = gpublas.to_device(h)
    t = torch.from_dlpack(d)
    assert t.data_ptr() == d.ptr and t.device.type == "cpu" and t.dtype == getattr(torch, np.dtype(dtype).name)
    t[1, 2] = -5                              # PyTorch writes, gpublas reads
    d[3] = 9                                  # gpublas's copy kernel writes, PyTorch reads
    expect = h.copy()
    expect[1, 2], expect[3] = -5, 9
    np.testing.assert_array_equal(d.get(), expect)
    np.testing.assert_array_equal(t.numpy(), expect)
    for key in [np.s_[:, 2:6], np.s_[::2, 1::3], np.s_[..., 4], np.s_[1:4, None, ::2]]:
        v = torch.from_dlpack(d[key])         # views: DLPack strides are in elements, PyTorch's too
        assert v.data_ptr() == d[key].ptr
        assert v.stride() == tuple(s // h.itemsize for s in d[key].strides) and tuple(v.shape) == expect[key].shape
        np.testing.assert_array_equal(v.numpy(), expect[key])
    tv = torch.from_dlpack(d.T)               # a transposed view stays one: PyTorch sees the strides
    assert tv.stride() == (1, 7) and not tv.is_contiguous()
    tv[6, 0] = 100
    assert d.get()[0, 6] == 100


@sim_only
@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_gpublas_from_torch_without_copy(dtype):
    torch = _torch()
    t = torch.zeros((6, 9), dtype=getattr(torch, np.dtype(dtype).name))
    for imp in (gpublas.from_dlpack, gpublas.as_device_array):
        d = imp(t[1:, ::3])                   # offset and a column step: a view of PyTorch's memory
        assert d.ptr == t[1:, ::3].data_ptr() and d.shape == (5, 3)
        assert d.strides == (9 * t.element_size(), 3 * t.element_size())
        d[...] = 1                            # gpublas's kernel writes PyTorch's memory in place
        d *= 7                                # and an elementwise kernel, in place on the view
    expect = np.zeros((6, 9), dtype)
    expect[1:, ::3] = 7
    np.testing.assert_array_equal(t.numpy(), expect)
    t[0, 0] = 3                               # ... and PyTorch's writes show through gpublas
    d = gpublas.as_device_array(t.T)
    assert d.shape == (9, 6) and d.strides == (t.element_size(), 9 * t.element_size())
    assert d.get()[0, 0] == 3
    np.testing.assert_array_equal(torch.from_dlpack(gpublas.from_dlpack(t)).numpy(), t.numpy())   # round trip


@sim_only
def test_torch_blas_on_shared_memory():
    torch = _torch()
    ta = torch.randn(7, 5, dtype=torch.float64)
    tb = torch.randn(5, 3, dtype=torch.float64)
    tc = torch.full((7, 3), float("nan"), dtype=torch.float64)
    gpublas.gemm(gpublas.from_dlpack(ta), gpublas.from_dlpack(tb), gpublas.from_dlpack(tc))   # beta 0: NaN unread
    torch.testing.assert_close(tc, ta @ tb)
    x = torch.arange(10, dtype=torch.float32)
    gpublas.scal(2.0, gpublas.from_dlpack(x[::3]))                      # a strided vector, incx 3
    np.testing.assert_array_equal(x.numpy(), np.where(np.arange(10) % 3 == 0, 2, 1) * np.arange(10))


@sim_only
def test_torch_zero_size_and_scalars():
    torch = _torch()
    for shape in [(0,), (0, 3), (4, 0, 2)]:
        d = gpublas.from_dlpack(torch.zeros(shape))
        assert d.shape == shape and d.size == 0 and d.get().shape == shape
        assert (d + 1).shape == shape
        t = torch.from_dlpack(gpublas.zeros(shape, np.int32))
        assert tuple(t.shape) == shape and t.dtype == torch.int32
    s = gpublas.from_dlpack(torch.tensor(2.5, dtype=torch.float64))
    assert s.shape == () and float(s) == 2.5
    assert torch.from_dlpack(gpublas.to_device(np.float32(4))).item() == 4.0


@sim_only
def test_torch_stream_argument_and_errors():
    torch = _torch()
    d = gpublas.to_device(np.arange(6.0))
    for stream in (None, -1):                 # kDLCPU has no streams: None, or -1 (no synchronization)
        np.testing.assert_array_equal(np.from_dlpack(_Exporter(d, stream=stream)), np.arange(6.0))
    for stream in (0, 1, 2):                  # a CUDA stream number means the consumer thinks it is CUDA memory
        with pytest.raises(BufferError, match=f"stream={stream}.*host memory.*kDLCPU"):
            d.__dlpack__(stream=stream)
    assert torch.from_dlpack(d, device="cpu").data_ptr() == d.ptr        # dl_device (1, 0) is ours
    c = torch.from_dlpack(d, copy=True)                                  # copy=True: a copy, not a view
    assert c.data_ptr() != d.ptr
    c[0] = 50
    assert d.get()[0] == 0
    with pytest.raises(BufferError, match="require gradient"):           # PyTorch's own refusal, passed on
        gpublas.from_dlpack(torch.ones(3, requires_grad=True))
    with pytest.warns(UserWarning, match="ComplexHalf"), pytest.raises(TypeError, match="32 bits.*not one gpublas holds"):
        gpublas.from_dlpack(torch.ones(3, dtype=torch.complex32))  # PyTorch's complex half: no NumPy dtype
    assert gpublas.from_dlpack(torch.ones(3, dtype=torch.int8)).dtype == np.int8


class _Exporter:
    """Calls a DeviceArray's __dlpack__ with a given stream, as a consumer would."""

    def __init__(self, a, stream):
        self.a, self.stream = a, stream

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(stream=self.stream)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def _managed(capsule):
    """The DLManagedTensorVersioned a "dltensor_versioned" capsule holds."""
    return interop.DLManagedTensorVersioned.from_address(interop._capsule_pointer(capsule, b"dltensor_versioned"))


@sim_only
def test_dlpack_1_0_versioned_capsules_are_writable():
    """DLPack 1.0: a versioned capsule when the consumer takes one, read-only only where the memory is
    (never, for a DeviceArray), so NumPy's view is writable and shared."""
    d = gpublas.to_device(np.arange(6.0))
    v = np.from_dlpack(d)
    assert v.flags.writeable
    v[0] = 42
    assert d.get()[0] == 42
    for max_version, name in (((1, 0), b"dltensor_versioned"), ((1, 3), b"dltensor_versioned"),
                              ((0, 8), b"dltensor"), (None, b"dltensor")):
        assert interop._capsule_name(d.__dlpack__(max_version=max_version)) == name, max_version
    capsule, copied = d.__dlpack__(max_version=(1, 0)), d.__dlpack__(max_version=(1, 0), copy=True)
    m = _managed(capsule)  # (the capsules hold the structs: keep them while reading)
    assert (m.version.major, m.version.minor, m.flags) == (1, 0, 0) and m.dl_tensor.data == d.ptr
    assert _managed(copied).flags == interop.FLAG_IS_COPIED and _managed(copied).dl_tensor.data != d.ptr
    del capsule, copied, m
    gc.collect()
    h = np.arange(4.0)
    h.flags.writeable = False  # NumPy exports it flagged read-only: gpublas refuses to write through it
    with pytest.raises(BufferError, match="read-only.*to_device"):
        gpublas.from_dlpack(h)
    np.testing.assert_array_equal(gpublas.from_dlpack(_Exporter(d, None)).get(), d.get())  # unversioned producer


@sim_only
def test_dlpack_1_0_with_torch():
    torch = pytest.importorskip("torch")
    d = gpublas.to_device(np.arange(6.0))
    t = torch.from_dlpack(d)
    t[1] = 7.0
    assert d.get()[1] == 7.0
    back = gpublas.from_dlpack(t)  # torch's versioned capsule, read back without a copy
    back[2] = 9.0
    assert t[2].item() == 9.0 and back.ptr == d.ptr
