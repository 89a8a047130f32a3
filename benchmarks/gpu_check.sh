#!/usr/bin/env bash
# gpu_check.sh --stage N OUT | --rehearse OUT: the GPU check in stages, each well inside one
# command's 10 minutes on a lent machine, ordered by value (docs/gpu.md):
#
#   stage 1 (~5 min): device, driver and toolkit facts; the tests of what never ran on a GPU (GEMM v2,
#           TF32 mma.sync and wgmma, the 16-bit GEMMs, graphs on cuda, the nn layers, attention, LayerNorm,
#           the transformer and the GPT, sort, topk, scans, einsum); the gemm suite
#           (FP32, TF32, BF16, FP16 at 4096^3 and nn's shapes) against cuBLAS in the same run.
#   stage 2 (~4 min): the train suite eager and --graph against PyTorch eager and CUDA-graphed; the
#           attention, layernorm (against the D2D copy's GB/s), gpt2 (GPT-2 small tokens/s) and sort suites
#           against PyTorch / CuPy; generate; launch; transfer.
#   stage 3 (the rest): the whole suite on cuda (pytest-xdist, pytest-timeout), a junit XML;
#           GPU_CHECK_TESTS narrows it to some files or test ids (a re-run of what failed).
#
# Nothing is built there: PyCUDA installs from .whl/ (benchmarks/gpu_prepare.sh copies the wheels
# built here), and the kernels load from .cubins/ (GPUBLAS_CUBIN_DIR; built here by gpu_prepare.sh,
# gpublas/runtime/cubins.py) where they were built ahead; what is missing compiles with nvcc there.
# Each stage packs its logs, JSON, plots and XML into ONE archive, OUT/stageN-<device>-<date>.tar.gz,
# and prints a short summary table last. Exit status: 0 when every step passed, 1 otherwise, 2 usage.
#
# --rehearse OUT runs every stage on the simulator with tiny sizes (the install and the cuda-only
# steps stood in for), so the script that meets a GPU has run end to end (tests/test_gpu_check.py).
set -uo pipefail

