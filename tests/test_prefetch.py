"""Background compiles (gpublas.runtime.launch.prefetch, prebuild, nn.prefetch): a prefetched module is compiled
once and found by the launch that needs it; a launch of a loaded kernel never waits for a compile under
way; a queued compile that a launch needs now runs at once in the launching thread; a failure reaches the
launch; compiles still queued when the program ends are dropped. The backend's compile is replaced by a
gated fake here (no compiler runs), except in the one test that builds real modules."""
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import gpublas
import nn
from gpublas.runtime import compile_queue, launch, source
from gpublas.runtime.errors import CompileError
from nn.kernels.prefetch import jobs

KERNEL = 'extern "C" __global__ void k_{name}(real* x) {{ x[threadIdx.x] = 1; }}\n'


class FakeCompile:
    """backend.compile that blocks until `release` is set (or `gate` says the source may pass) and
    records which sources it compiled in which thread."""

    def __init__(self, fail=()):
        self.release, self.calls, self.fail = threading.Event(), [], set(fail)
        self.started = threading.Semaphore(0)

    def __call__(self, text, defines, source_name):
        self.calls.append((source_name.rsplit("/", 1)[-1], threading.current_thread().name))
        self.started.release()
        assert self.release.wait(20), "the test never released the compile"
        if any(source_name.endswith(f) for f in self.fail):
            raise CompileError(f"compiling {source_name} failed", "fake log")
        return object()


@pytest.fixture
def fake(tmp_path, monkeypatch):
    b = gpublas._current_backend()
    gpublas.zeros(5, np.float32).fill(1)  # the fill kernel loads before compiles are faked
    before = dict(b.modules)
    f = FakeCompile()
    monkeypatch.setattr(b, "compile", f, raising=False)
    for i in range(8):
        (tmp_path / f"fam{i}.cu").write_text(KERNEL.format(name=i))
    f.root = tmp_path
    yield f
    f.release.set()
    for future in list(launch._pending.values()):
        try:
            future.result(20)
        except Exception:  # noqa: BLE001 - a test's own failures were checked there
            pass
    for key in set(b.modules) - set(before):
        del b.modules[key]


def _load(root, family):
    return launch.load_source(source.read(family, root), {"real": "float"}, str(source.path(family, root)))


def test_a_prefetched_module_is_compiled_once_and_found_by_its_launch(fake):
    started = launch.prefetch([("fam0", np.float32, fake.root)])
    assert fake.started.acquire(timeout=10)  # compiling on a background thread
    assert fake.calls[0][1].startswith("gpublas-compile")
    fake.release.set()
    m = _load(fake.root, "fam0")
    assert started[("fam0", np.float32, fake.root)].result() is m and len(fake.calls) == 1
    assert launch.prefetch([("fam0", np.float32, fake.root)]) == {}  # loaded: nothing to start


def test_a_loaded_kernel_launches_while_a_compile_runs(fake):
    x = gpublas.zeros(5, np.float32)  # the fill kernel: loaded (shared cache) before the fake is asked
    launch.prefetch([("fam1", np.float32, fake.root)])
    assert fake.started.acquire(timeout=10)
    x.fill(3)  # would hang if launches waited for the background compile
    assert x.get().tolist() == [3] * 5 and not fake.release.is_set()


def test_a_queued_compile_a_launch_needs_runs_at_once_in_its_thread(fake):
    busy = [(f"fam{i}", np.float32, fake.root) for i in range(compile_queue.workers())]
    launch.prefetch(busy + [("fam7", np.float32, fake.root)])  # fam7 waits behind every worker
    for _ in busy:
        assert fake.started.acquire(timeout=10)
    done = threading.Event()
    threading.Timer(0.5, fake.release.set).start()
    threading.Thread(target=lambda: (_load(fake.root, "fam7"), done.set())).start()
    assert done.wait(20)
    (thread,) = [t for f, t in fake.calls if f == "fam7.cu"]  # compiled once, by the thread that needed it
    assert not thread.startswith("gpublas-compile")


def test_a_background_failure_is_raised_by_the_launch_that_needs_it(fake):
    fake.fail.add("fam2.cu")
    launch.prefetch([("fam2", np.float32, fake.root)])
    fake.release.set()
    with pytest.raises(CompileError, match="fam2.cu"):
        _load(fake.root, "fam2")


def test_prebuild_reports_each_job_as_it_ends(fake):
    fake.fail.add("fam4.cu")
    seen = []
    fake.release.set()
    results = launch.prebuild(roots=[fake.root], families=["fam3", "fam4", "nope"], dtypes=[np.float32],
                              progress=lambda *r: seen.append(r))
    assert results[0] == ("fam3", "float32", None) and "CompileError" in results[1][2]
    assert "FileNotFoundError" in results[2][2] and sorted(seen) == sorted(results)


