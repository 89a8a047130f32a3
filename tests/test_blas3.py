"""gemm, gemm_batched, matmul and @ against NumPy and scipy.linalg.blas (sgemm/dgemm)."""
import numpy as np
import pytest
from scipy.linalg import blas as sblas

import gpublas
from gpublas.blas import gemm_plan
from reference import assert_close

DTYPES = [np.float32, np.float64]
LADDER = ["naive", "tiled", "regblock", "direct"]
V2 = ["v2_large", "v2_medium", "v2_small", "splitk"]
ALL = LADDER + V2
TRANS = [(False, False), (False, True), (True, False), (True, True)]
# (M, N, K): ones, primes, and non-multiples of every tile (16, 64, 128) on each side; the last has every
# dimension a multiple of 4, so gemm_regblock takes its vector loads in all four orientations
SHAPES = [(1, 1, 1), (2, 7, 31), (33, 64, 1), (31, 129, 33), (127, 33, 129), (64, 2, 7), (132, 260, 36)]


def ref_gemm(dtype, alpha, a, b, beta=0.0, c=None, trans_a=False, trans_b=False):
    f = sblas.sgemm if np.dtype(dtype) == np.float32 else sblas.dgemm
    return f(alpha, a, b, beta=beta, c=c, trans_a=int(trans_a), trans_b=int(trans_b))


def operands(rng, dtype, m, n, k, trans_a, trans_b, batch=None):
    sa = (k, m) if trans_a else (m, k)
    sb = (n, k) if trans_b else (k, n)
    if batch is not None:
        sa, sb = (batch,) + sa, (batch,) + sb
    return rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)


# GEMM v2 (gemm_v2.cu), every configuration: ones; primes (lda/ldb not multiples of 4: one-element copies);
# every dimension a multiple of 4 (16-byte cp.async) but not of any tile; K over several K steps with a partial
# last one
V2_SHAPES = [(1, 1, 1), (37, 70, 33), (132, 260, 36), (5, 129, 64)]
KERNEL_SHAPES = [(kern, s) for kern in LADDER for s in SHAPES] + [(kern, s) for kern in V2 for s in V2_SHAPES]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
@pytest.mark.parametrize("kernel,shape", KERNEL_SHAPES)
def test_gemm_every_kernel(rng, dtype, kernel, trans_a, trans_b, shape):
    m, n, k = shape
    a, b = operands(rng, dtype, m, n, k, trans_a, trans_b)
    got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), trans_a=trans_a, trans_b=trans_b, kernel=kernel)
    assert got.shape == (m, n) and got.dtype == dtype
    assert_close(got, ref_gemm(dtype, 1.0, a, b, trans_a=trans_a, trans_b=trans_b), k=k)


def op_ref(x, t):
    """op(x) of a DeviceArray as a float64 host array."""
    h = x.get().astype(np.float64)
    return h.T if t else h


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ALL)
@pytest.mark.parametrize("alpha,beta", [(2.5, 0.0), (0.5, -1.5), (1.0, 1.0), (-1.0, 0.25)])
def test_gemm_alpha_beta(rng, dtype, kernel, alpha, beta):
    m, n, k = 33, 31, 17
    a, b = operands(rng, dtype, m, n, k, False, True)
    c = rng.standard_normal((m, n)).astype(dtype)
    got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), gpublas.to_device(c), alpha=alpha, beta=beta,
                       trans_b=True, kernel=kernel)
    assert_close(got, ref_gemm(dtype, alpha, a, b, beta, c, trans_b=True), k=k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ALL)
def test_gemm_beta_zero_never_reads_c(rng, dtype, kernel):
    a, b = operands(rng, dtype, 31, 33, 7, False, False)
    c = gpublas.to_device(np.full((31, 33), np.nan, dtype))
    c_inf = gpublas.to_device(np.full((31, 33), np.inf, dtype))
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    out = gpublas.gemm(da, db, c, alpha=2.0, beta=0.0, kernel=kernel)
    assert out is c
    assert_close(out, 2.0 * (a.astype(np.float64) @ b), dtype, k=7)
    assert_close(gpublas.gemm(da, db, c_inf, beta=0.0, kernel=kernel), a.astype(np.float64) @ b, dtype, k=7)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta", [0.0, 3.0])