usage() { echo "usage: $0 --stage 1|2|3 OUT | --rehearse OUT" >&2; exit 2; }
[[ $# -eq 2 || $# -eq 3 ]] || usage
case "$1" in
    --stage) [[ $# -eq 3 && "$2" =~ ^[123]$ ]] || usage; STAGES=("$2"); REHEARSE=0; OUTARG=$3 ;;
    --rehearse) [[ $# -eq 2 ]] || usage; STAGES=(1 2 3); REHEARSE=1; OUTARG=$2 ;;
    *) usage ;;
esac
mkdir -p "$OUTARG" || exit 2
OUT=$(cd "$OUTARG" && pwd)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2

PY=${PYTHON:-python3}
SITE=${GPUBLAS_SITE:-/tmp/site}
export PYTHONUNBUFFERED=1
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export GPUBLAS_CACHE_DIR=${GPUBLAS_CACHE_DIR:-/tmp/gpublas-cache}
if [[ $REHEARSE -eq 1 ]]; then
    export GPUBLAS_BACKEND=sim
else
    export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
    export PATH="$CUDA_ROOT/bin:$PATH"
    export GPUBLAS_BACKEND=cuda
    [[ -d .cubins ]] && export GPUBLAS_CUBIN_DIR=${GPUBLAS_CUBIN_DIR:-$REPO/.cubins}
fi
mkdir -p "$GPUBLAS_CACHE_DIR"
declare -a SUMMARY=()
FAILED=0

step() { echo; echo "=== $* ($(date +%T)) ==="; }
record() {  # record NAME STATUS [SECONDS]: one summary line; a nonzero status fails the check
    local t=${3:+ ${3}s}
    if [[ "$2" -eq 0 ]]; then SUMMARY+=("ok      $1$t"); else SUMMARY+=("FAILED  $1 (exit $2)$t"); FAILED=1; fi
}
timed() {  # timed NAME LOG CMD...: runs CMD, its output tee'd to OUT/work/LOG, and records it; CMD gets
          # SIGINT when the stage's budget (GPU_CHECK_BUDGET s) is near, so the archive is always written
    local name=$1 log=$2 t0=$SECONDS left=$((DEADLINE - SECONDS - 25))
    shift 2
    if [[ $left -lt 15 ]]; then record "$name (skipped: the stage's budget is spent)" 1; return; fi
    timeout --signal=INT --kill-after=10 "$left" "$@" 2>&1 | tee "$WORK/$log"
    local rc=${PIPESTATUS[0]}
    [[ $rc -eq 124 ]] && name+=" (stopped at the stage's budget)"
    record "$name" "$rc" $((SECONDS - t0))
}

install_pycuda() {
    step "PyCUDA from .whl/ into $SITE"
    if "$PY" -c "import pycuda.driver" 2>/dev/null; then record "pycuda (already there)" 0; return; fi
    shopt -s nullglob; local wheels=(.whl/*.whl); shopt -u nullglob
    if [[ ${#wheels[@]} -eq 0 ]]; then
        echo "no wheels in .whl/: run benchmarks/gpu_prepare.sh here first, and carry .whl" >&2
        record "pycuda install (no .whl/)" 1; return
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "${wheels[@]}"
    "$PY" -c "import pycuda.driver, pycuda; print('pycuda', pycuda.VERSION_TEXT)"
    record "pycuda install from .whl/" $?
}

facts() {
    step "device, driver and toolkit"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
        --format=csv | tee "$WORK/nvidia-smi.csv"
    "$PY" - <<'EOF' 2>&1 | tee "$WORK/facts.txt"
import os, platform, time
t = time.perf_counter()
import numpy as np
import gpublas
print("python", platform.python_version(), "numpy", np.__version__, "backend", gpublas.backend())
for k, v in gpublas.device_info().items():
    print(f"  {k}: {v}")
for peer in ("torch", "cupy"):
    try:
        m = __import__(peer)
        print(f"  {peer} {m.__version__}")
    except Exception as e:
        print(f"  {peer}: {type(e).__name__}")
if gpublas.backend() == "cuda":
    import pycuda.driver as drv
    from gpublas.runtime.backends.cuda import nvcc
    v = drv.get_driver_version()
    print(f"  driver CUDA {v // 1000}.{v % 1000 // 10}; {nvcc()[1]}; cubins from {os.environ.get('GPUBLAS_CUBIN_DIR')}")
a = gpublas.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
r = (a @ a.T).get()
assert np.allclose(r, np.arange(12.).reshape(3, 4) @ np.arange(12.).reshape(3, 4).T)
print(f"  first GEMM right, {time.perf_counter() - t:.1f} s from start (a prebuilt cubin loads, or nvcc compiled)")
EOF
    record "device facts and a first GEMM" "${PIPESTATUS[0]}"
}

pytest_run() {  # pytest_run NAME JUNIT ARGS...: the tests on this backend, xdist and a per-test timeout
    local name=$1 junit=$2 workers=() timeout=()
    shift 2
    "$PY" -c "import xdist" 2>/dev/null && workers=(-n "${GPU_CHECK_WORKERS:-8}")
    "$PY" -c "import pytest_timeout" 2>/dev/null && timeout=(--timeout "${GPU_CHECK_TEST_TIMEOUT:-300}")
    timed "$name" "$junit.log" "$PY" -m pytest -p no:cacheprovider -q -rfEs "${workers[@]}" "${timeout[@]}" \
        --junitxml "$WORK/$junit.xml" "$@"
    SUMMARY[-1]+="  $(grep -E '[0-9]+ (passed|failed|error)' "$WORK/$junit.log" | tail -n 1 | tr -d '=')"
}

bench() {  # bench SUITE ARGS...: one benchmark suite, JSON and plot into the archive
    timed "benchmark $1" "$1.log" "$PY" -m benchmarks "$1" --no-progress --out "$WORK" "${@:2}"
}

# the tests of what never ran on a GPU: GEMM v2, the 16-bit GEMMs, graphs, the nn layers; since 11-27's run also
# fused attention (float, 16-bit, dropout, the decode kernel), LayerNorm and GELU, the transformer layers and the
# GPT, the radix sort, topk and unique, the scans, einsum, the GPU's grid-stride loops (test_sim_loop_shape),
# and the model-parallel layers (two ranks under mpiexec sharing the GPU, collectives through pinned staging)
STAGE1_TESTS=(tests/test_cuda_backend.py tests/test_gemm_tf32.py tests/test_gemm_wgmma.py tests/test_gemm_half.py
              tests/test_gemm_views.py tests/test_blas3.py tests/test_graph_cuda.py tests/test_graph.py
              tests/test_nn_layers.py tests/test_nn_norm.py tests/test_nn_lstm.py tests/test_nn_lstm_gates.py
              tests/test_nn_embedding.py tests/test_nn_dropout.py tests/test_nn_step_kernels.py
              tests/test_nn_halftypes.py tests/test_nn_pure16.py tests/test_nn_graph.py tests/test_nn_torch_parity.py
              tests/test_nn_attention.py tests/test_nn_attention_half.py tests/test_nn_attention_dropout.py
              tests/test_nn_layernorm_gelu.py tests/test_nn_transformer.py tests/test_nn_transformer_api.py
              tests/test_nn_gpt.py tests/test_nn_gpt_api.py tests/test_sort.py tests/test_cumulative.py
              tests/test_order_stats.py tests/test_contract.py tests/test_sim_loop_shape.py
              tests/test_tensor_parallel.py tests/test_megatron.py
              tests/test_benchmarks.py::test_torch_graph_replays_equal_eager_steps)  # stage 2's PyTorch graph peer
modules_ready() {  # every family's modules loaded (prebuilt) or compiled, all cores at once, before the tests
    step "kernel modules: the prebuilt cubins loaded, nvcc for what is missing"
    timed "kernel modules ready" modules.log "$PY" - "$@" <<'EOF'
import os, sys, time
import numpy as np
import gpublas
from gpublas.runtime.launch import prebuild
from nn.kernels import KERNELS
t = time.perf_counter()
families = sys.argv[1:] or None
types = (np.float32,) if families else (np.float32, np.float64)  # 16-bit: the GEMMs, prebuilt
results = prebuild(roots=[None] if families else [None, KERNELS], dtypes=types, families=families,
                   workers=os.cpu_count())
bad = [r for r in results if r[2]]
print(f"{len(results) - len(bad)} of {len(results)} modules ready in {time.perf_counter() - t:.0f} s")
for family, dtype, error in bad:  # a family without 16-bit kernels fails for float16: said, not fatal
    print(f"  not built: {family} ({dtype}): {error}")
sys.exit(1 if any(d == "float32" for _, d, _ in bad) else 0)
EOF
}
stage1() {
    facts
    if [[ $REHEARSE -eq 1 ]]; then modules_ready blas1; else modules_ready; fi
    step "stage 1 tests: GEMM v2, TF32, 16-bit, graphs, nn layers, attention, LayerNorm, the GPT, sort, scans"
    if [[ $REHEARSE -eq 1 ]]; then
        pytest_run "stage 1 tests (rehearsal: one file)" stage1-tests tests/test_source_macros.py
        bench gemm --quick --repeats 1 --sizes 8x8x8
    else
        pytest_run "stage 1 tests" stage1-tests "${STAGE1_TESTS[@]}"
        bench gemm
    fi
}
stage2() {
    step "stage 2: train eager and --graph, attention, layernorm, gpt2, generate, sort, launch, transfer"
    if [[ $REHEARSE -eq 1 ]]; then
        bench launch --quick --repeats 1 --sizes 100
        bench transfer --quick --repeats 1 --sizes 4K
    else
        # by value: the goals not yet measured on a GPU (attention vs flash SDPA, GPT-2 small tokens/s,
        # sort vs CuPy) before the figures an earlier run already has (launch, transfer)
        bench train --graph
        bench attention
        bench layernorm
        bench gpt2 --graph
        bench generate
        bench sort
        bench launch
        bench transfer
    fi
}
stage3() {
    step "stage 3: the whole suite on $GPUBLAS_BACKEND"
    if [[ $REHEARSE -eq 1 ]]; then
        pytest_run "whole suite (rehearsal: one file)" suite tests/test_architecture.py
    else
        # GPU_CHECK_TESTS="tests/a.py tests/b.py::test_x" narrows it (a re-run of what failed)
        read -r -a selection <<<"${GPU_CHECK_TESTS:-tests}"
        pytest_run "suite: ${GPU_CHECK_TESTS:-whole}" suite "${selection[@]}"
    fi
}

DEVICE=sim
for STAGE in "${STAGES[@]}"; do
    WORK=$(mktemp -d)
    t_stage=$SECONDS
    DEADLINE=$((SECONDS + ${GPU_CHECK_BUDGET:-540}))
    SUMMARY=()
    [[ $REHEARSE -eq 0 && $STAGE -eq ${STAGES[0]} ]] && install_pycuda
    [[ $STAGE -ne 1 ]] && facts >/dev/null
    DEVICE=$("$PY" -c "import gpublas, re; i = gpublas.device_info(); print('sim' if i['backend'] == 'sim' else re.sub(r'[^a-z0-9]+', '-', i['name'].lower()).strip('-')[:40])" 2>/dev/null || echo unknown)
    "stage$STAGE"
    if [[ -f "$GPUBLAS_CACHE_DIR/cubins.log" ]]; then
        cp "$GPUBLAS_CACHE_DIR/cubins.log" "$WORK/"
        SUMMARY+=("cubins: $(grep -c '^hit' "$WORK/cubins.log") loaded prebuilt, $(grep -c '^miss' "$WORK/cubins.log") compiled by nvcc")
    fi
    NAME="stage$STAGE-$DEVICE-$(date +%Y%m%d)"
    printf '%s\n' "${SUMMARY[@]}" > "$WORK/summary.txt"
    tar -czf "$OUT/$NAME.tar.gz" -C "$WORK" . && rm -rf "$WORK"
    echo
    echo "=== summary: stage $STAGE on $DEVICE, $((SECONDS - t_stage)) s -> $OUTARG/$NAME.tar.gz ==="
    for line in "${SUMMARY[@]}"; do echo "  $line"; done
done
exit "$FAILED"
