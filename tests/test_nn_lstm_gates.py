"""lstm.cu's gate kernel against float64: each activation within 1 ulp of the exact value, the cell update as
float arithmetic on those activations. On the simulator float takes runs of 16 units a thread with
gpublas/runtime/sim/vector_math.h's exp and tanh; its GPU form (LSTM_GPU_FORM: a unit a thread, libm's functions) is
built and checked here too, so the code a GPU runs is tested."""
import numpy as np
import pytest

import gpublas
from gpublas.runtime.launch import geometry_1d, get_kernel as load_kernel
from nn import kernels as K

SHAPES = [(32, 64), (3, 7), (5, 17), (1, 1), (2, 40), (0, 5)]  # H below, across and at the run of 16


def ulps(got, want):
    """|got - want| in units of the last place of float32 (same-sign values; equal NaNs count 0)."""
    both_nan = np.isnan(got) & np.isnan(want)
    g, w = got.view(np.int32).astype(np.int64), want.view(np.int32).astype(np.int64)
    return np.where(both_nan, 0, np.abs(g - w))


def gates_inputs(rng, N, H):
    g = (rng.standard_normal((N, 4 * H)) * 4).astype(np.float32)
    special = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-8, -1e-30, 30.0, -30.0, 120.0, -120.0])
    g.flat[:min(g.size, special.size)] = special[:g.size]  # through every gate of the first units
    return g, (rng.standard_normal(4 * H).astype(np.float32), rng.standard_normal(4 * H).astype(np.float32),
               rng.standard_normal((N, H)).astype(np.float32))


def run_gates(g0, b_ih, b_hh, cp, form):
    N, H = cp.shape
    gates = gpublas.to_device(g0)
    h, c, tc = (gpublas.empty((N, H), np.float32) for _ in range(3))
    args = (gates, gpublas.to_device(b_ih), gpublas.to_device(b_hh), gpublas.to_device(cp), h, c, tc)
    if form == "own":
        K.lstm_gates_forward(*args)
    else:  # the GPU's code built on the simulator, launched as a GPU launches it: a unit a thread
        k = load_kernel("lstm", "lstm_gates_forward", np.float32, root=K.KERNELS, LSTM_GPU_FORM=1)
        if N * H:
            k(*geometry_1d(N * H), *args, N, H)
    return gates.get(), c.get(), tc.get(), h.get()


@pytest.mark.parametrize("form", ["own", "gpu"])
@pytest.mark.parametrize("N,H", SHAPES)
def test_gates_forward_within_one_ulp(rng, N, H, form):
    if form == "gpu" and gpublas.backend() != "sim":
        pytest.skip("the GPU's form is what the cuda backend runs anyway")
    g0, (b_ih, b_hh, cp) = gates_inputs(rng, N, H)
    got, c, tc, h = run_gates(g0, b_ih, b_hh, cp, form)
    a = ((g0 + b_ih) + b_hh).astype(np.float64)  # the pre-activations, added in float as the kernel adds them
    with np.errstate(over="ignore", invalid="ignore"):
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        want = np.concatenate([sig(a[:, :H]), sig(a[:, H:2 * H]), np.tanh(a[:, 2 * H:3 * H]), sig(a[:, 3 * H:])],
                              axis=1).astype(np.float32)
    # the simulator's runs: each activation rounded once from double (vector_math.h), within 1 ulp; a unit a thread,
    # sigmoid is 1 / (1 + expf(-a)) in float, three roundings (libm's expf within 1 ulp, a GPU's within 2)
    assert ulps(got, want).max(initial=0) <= (1 if form == "own" and gpublas.backend() == "sim" else 4)
    i, f, g, o = (got[:, q * H:(q + 1) * H] for q in range(4))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(c, f * cp + i * g)  # float arithmetic on the activated gates
        want_tc = np.tanh(c.astype(np.float64)).astype(np.float32)
        assert ulps(tc, want_tc).max(initial=0) <= (1 if gpublas.backend() == "sim" else 2)
        np.testing.assert_array_equal(h, o * tc)


def test_gates_forward_forms_agree_on_the_simulator(rng):
    if gpublas.backend() != "sim":
        pytest.skip("simulator forms")
    g0, (b_ih, b_hh, cp) = gates_inputs(rng, 9, 50)
    own, gpu = run_gates(g0, b_ih, b_hh, cp, "own"), run_gates(g0, b_ih, b_hh, cp, "gpu")
    assert ulps(own[0], gpu[0]).max() <= 4  # the activations: rounded once, or as float arithmetic
    g = slice(2 * 50, 3 * 50)  # the g gate is tanh alone: the runs' tanh gives the scalar tanhf's bits
    np.testing.assert_array_equal(own[0][:, g].view(np.uint32), gpu[0][:, g].view(np.uint32))
    for x, y in zip(own[1:], gpu[1:]):  # c, tanh(c), h from them: a cell state near 0 cancels
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("with_rec,with_out", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("N,H", SHAPES)
def test_gates_backward_forms_give_the_same_bits(rng, N, H, with_rec, with_out):
    # the backward step has no transcendental: its runs (the simulator) and a unit a thread (its GPU form, and
    # float64 as a reference) do the same float arithmetic, so they agree to the bit and with float64 closely
    f32 = lambda *s: (rng.standard_normal(s) * 2).astype(np.float32)  # noqa: E731
    gates = rng.random((N, 4 * H)).astype(np.float32)  # activated gates (i, f, o in (0, 1); g too is fine)
    tc, cp, dc0 = np.tanh(f32(N, H)), f32(N, H), f32(N, H)
    dh_rec, d_out = (f32(N, H) if with_rec else None), (f32(N, H) if with_out else None)
    dev = lambda x: None if x is None else gpublas.to_device(x)  # noqa: E731
    outs = {}
    for form in ("own", "gpu") if gpublas.backend() == "sim" else ("own",):
        dc, dg = gpublas.to_device(dc0), gpublas.empty((N, 4 * H), np.float32)
        args = (dev(gates), dev(cp), dev(tc), dev(d_out), dev(dh_rec), dc, dg)
        if form == "own":
            K.lstm_gates_backward(*args)
        elif N * H:
            load_kernel("lstm", "lstm_gates_backward", np.float32, root=K.KERNELS, LSTM_GPU_FORM=1)(
                *geometry_1d(N * H), *args, N, H)
        outs[form] = (dg.get(), dc.get())
    if "gpu" in outs:
        for x, y in zip(outs["own"], outs["gpu"]):
            np.testing.assert_array_equal(x.view(np.uint32), y.view(np.uint32))
    i, f, g, o = (gates[:, q * H:(q + 1) * H].astype(np.float64) for q in range(4))
    dh = (0 if dh_rec is None else dh_rec) + (0 if d_out is None else d_out.astype(np.float64))
    dcell = dc0 + dh * o * (1 - tc.astype(np.float64) ** 2)
    want = np.concatenate([dcell * g * i * (1 - i), dcell * cp * f * (1 - f), dcell * i * (1 - g * g),
                           dh * tc * o * (1 - o)], axis=1)
    np.testing.assert_allclose(outs["own"][0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outs["own"][1], dcell * f, rtol=1e-5, atol=1e-5)