def test_gemm_alpha_zero_reads_no_input(rng, dtype, beta):
    a = np.full((7, 5), np.nan, dtype)
    b = np.full((5, 9), np.inf, dtype)
    c = rng.standard_normal((7, 9)).astype(dtype)
    for kernel in ALL:
        got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), gpublas.to_device(c), alpha=0.0, beta=beta,
                           kernel=kernel)
        assert_close(got, beta * c)
    # beta == 0 with alpha == 0 zeroes c, even where it held NaN
    nan_c = gpublas.to_device(np.full((7, 9), np.nan, dtype))
    assert_close(gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), nan_c, alpha=0.0), np.zeros((7, 9)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_zero_sized(rng, dtype):
    empty_m = gpublas.gemm(gpublas.zeros((0, 4), dtype), gpublas.zeros((4, 3), dtype))
    assert empty_m.shape == (0, 3)
    empty_n = gpublas.gemm(gpublas.zeros((5, 4), dtype), gpublas.zeros((4, 0), dtype))
    assert empty_n.shape == (5, 0)
    # K == 0: C = beta * C, and a new C is zeros
    assert_close(gpublas.gemm(gpublas.zeros((5, 0), dtype), gpublas.zeros((0, 3), dtype)), np.zeros((5, 3)), dtype)
    c = rng.standard_normal((5, 3)).astype(dtype)
    got = gpublas.gemm(gpublas.zeros((0, 5), dtype), gpublas.zeros((0, 3), dtype), gpublas.to_device(c), beta=-2.0,
                       trans_a=True)
    assert_close(got, -2.0 * c)


@pytest.mark.parametrize("kernel", ALL)
def test_gemm_views_and_self_product(rng, kernel):
    # a view that starts mid-allocation (not 16-byte aligned) forces scalar loads in gemm_regblock
    base = rng.standard_normal((66, 33)).astype(np.float32)
    view = gpublas.to_device(base)[1:]
    got = gpublas.gemm(view, view, trans_b=True, kernel=kernel)
    assert_close(got, base[1:].astype(np.float64) @ base[1:].T, np.float32, k=33)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_large_regblock(rng, dtype):
    m, n, k = 257, 513, 255 if dtype == np.float32 else 130
    a, b = operands(rng, dtype, m, n, k, True, False)
    got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), trans_a=True, kernel="regblock")
    assert_close(got, ref_gemm(dtype, 1.0, a, b, trans_a=True), k=k)


def test_gemm_identical_under_thread_orders(rng, sim_order):
    # split-K reduces its slices in a fixed order: the same bits every run, as every other kernel
    a, b = operands(rng, np.float32, 129, 67, 45, True, True)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    first = {kernel: gpublas.gemm(da, db, trans_a=True, trans_b=True, kernel=kernel).get() for kernel in ALL}
    if gpublas.backend() == "sim":
        gpublas.sim_thread_order("random")
    for kernel in ALL:
        np.testing.assert_array_equal(gpublas.gemm(da, db, trans_a=True, trans_b=True, kernel=kernel).get(),
                                      first[kernel], err_msg=f"{kernel} under {sim_order} vs random order")