def test_compiles_still_queued_when_the_program_ends_are_dropped(tmp_path):
    code = textwrap.dedent(f"""
        import time, gpublas
        from gpublas.runtime import compile_queue
        def job(i):
            time.sleep(0.3)
            open({str(tmp_path / 'ran')!r}, 'a').write(f'{{i}}\\n')
        for i in range(40):
            compile_queue.submit(job, i)
        """)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    ran = (tmp_path / "ran").read_text().split() if (tmp_path / "ran").exists() else []
    assert len(ran) < 40 and time.perf_counter() - t < 12  # the jobs under way finished, the rest did not start


def test_nn_layers_name_the_modules_a_training_step_launches():
    from nn.examples.digits import model
    net = model()
    opt = nn.SGD(net.parameters(), lr=0.1, momentum=0.9)
    found = [(f, d.name, r is not None, k) for f, d, r, k in jobs(net, nn.SoftmaxCrossEntropy(), opt)]
    assert found == [("conv", "float32", True, None), ("gemm", "float32", False, None),
                     ("reduce", "float32", False, None), ("transpose", "float32", False, "swap01"),
                     ("activation", "float32", True, None), ("pool", "float32", True, "maxpool_forward"),
                     ("dropout", "float32", True, None), ("loss", "float32", True, "softmax_xent_forward"),
                     ("optim", "float32", True, None), ("optim", "float64", True, None)]
    lstm = nn.LSTM(3, 4, dtype=np.float64)
    assert {(f + (":" + k if k else ""), d.name) for f, d, _, k in jobs(lstm)} == \
        {(f, "float64") for f in lstm.kernel_families}


def test_nn_prefetch_compiles_what_the_first_step_launches():
    """Real modules (the shared cache makes them loads): after nn.prefetch a training step compiles
    nothing more, no other unit of a family either (MSELoss: loss.cu's mse_forward unit, not the first)."""
    net = nn.Sequential(nn.Dense(5, 3), nn.ReLU())
    crit, opt = nn.MSELoss(), nn.Adam(net.parameters())
    x, target = gpublas.ones((2, 5), np.float32), gpublas.zeros((2, 3), np.float32)
    nn.prefetch(net, crit, opt)
    for future in list(launch._pending.values()):
        future.result()
    b = gpublas._current_backend()

    def compiled():
        return {key: set(m._handles) for key, m in b.modules.items()}
    before = compiled()
    crit(net(x), target)
    opt.zero_grad()
    net.backward(crit.backward())
    opt.step()
    assert compiled() == before


def test_the_prebuild_command_compiles_the_families_it_is_given(capfd):
    from gpublas.__main__ import _nn_kernels, main
    assert main(["prebuild", "--dtypes", "float32", "--families", "memory,transpose"]) == 0
    err = capfd.readouterr().err
    assert "compiling 2 kernel modules" in err and "2 of 2 modules ready" in err
    b = gpublas._current_backend()
    assert {k[2].rsplit("/", 1)[-1] for k in b.modules if k[1] == (("real", "float"),)} >= {"memory.cu", "transpose.cu"}
    assert _nn_kernels() == nn.kernels.KERNELS


@pytest.mark.parametrize("dropout", [0.0, 0.25])
def test_nn_prefetch_builds_the_attention_builds_the_launcher_asks_for(dropout, monkeypatch):
    """MultiheadAttention names the fused attention's modules at its head dim (the launcher's tiles; the dropout
    build only with dropout > 0): after nn.prefetch a train and an eval step load no attention module more, and
    each one prefetched is asked for (the plain `real` build of attention.cu, which no float32 launch uses, and
    the dropout build at dropout 0 were prefetched before)."""
    from nn.kernels import attention as kernels_attention
    mha = nn.MultiheadAttention(32, 2, dropout=dropout)  # head dim 16
    wanted = {(f, d.name, *defines) for f, d, _, _, *defines in jobs(mha) if f.startswith("attention")}
    assert {f for f, *_ in jobs(mha)} == {"gemm", "activation", "reduce", "attention", *["dropout"] * (dropout > 0)}
    assert len(wanted) == 1 + (dropout > 0)
    nn.prefetch(mha)
    for future in list(launch._pending.values()):
        future.result()
    b = gpublas._current_backend()
    loaded = {k for k in b.modules if k[2].endswith(("attention.cu", "attention_half.cu"))}
    asked, get_kernel = set(), launch.get_kernel

    def recording(family, name, dtype=None, **kw):
        if family.startswith("attention"):
            asked.add((family, np.dtype(dtype).name, tuple(sorted((k, v) for k, v in kw.items() if k != "root"))))
        return get_kernel(family, name, dtype, **kw)
    monkeypatch.setattr(kernels_attention.launch, "get_kernel", recording)
    x = gpublas.to_device(np.random.default_rng(0).standard_normal((1, 5, 32)).astype(np.float32))
    mha.backward(mha(x, x, x, need_weights=False, is_causal=True)[0])
    mha.eval()
    mha(x, x, x, need_weights=False)
    assert asked == wanted
    assert {k for k in b.modules if k[2].endswith(("attention.cu", "attention_half.cu"))} == loaded
