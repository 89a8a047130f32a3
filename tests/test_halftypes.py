"""16-bit floats as DeviceArray dtypes: gpublas.float16 (NumPy's) and gpublas.bfloat16 (ml_dtypes').
Transfers, factories, views and copies keep every bit; astype rounds to nearest even exactly as
CUDA's __float2half_rn / __float2bfloat16_rn (and NumPy / ml_dtypes, where they round once),
checked over every 16-bit pattern and float32's special values."""
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import gpublas
from gpublas.runtime import dtypes

HALVES = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
NAN16 = 0x7fff  # CUDA's canonical NaN of both formats


def every_pattern(dtype):
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)


def bits(a):
    return np.asarray(a).view(np.uint16)


def test_exported_dtypes():
    assert gpublas.float16 is np.float16 and gpublas.bfloat16 is ml_dtypes.bfloat16
    for d in HALVES:
        assert d in dtypes.DTYPES and dtypes.is_float(d) and d.itemsize == 2


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_transfers_and_copies_keep_every_bit(dtype):
    host = every_pattern(dtype)
    a = gpublas.to_device(host)
    assert a.dtype == dtype and a.nbytes == 2 << 16
    np.testing.assert_array_equal(bits(a.get()), bits(host))
    np.testing.assert_array_equal(bits(a.copy().get()), bits(host))
    m = a.reshape(256, 256)
    for view, ref in ((m[3:250:7, ::-3], host.reshape(256, 256)[3:250:7, ::-3]), (m.T, host.reshape(256, 256).T)):
        np.testing.assert_array_equal(bits(view.get()), bits(ref))  # a strided copy (cast kernel, same type)
        np.testing.assert_array_equal(bits(view.copy().get()), bits(ref))
    b = gpublas.empty((256, 256), dtype)
    b.copy_from(m.T)
    np.testing.assert_array_equal(bits(b.get()), bits(host.reshape(256, 256).T))
    np.testing.assert_array_equal(bits(b.astype(dtype).get()), bits(b.get()))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_factories_and_fill(dtype):
    assert gpublas.empty((2, 3), dtype).dtype == dtype
    np.testing.assert_array_equal(bits(gpublas.zeros(7, dtype).get()), 0)
    for value in (1.0, -2.5, 1 / 3, 1e6, float("inf"), 1 + 2.0 ** -8 + 2.0 ** -30):
        got = gpublas.full((3, 5), value, dtype).get()
        assert got.dtype == dtype
        np.testing.assert_array_equal(bits(got), bits(dtypes.round_to(value, dtype)))
    a = gpublas.zeros((4, 6), dtype)
    a[1:3, ::2] = 3.0  # fill of a view: through the strided copy
    ref = np.zeros((4, 6), dtype)
    ref[1:3, ::2] = 3.0
    np.testing.assert_array_equal(a.get(), ref)
    assert "dtype=" + str(dtype) in repr(a)


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_every_pattern_to_float32_and_back(dtype):
    host = every_pattern(dtype)
    wide = gpublas.to_device(host).astype(np.float32).get()
    ref = host.astype(np.float32)  # exact: float32 holds every 16-bit value
    nan = np.isnan(ref)
    np.testing.assert_array_equal(wide.view(np.uint32)[~nan], ref.view(np.uint32)[~nan])
    assert np.isnan(wide[nan]).all()
    back = gpublas.to_device(ref).astype(dtype).get()
    np.testing.assert_array_equal(bits(back)[~nan], bits(host)[~nan])
    np.testing.assert_array_equal(bits(back)[nan], NAN16)  # any NaN becomes CUDA's canonical NaN