def test_dispatcher_and_forcing(rng, monkeypatch):
    assert gemm_plan.choose_kernel(4, 4, 4) == "naive"
    # an H100's 132 SMs: the largest tile that still gives every SM a block, split-K for small M x N
    assert gemm_plan.choose_kernel(4096, 4096, 4096, sms=132) == "v2_large"
    assert gemm_plan.choose_kernel(1024, 1024, 1024, sms=132) == "v2_medium"  # 64 blocks of 128x128 < 132
    assert gemm_plan.choose_kernel(1024, 1024, 1024, sms=40) == "v2_large"
    assert gemm_plan.choose_kernel(256, 256, 64, sms=132) == "v2_small"
    assert gemm_plan.choose_kernel(64, 128, 8192, sms=132) == "splitk"     # a weight gradient: K = batch x spatial
    assert gemm_plan.choose_kernel(256, 512, 784, sms=132) == "v2_small"   # too short a K to pay for split-K's launches
    assert gemm_plan.choose_kernel(64, 128, 8192, batch=8, sms=132) == "v2_small"
    assert gemm_plan.choose_kernel(256, 256, 256, lds=(2 ** 24, 256)) == "regblock"  # 32-bit tile index math
    assert gemm_plan.choose_kernel(64, 64, 64, sim=True) == "direct"
    assert gemm_plan.choose_kernel(4, 4, 4, sim=True) == "direct"      # the sim has no "tiny" rule
    assert gemm_plan.choose_kernel(1, 1, 4096, sim=True) == "naive"  # one output: 1/256 of direct's tile
    kernel, config, splits = gemm_plan.choose_v2(64, 128, 8192, sms=132)
    assert (kernel, config) == ("splitk", "small") and 2 <= splits <= gemm_plan.MAX_SPLITS
    used = []
    real = gemm_plan.plan
    monkeypatch.setattr(gemm_plan, "plan", lambda *a: used.append(real(*a).name) or real(*a))
    a, b = operands(rng, np.float32, 40, 40, 40, False, False)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    monkeypatch.delenv(gemm_plan.ENV_KERNEL, raising=False)
    gpublas.gemm(da, db)
    gpublas.gemm(da, db, kernel="regblock")
    monkeypatch.setenv(gemm_plan.ENV_KERNEL, "naive")
    got = gpublas.gemm(da, db)
    gpublas.gemm(da, db, kernel="tiled")  # the argument wins over the environment
    assert used == [gemm_plan.choose_kernel(40, 40, 40, sim=gpublas.backend() == "sim"), "regblock", "naive", "tiled"]
    assert_close(got, a.astype(np.float64) @ b, np.float32, k=40)
    monkeypatch.setenv(gemm_plan.ENV_KERNEL, "fastest")
    with pytest.raises(ValueError, match="unknown kernel 'fastest'"):
        gpublas.gemm(da, db)


def test_plans_are_kept_per_problem_environment_and_target(monkeypatch):
    # a product's Plan is made once and looked up after; what it depends on outside the Problem (the kernel
    # argument, $GPUBLAS_GEMM_KERNEL, the target) is part of the key, and a refusal is never kept
    p = gemm_plan.Problem(8, 64, 16, 1, False, True, (16, 16, 64), (0, 0, 0), np.dtype(np.float32), True,
                          np.dtype(np.float32))
    monkeypatch.delenv(gemm_plan.ENV_KERNEL, raising=False)
    auto = gemm_plan.plan(None, p)
    assert gemm_plan.plan(None, p) is auto
    assert gemm_plan.plan(None, p._replace(trans_b=False)).kernel == auto.kernel  # another key, same table row
    assert gemm_plan.plan("naive", p).name == "naive"
    monkeypatch.setenv(gemm_plan.ENV_KERNEL, "tiled")
    assert gemm_plan.plan(None, p).name == "tiled"
    monkeypatch.setenv(gemm_plan.ENV_KERNEL, "fastest")
    for _ in range(2):
        with pytest.raises(ValueError, match="unknown kernel 'fastest'"):
            gemm_plan.plan(None, p)
    monkeypatch.delenv(gemm_plan.ENV_KERNEL)
    assert gemm_plan.plan(None, p) is auto
    if gpublas.backend() == "sim":
        assert gemm_plan.plan("wgmma", p).name == "wgmma"  # the simulator runs it: kept for ("sim", 0)
    monkeypatch.setattr(gemm_plan, "target", lambda: ("sm_80", 80))  # a build without wgmma: refused, not looked up
    with pytest.raises(ValueError, match="sm_90a"):
        gemm_plan.plan("wgmma", p)
    monkeypatch.setattr(gemm_plan, "target", lambda: ("sm_75", 75))
    with pytest.raises(ValueError, match="TF32 tensor cores"):
        gemm_plan.plan("tf32", p)


@pytest.mark.parametrize("kernel", ["wmma", "tf32"])
def test_tf32_kernels_refuse_float64(kernel):
    a = gpublas.zeros((4, 4), np.float64)
    with pytest.raises(ValueError, match=f"{kernel}.*float64"):
        gpublas.gemm(a, a, kernel=kernel)


