"""Launches from several Python threads at once: each launch has its own arguments (issue 14.1).

A sim launch releases the GIL while the grid runs, so two threads' launches overlap for real; a
launch that read another thread's arguments gives a wrong result here, not an error.
GPUBLAS_STRESS_SECONDS sets how long the stress test runs (default 5 s; the issue's figure is 30).
"""
import os
import threading
import time

import numpy as np
import pytest

import gpublas
import nn


def _in_threads(fn, nthreads):
    """Runs fn(t) in `nthreads` threads started together; re-raises the first failure."""
    errors, start = [], threading.Barrier(nthreads)

    def run(t):
        try:
            start.wait()
            fn(t)
        except BaseException as e:  # noqa: BLE001 (reported below, with its thread)
            errors.append((t, e))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(nthreads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        t, e = errors[0]
        raise AssertionError(f"thread {t} failed: {e!r}") from e


def test_axpy_from_two_threads(sim_order):
    n = 200_000
    x = gpublas.to_device(np.ones(n, np.float32))
    wrong = []

    def work(t):
        y = gpublas.zeros(n, np.float32)
        for _ in range(20):
            y.fill(0)
            gpublas.axpy(t + 1.0, x, y)
            got = y.get()
            if not np.all(got == t + 1.0):
                wrong.append((t, np.unique(got)[:4]))

    _in_threads(work, 2)
    assert not wrong, f"{len(wrong)} of 40 results wrong, e.g. {wrong[:2]}"


def test_gemm_from_three_threads(sim_order):
    rng = np.random.default_rng(0)
    mats = [(rng.standard_normal((37, 29)), rng.standard_normal((29, 41 + t))) for t in range(3)]

    def work(t):
        a, b = (gpublas.to_device(m.astype(np.float32)) for m in mats[t])
        want = mats[t][0] @ mats[t][1]
        for _ in range(5):
            np.testing.assert_allclose(gpublas.gemm(a, b).get(), want, rtol=1e-4, atol=1e-4)

    _in_threads(work, 3)


def test_threaded_stress_blas_and_nn():
    """2 threads of BLAS (axpy, dot, gemm) and 1 of nn (Conv2d + Dense forward and backward) for
    GPUBLAS_STRESS_SECONDS, every result checked against NumPy."""
    seconds = float(os.environ.get("GPUBLAS_STRESS_SECONDS", "5"))
    deadline = time.monotonic() + seconds
    counts = [0, 0, 0]

    def blas(t):
        rng = np.random.default_rng(t)
        a, b = rng.standard_normal((33, 20)), rng.standard_normal((20, 18 + t))
        x, y = rng.standard_normal(5000), rng.standard_normal(5000)
        da, db, dx = gpublas.to_device(a), gpublas.to_device(b), gpublas.to_device(x)
        while time.monotonic() < deadline:
            dy = gpublas.to_device(y)
            gpublas.axpy(0.5 * (t + 1), dx, dy)
            np.testing.assert_allclose(dy.get(), y + 0.5 * (t + 1) * x, rtol=1e-12)
            np.testing.assert_allclose(float(gpublas.dot(dx, dy)), x @ (y + 0.5 * (t + 1) * x), rtol=1e-9)
            np.testing.assert_allclose(gpublas.gemm(da, db).get(), a @ b, rtol=1e-9, atol=1e-12)
            counts[t] += 1

    def layers():
        nn.manual_seed(3)
        conv = nn.Conv2d(2, 3, 3, padding=1, dtype=np.float64)
        dense = nn.Dense(3 * 6 * 6, 4, dtype=np.float64)
        x = np.random.default_rng(7).standard_normal((2, 2, 6, 6))
        first_out = first_grad = None
        while time.monotonic() < deadline:
            conv.zero_grad()
            dense.zero_grad()
            h = conv(x)
            out = dense(h.reshape((2, 3 * 6 * 6)))
            dh = dense.backward(gpublas.to_device(np.ones((2, 4))))
            conv.backward(dh.reshape((2, 3, 6, 6)))
            got, grad = out.get(), conv.weight.grad.get()
            if first_out is None:  # the same step every time: any difference is a race
                first_out, first_grad = got, grad
            np.testing.assert_array_equal(got, first_out)
            np.testing.assert_array_equal(grad, first_grad)
            counts[2] += 1

    _in_threads(lambda t: blas(t) if t < 2 else layers(), 3)
    assert min(counts) > 0, counts