def float32_specials():
    f = np.float32
    info = np.finfo(np.float32)
    values = [0.0, -0.0, np.inf, -np.inf, info.max, -info.max, info.tiny, info.smallest_subnormal,
              65504.0, 65519.99, 65520.0, 65536.0, 2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -26,
              3 * 2.0 ** -25, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 2.0 ** -133, 2.0 ** -134, 2.0 ** -135,
              1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 3.3961776e38, 3.3961775e38]
    x = np.array(values + [-v for v in values], dtype=f)
    nans = np.array([0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff, 0xff800001], np.uint32).view(f)
    return np.concatenate([x, nans])


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_float32_to_16bit_rounds_as_cuda(dtype, rng):
    # every tie and near-tie: all 16-bit patterns as float32 plus/minus half an ulp and a bit more
    base = every_pattern(dtype).astype(np.float32)
    base = base[np.isfinite(base)].view(np.uint32)
    shift = 12 if dtype == np.float16 else 15  # half the 16-bit ulp in float32 ulps (normals)
    near = np.concatenate([base + d for d in (1 << shift, (1 << shift) - 1, (1 << shift) + 1)])
    near = near[(near & 0x7f800000) != 0x7f800000].view(np.float32)
    random = rng.integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([float32_specials(), near, random])
    got = gpublas.to_device(x).astype(dtype).get()
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(dtype)  # NumPy and ml_dtypes round float32 once, to nearest even
    nan = np.isnan(x)
    np.testing.assert_array_equal(bits(got)[~nan], bits(ref)[~nan])
    np.testing.assert_array_equal(bits(got)[nan], NAN16)


def exact_round(value, dtype):
    """The nearest `dtype` value to a Fraction (ties to even), computed exactly: the reference for
    conversions NumPy or ml_dtypes round twice (float64 and large integers to bfloat16)."""
    finite = every_pattern(dtype).astype(np.float64)
    finite = np.unique(finite[np.isfinite(finite)])
    top = Fraction(float(finite[-1])) + (Fraction(float(finite[-1])) - Fraction(float(finite[-2]))) / 2
    if abs(value) >= top:
        return np.array(np.inf if value > 0 else -np.inf, dtype)
    i = int(np.searchsorted(finite, float(value)))
    lo, hi = Fraction(float(finite[max(i - 1, 0)])), Fraction(float(finite[min(i, len(finite) - 1)]))
    lo, hi = (lo, hi) if lo <= value else (hi, hi)
    d_lo, d_hi = value - lo, hi - value
    pick = lo if d_lo < d_hi else hi if d_hi < d_lo else (lo if bits(np.array(float(lo), dtype)) % 2 == 0 else hi)
    return np.array(np.copysign(float(pick), float(value) if value else 1.0), dtype)  # -tiny rounds to -0


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_float64_and_integers_to_16bit_round_once(dtype, rng):
    doubles = [1 + 2.0 ** -8 + 2.0 ** -30, 1 + 2.0 ** -11 + 2.0 ** -40, -(1 + 2.0 ** -8 + 2.0 ** -60), 65519.999999,
               2.0 ** -25 + 2.0 ** -70, 2.0 ** -134 + 2.0 ** -170, 1e300, -1e300, 1e-300, 0.1, 1 / 3]
    doubles += list(rng.standard_normal(200) * 10.0 ** rng.integers(-8, 8, 200))
    got = gpublas.to_device(np.array(doubles)).astype(dtype).get()
    ref = np.array([exact_round(Fraction(d), dtype) for d in doubles], dtype)
    np.testing.assert_array_equal(bits(got), bits(ref))
    np.testing.assert_array_equal(bits(dtypes.round_to(doubles, dtype)), bits(ref))
    ints = [0, 1, -1, 255, 2049, 2051, 65504, 65519, 65520, 2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1),
            2 ** 31 - 1, -2 ** 31]
    for idt, extra in ((np.int32, []), (np.int64, [2 ** 60 + 2 ** 52 + 1, -(2 ** 63), 2 ** 63 - 1])):
        v = ints + extra
        got = gpublas.to_device(np.array(v, idt)).astype(dtype).get()
        ref = np.array([exact_round(Fraction(i), dtype) for i in v], dtype)
        np.testing.assert_array_equal(bits(got), bits(ref), err_msg=str(idt))
    u8 = np.arange(256, dtype=np.uint8)
    np.testing.assert_array_equal(gpublas.to_device(u8).astype(dtype).get(), u8.astype(dtype))
    np.testing.assert_array_equal(gpublas.to_device(np.array([True, False])).astype(dtype).get(), [1, 0])


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_16bit_to_every_other_dtype(dtype):
    host = every_pattern(dtype)
    a = gpublas.to_device(host)
    finite = np.isfinite(host.astype(np.float32))
    np.testing.assert_array_equal(a.astype(np.float64).get()[finite], host.astype(np.float64)[finite])
    assert np.isnan(a.astype(np.float64).get()[np.isnan(host.astype(np.float32))]).all()
    np.testing.assert_array_equal(a.astype(np.bool_).get(), host.astype(np.float32) != 0)  # NaN is True
    small = host[finite & (np.abs(host.astype(np.float32)) < 2.0 ** 31)]
    np.testing.assert_array_equal(gpublas.to_device(small).astype(np.int32).get(), small.astype(np.int32))
    np.testing.assert_array_equal(gpublas.to_device(small).astype(np.int64).get(), small.astype(np.int64))
    byte = host[finite & (host.astype(np.float32) >= 0) & (host.astype(np.float32) < 256)]
    np.testing.assert_array_equal(gpublas.to_device(byte).astype(np.uint8).get(), byte.astype(np.uint8))
    other = HALVES[1] if dtype == HALVES[0] else HALVES[0]
    with np.errstate(over="ignore"):
        ref = host.astype(np.float32).astype(other)  # exact to float32, then one rounding
    nan = np.isnan(host.astype(np.float32))
    np.testing.assert_array_equal(bits(a.astype(other).get())[~nan], bits(ref)[~nan])