def test_wmma_tf32(rng):
    m, n, k = 129, 200, 77
    a, b = operands(rng, np.float32, m, n, k, False, True)
    got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), trans_b=True, kernel="wmma")
    want = a.astype(np.float64) @ b.T
    assert_close(got, want, rtol=5e-3, atol=5e-3 * np.sqrt(k))  # TF32: 10-bit mantissa


@pytest.mark.parametrize("trans_a,trans_b", TRANS)
@pytest.mark.parametrize("m,n,k,offset", [(1, 1, 1, 0), (37, 70, 33, 0), (132, 136, 36, 0), (132, 136, 36, 1)])
def test_tf32_v2(rng, trans_a, trans_b, m, n, k, offset):
    # offset 1: both operands one element into their allocation (no 16-byte copies); alpha/beta epilogue
    a, b = operands(rng, np.float32, m, n, k, trans_a, trans_b)
    c = rng.standard_normal((m, n)).astype(np.float32)
    da, db = (gpublas.to_device(np.concatenate([[0] * offset, x.ravel()]).astype(np.float32))[offset:]
              .reshape(x.shape) for x in (a, b))
    got = gpublas.gemm(da, db, gpublas.to_device(c), alpha=0.5, beta=2.0, trans_a=trans_a, trans_b=trans_b,
                       kernel="tf32")
    want = 0.5 * ((a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b)) + 2.0 * c
    assert_close(got, want, rtol=5e-3, atol=5e-3 * np.sqrt(k))  # TF32: 10-bit mantissa


