"""The launch choices of nn.kernels (loss, optim) that only change how work is spread over threads: each keeps the
bits of the plain mapping (one row a thread for softmax_xent_forward on the simulator; the GPU's block per row
agrees to the rounding of its sums)."""
import numpy as np
import pytest

import gpublas
from gpublas.runtime.launch import geometry_1d
from nn.reference import layers as ref
from nn import kernels as NK
from nn import kernels as K


def _xent(kernel, x, labels, rows):
    N, C = x.shape
    d, rl = gpublas.empty((N, C), x.dtype), gpublas.empty((N,), x.dtype)
    scale = gpublas.to_device(np.array([1.0 / N], x.dtype))
    kernel(1, 32, gpublas.to_device(x), gpublas.to_device(labels), d, rl, N, C, rows, -100, scale, None, 0)  # no check
    return d.get(), rl.get()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_xent_row_groups_keep_each_rows_bits(dtype, rng, sim_order):
    kernel = K.get_kernel("loss", "softmax_xent_forward", dtype)
    if gpublas.backend() == "sim":
        gpu_form = gpublas.get_kernel("loss", "softmax_xent_forward", dtype, root=NK.KERNELS, XENT_GPU_FORM=1)
    for N, C in [(1, 1), (13, 2), (37, 45), (64, 7)]:
        x = (3 * rng.standard_normal((N, C))).astype(dtype)
        labels = rng.integers(0, C, N).astype(np.int32)
        if N > 8:
            x[1, -1], x[2, :] = np.nan, -np.inf  # a NaN row; an all -inf row
            labels[3] = C                        # a label outside [0, C): a NaN row loss
        one = _xent(kernel, x, labels, 1)
        for rows in (3, K.SIM_XENT_ROWS):  # a short last group of single rows included
            for a, b in zip(one, _xent(kernel, x, labels, rows)):
                np.testing.assert_array_equal(a, b, err_msg=f"N {N}, C {C}, rows {rows}")
        if gpublas.backend() == "sim":  # the GPU's form (a block of 32 a row, grid-stride; it ignores rows)
            for a, b in zip(one, _xent(gpu_form, x, labels, K.SIM_XENT_ROWS)):  # its sums in another order
                np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=f"XENT_GPU_FORM: N {N}, C {C}")
                np.testing.assert_allclose(a, b, rtol=8 * np.finfo(dtype).eps, atol=8 * np.finfo(dtype).eps / N,
                                           err_msg=f"XENT_GPU_FORM: N {N}, C {C}")
        good = np.isfinite(x).all(axis=1) & (labels < C)
        loss, grad = ref.np_softmax_xent(x[good].astype(np.float64), labels[good])
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(one[1][good].mean() * N, loss, rtol=tol)
        np.testing.assert_allclose(one[0][good] * N / good.sum(), grad, rtol=tol, atol=tol)
        assert np.isnan(one[1][~good]).all()


def test_the_launcher_picks_row_groups_on_the_sim_only(rng):
    N, C = 100, 45
    logits = gpublas.to_device(rng.standard_normal((N, C)).astype(np.float32))
    labels = gpublas.to_device(rng.integers(0, C, N).astype(np.int32))
    d, rl = gpublas.empty((N, C), np.float32), gpublas.empty((N,), np.float32)
    with gpublas.profile() as p:
        K.softmax_xent_forward(logits, labels, d, rl)
    (entry,) = [e for e in p.key_averages() if e.name == "softmax_xent_forward"]
    if gpublas.backend() == "sim":  # a thread per group of rows
        assert (entry.grid[0], entry.block[0]) == geometry_1d(-(-N // K.SIM_XENT_ROWS))
    else:  # a block of 64 threads (C = 45) per row
        assert (entry.grid[0], entry.block[0]) == (N, 64)
    kernel = K.get_kernel("loss", "softmax_xent_forward", np.float32)
    one = _xent(kernel, logits.get(), labels.get(), 1)
    np.testing.assert_array_equal(d.get(), one[0])
    np.testing.assert_array_equal(rl.get(), one[1])


@pytest.mark.parametrize("n", [1, 37, 24637, NK.SIM_IN_ORDER + 1])
def test_optimizer_updates_give_the_bits_of_a_full_grid(rng, n):
    """The launchers' geometry (one thread walking the elements in order on the sim, up to SIM_IN_ORDER)
    against the kernels launched over a grid of many threads: sgd_update, adam_update, clip_scale."""
    host = {k: rng.standard_normal(n).astype(np.float32) for k in ("p", "g", "buf", "m")}
    host["v"] = np.abs(host["m"])
    state = gpublas.to_device(np.array([0.1, 2.0, 0.05, 0.9]))
    clip = gpublas.to_device(np.array([3.0, 0.25]))

    def run(launch):
        d = {k: gpublas.to_device(a) for k, a in host.items()}
        launch(d)
        return [d[k].get() for k in ("p", "buf", "m", "v")]

    def by_launchers(d):
        K.sgd_update(d["p"], d["g"], d["buf"], state, 0.9, 0.1, 0.01, True)
        K.adam_update(d["p"], d["g"], d["m"], d["v"], None, state, 0.9, 0.999, 1e-8, 0.01, True)
        K.clip_scale(d["p"], clip)

    def by_grid(d):
        f = np.float32
        K.get_kernel("optim", "sgd_update", f)(7, 96, d["p"], d["g"], d["buf"], n, state, 0.9, 0.1, 0.01, 1)
        K.get_kernel("optim", "adam_update", f)(7, 96, d["p"], d["g"], d["m"], d["v"], None, n, state, 0.9, 0.999,
                                                 1e-8, 0.01, 1)
        K.get_kernel("optim", "clip_scale", f)(7, 96, d["p"], n, clip)

    for a, b in zip(run(by_launchers), run(by_grid)):
        np.testing.assert_array_equal(a, b)
    assert NK.in_order_geometry(n) == ((1, 1) if gpublas.backend() == "sim" and n <= NK.SIM_IN_ORDER
                                     else geometry_1d(n))