def test_memory_cu_source_codes_match_the_table():
    from gpublas.runtime import source
    codes = source.int_defines("memory.cu", "SRC_")
    assert sorted(codes.values()) == sorted(r.src for r in dtypes.TABLE.values())
    assert codes["SRC_HALF"] == dtypes.TABLE[HALVES[0]].src and codes["SRC_BFLOAT16"] == dtypes.TABLE[HALVES[1]].src


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_dlpack_both_ways_shares_memory(dtype):
    torch = pytest.importorskip("torch")
    want = {np.dtype(np.float16): torch.float16, np.dtype(ml_dtypes.bfloat16): torch.bfloat16}[dtype]
    if gpublas.backend() != "sim":
        pytest.skip("torch is CPU-only here: the sim backend's kDLCPU exchange")
    a = gpublas.to_device(np.arange(12).astype(dtype).reshape(3, 4))
    t = torch.from_dlpack(a)
    assert t.dtype == want and t.shape == (3, 4)
    t[1, 2] = 2.5
    assert a.get()[1, 2] == 2.5
    src = torch.arange(10, dtype=want)[::3]
    b = gpublas.from_dlpack(src)
    assert b.dtype == dtype and b.strides == (6,)
    np.testing.assert_array_equal(b.get(), np.array([0, 3, 6, 9], dtype))
    src[0] = -1
    assert b.get()[0] == -1


def test_cuda_array_interface_type_strings():
    assert dtypes.TABLE[np.dtype(np.float16)].typestr == "<f2"
    assert dtypes.TABLE[np.dtype(ml_dtypes.bfloat16)].typestr is None  # the interface cannot name it: DLPack


@pytest.mark.cuda
def test_cuda_array_interface_on_a_gpu():
    gpublas.use("cuda")
    a = gpublas.to_device(np.arange(6, dtype=np.float16).reshape(2, 3))
    cai = a[:, ::2].__cuda_array_interface__
    assert cai["typestr"] == "<f2" and cai["strides"] == (6, 4)
    b = gpublas.as_device_array(a)
    assert b is a
    assert not hasattr(gpublas.zeros(3, ml_dtypes.bfloat16), "__cuda_array_interface__")
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        t = torch.from_dlpack(gpublas.zeros(4, ml_dtypes.bfloat16))
        assert t.dtype == torch.bfloat16 and t.is_cuda