def test_gemm_errors_name_shapes():
    a32, b32 = gpublas.zeros((3, 4)), gpublas.zeros((5, 6))
    with pytest.raises(ValueError, match=r"^gemm: op\(a\) is 3x4 but op\(b\) is 5x6; inner dimensions differ$"):
        gpublas.gemm(a32, b32)
    with pytest.raises(ValueError, match=r"op\(a\) = a\.T is 4x3 but op\(b\) is 4x2"):
        gpublas.gemm(a32, gpublas.zeros((4, 2)), trans_a=True)
    with pytest.raises(ValueError, match=r"c has shape \(2, 2\), expected \(3, 2\)"):
        gpublas.gemm(a32, gpublas.zeros((4, 2)), gpublas.zeros((2, 2)))
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.gemm(a32, gpublas.zeros((4, 2), np.float64))
    with pytest.raises(ValueError, match="mixed dtypes"):
        gpublas.gemm(a32, gpublas.zeros((4, 2)), gpublas.zeros((3, 2), np.float64))
    with pytest.raises(ValueError, match="beta"):
        gpublas.gemm(a32, gpublas.zeros((4, 2)), beta=1.0)
    with pytest.raises(ValueError, match=r"2-D.*\(2, 3, 4\)"):
        gpublas.gemm(gpublas.zeros((2, 3, 4)), gpublas.zeros((4, 2)))
    with pytest.raises(ValueError, match="overlap"):
        gpublas.gemm(a32, gpublas.zeros((4, 4)), a32, beta=1.0)
    with pytest.raises(ValueError, match=r"batch sizes differ.*\(2, 3, 4\).*\(3, 4, 5\)"):
        gpublas.gemm_batched(gpublas.zeros((2, 3, 4)), gpublas.zeros((3, 4, 5)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ALL)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_gemm_batched(rng, dtype, kernel, trans_a, trans_b):
    batch, m, n, k = 3, 17, 33, 9
    a, b = operands(rng, dtype, m, n, k, trans_a, trans_b, batch=batch)
    c = rng.standard_normal((batch, m, n)).astype(dtype)
    got = gpublas.gemm_batched(gpublas.to_device(a), gpublas.to_device(b), gpublas.to_device(c), alpha=1.5,
                               beta=-0.5, trans_a=trans_a, trans_b=trans_b, kernel=kernel)
    want = np.stack([ref_gemm(dtype, 1.5, a[i], b[i], -0.5, c[i], trans_a, trans_b) for i in range(batch)])
    assert_close(got, want, k=k)


def test_gemm_batched_empty_batch():
    assert gpublas.gemm_batched(gpublas.zeros((0, 3, 4)), gpublas.zeros((0, 4, 2))).shape == (0, 3, 2)


@pytest.mark.parametrize("sa,sb", [((0, 3, 2), (2, 4)), ((3, 2), (0, 2, 4)), ((0, 3, 2), (1, 2, 4)),
                                   ((1, 3, 2), (0, 2, 4)), ((1, 3, 2), (2, 4))])
def test_matmul_zero_and_one_batches_broadcast_as_numpy(rng, sa, sb):
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    got = gpublas.to_device(a) @ gpublas.to_device(b)
    want = a @ b
    assert got.shape == want.shape
    assert_close(got, want, k=2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_and_operator(rng, dtype):
    a = rng.standard_normal((7, 31)).astype(dtype)
    b = rng.standard_normal((31, 33)).astype(dtype)
    v = rng.standard_normal(31).astype(dtype)
    w = rng.standard_normal(7).astype(dtype)
    s3 = rng.standard_normal((2, 7, 31)).astype(dtype)
    t3 = rng.standard_normal((2, 31, 5)).astype(dtype)
    da, db, dv, dw = (gpublas.to_device(x) for x in (a, b, v, w))
    assert_close(da @ db, a @ b, k=31)
    assert_close(gpublas.matmul(da, db), a @ b, k=31)
    assert_close(da @ dv, a @ v, k=31)
    assert_close(dw @ da, w @ a, k=7)
    assert abs((dv @ dv) - float(v.astype(np.float64) @ v)) < 1e-4 * max(1.0, abs(float(v @ v)))
    assert_close(gpublas.to_device(s3) @ gpublas.to_device(t3), s3 @ t3, k=31)
    assert_close(gpublas.to_device(s3) @ db, s3 @ b, k=31)                       # 2-D side broadcasts
    assert_close(da @ gpublas.to_device(t3), a @ t3, k=31)
    assert_close(a @ db, a @ b, k=31)                                              # ndarray @ DeviceArray
    assert_close(da @ b, a @ b, k=31)
    with pytest.raises(ValueError, match=r"op\(a\) is 7x31 but op\(b\) is 7x31; inner dimensions differ"):
        da @ da


try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # hypothesis is optional
    given = None

if given is not None:
    @settings(max_examples=25, deadline=None)
    @given(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(0, 70), trans_a=st.booleans(),
           trans_b=st.booleans(), kernel=st.sampled_from(ALL + ["auto"]), double=st.booleans())
    def test_gemm_property(m, n, k, trans_a, trans_b, kernel, double):
        dtype = np.float64 if double else np.float32
        rng = np.random.default_rng(m * 10007 + n * 101 + k)
        a, b = operands(rng, dtype, m, n, k, trans_a, trans_b)
        got = gpublas.gemm(gpublas.to_device(a), gpublas.to_device(b), trans_a=trans_a, trans_b=trans_b,
                           kernel=kernel)
        want = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b)
        assert_close(got, want, dtype, k=max(k, 1))


def test_gemm_batched_more_than_grid_z(rng):
    # 70000 batches: more than one launch's grid z (65535), so the launcher splits them
    a = rng.standard_normal((70_000, 1, 2)).astype(np.float32)
    b = rng.standard_normal((70_000, 2, 1)).astype(np.float32)
    got = gpublas.gemm_batched(gpublas.to_device(a), gpublas.to_device(b), kernel="naive")
    assert_close(got, a @ b, k=2)


# -- GEMM v2 (gemm_v2.cu): copy width, index limits --------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_a,trans_b", TRANS)
def test_gemm_v2_copy_width_follows_alignment(rng, dtype, trans_a, trans_b):
    # the same 68 x 36 x 44 product from aligned arrays (16-byte copies) and from views one element into
    # their allocation (16-byte alignment broken: one-element copies); both match NumPy
    m, n, k = 68, 36, 44
    a, b = operands(rng, dtype, m, n, k, trans_a, trans_b)
    da, db = gpublas.to_device(a), gpublas.to_device(b)
    va, vb = (gpublas.to_device(np.concatenate([[0], x.ravel()]).astype(dtype))[1:].reshape(x.shape) for x in (a, b))
    lda, ldb = a.shape[1], b.shape[1]
    assert gemm_plan.vector_copies(da, lda, db, ldb, m, n, k, trans_a, trans_b, (0, 0))
    assert not gemm_plan.vector_copies(va, lda, vb, ldb, m, n, k, trans_a, trans_b, (0, 0))
    want = ref_gemm(dtype, 1.0, a, b, trans_a=trans_a, trans_b=trans_b)
    for x, y in ((da, db), (va, vb)):
        for kernel in ("v2_large", "v2_small"):
            assert_close(gpublas.gemm(x, y, trans_a=trans_a, trans_b=trans_b, kernel=kernel), want, k=k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", ["v2_large", "v2_medium", "v2_small"])
def test_gemm_v2_epilogue_vector_and_scalar_paths(rng, dtype, kernel):
    # whole tiles with B k-major store C as 16-byte vectors when C is 16-byte aligned, scalars when C starts one
    # element into its allocation; beta == 0 reads no C on either path (NaN there must not leak)
    m, n, k = 128, 256, 20
    for trans_a in (False, True):
        a, b = operands(rng, dtype, m, n, k, trans_a, False)
        da, db = gpublas.to_device(a), gpublas.to_device(b)
        for offset in (0, 1):
            for beta in (0.0, 0.5):
                c = rng.standard_normal((m, n)).astype(dtype) if beta else np.full((m, n), np.nan, dtype)
                dc = gpublas.to_device(np.concatenate([np.zeros(offset, dtype), c.ravel()]))[offset:].reshape(m, n)
                got = gpublas.gemm(da, db, dc, alpha=1.5, beta=beta, trans_a=trans_a, kernel=kernel)
                want = ref_gemm(dtype, 1.5, a, b, trans_a=trans_a) + (beta * c if beta else 0)
                assert_close(got, want, k=k)


def test_gemm_v2_refuses_leading_dimensions_beyond_32_bit_tiles():
    with pytest.raises(ValueError, match="32-bit"):
        gemm_plan.plan("v2", gemm_plan.Problem(2, 2, 2, 1, False, False, (2 ** 24, 2, 2), (0, 0, 0),
                                               np.dtype(np.float32), False))


def test_sim_cost_model_picks_direct_unless_c_is_a_few_elements():
    # nn's digits and LSTM products (all measured fastest on gemm_direct), both dtypes and every transpose
    for m, n, k in [(32, 512, 144), (32, 144, 512), (144, 512, 32), (16, 9, 2048), (9, 2048, 16), (16, 128, 32),
                    (128, 16, 128), (256, 256, 256), (5, 5, 5), (768, 256, 16), (32, 256, 64), (768, 45, 64)]:
        for dtype in (np.float32, np.float64):
            for ta, tb in TRANS:
                assert gemm_plan.sim_kernel(m, n, k, ta, tb, dtype) == "direct", (m, n, k, ta, tb, dtype)
    # a C of a few elements and a long K: direct's micro-tiles compute 6 x 16 (6 x 8) outputs and pack op(B)'s
    # column, naive's one add chain per output wins; a column of 64 rows, or 2048, is already direct's (measured
    # 1.9 ms against naive's 2.6)
    for dtype in (np.float32, np.float64):
        assert gemm_plan.sim_kernel(1, 1, 4096, dtype=dtype) == "naive"
        assert gemm_plan.sim_kernel(4, 1, 10000, dtype=dtype) == "naive"
        assert gemm_plan.sim_kernel(2048, 1, 1024, dtype=dtype) == "direct"
        assert gemm_plan.sim_kernel(64, 1, 64, dtype=dtype) == "direct"


@pytest.mark.parametrize("trans_a", [False, True])
def test_gemm_chunks_rows_beyond_grid_y(trans_a):
    rng = np.random.default_rng(7)
    from gpublas.blas.blas3 import ROWS_PER_LAUNCH
    m = ROWS_PER_LAUNCH + 17  # two row chunks: the second starts mid-tile for every kernel
    a = rng.integers(-3, 4, (m, 2)).astype(np.float32)
    b = rng.integers(-3, 4, (2, 3)).astype(np.float32)
    da = gpublas.to_device(np.ascontiguousarray(a.T) if trans_a else a)
    np.testing.assert_array_equal(gpublas.gemm(da, gpublas.to_device(b), trans_a=trans_a).get(), a @ b)
