#!/usr/bin/env bash
# gpu_check.sh OUTDIR [benchmark options...]: the whole GPU check on an offline NVIDIA machine.
#
#   1. installs PyCUDA (and whatever else .whl/ holds) into /tmp/site from the local files in .whl/,
#      with no network: the wheels, then the pycuda-*.tar.gz source built against $CUDA_ROOT;
#   2. runs gpublas from this checkout (PYTHONPATH) on the cuda backend and prints the device;
#   3. runs the whole test suite with GPUBLAS_BACKEND=cuda, tee'd to OUTDIR/tests.log;
#   4. runs every benchmark suite, writing OUTDIR/<suite>-<device>-<date>.json and .png (and
#      OUTDIR/<suite>.log); extra arguments go to each run, e.g. --quick;
#   5. prints a summary. Exit status: 0 when every step passed, 1 otherwise, 2 for bad usage.
set -uo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
    echo "usage: $0 OUTDIR [benchmark options, e.g. --quick]" >&2
    exit 2
fi
mkdir -p "$1" || exit 2
OUTDIR=$(cd "$1" && pwd)
shift
BENCH_ARGS=("$@")
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2

SITE=/tmp/site
export CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
export PATH="$CUDA_ROOT/bin:$PATH"
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export GPUBLAS_BACKEND=cuda
export GPUBLAS_CACHE_DIR=${GPUBLAS_CACHE_DIR:-/tmp/gpublas-cache}
PY=${PYTHON:-python3}
declare -a SUMMARY=()
FAILED=0

step() { echo; echo "=== $* ==="; }
record() {  # record NAME STATUS: one summary line; a nonzero status fails the check
    if [[ "$2" -eq 0 ]]; then SUMMARY+=("ok      $1"); else SUMMARY+=("FAILED  $1 (exit $2)"); FAILED=1; fi
}

step "installing PyCUDA from .whl/ into $SITE"
mkdir -p "$SITE"
shopt -s nullglob
wheels=(.whl/*.whl)
sources=(.whl/pycuda-*.tar.gz)
shopt -u nullglob
if "$PY" -c "import pycuda.driver" 2>/dev/null; then
    echo "pycuda already imports: $("$PY" -c 'import pycuda; print(pycuda.VERSION_TEXT)')"
    record "pycuda install (already there)" 0
elif [[ ${#sources[@]} -eq 0 ]]; then
    echo "no .whl/pycuda-*.tar.gz and pycuda does not import" >&2
    record "pycuda install (no source in .whl/)" 1
else
    rc=0
    if [[ ${#wheels[@]} -gt 0 ]]; then
        "$PY" -m pip install -q --no-index --no-deps --target "$SITE" "${wheels[@]}" || rc=$?
    fi
    if ! "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" "${sources[@]}"; then
        # the usual cause: libcuda.so outside the linker's default path; ldconfig knows where it is
        libdir=$(ldconfig -p | awk '/libcuda\.so/ {print $NF; exit}' | xargs -r dirname)
        echo "pycuda build failed; retrying with CUDADRV_LIB_DIR=${libdir:-<not found>}"
        export CUDADRV_LIB_DIR="$libdir"
        "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" "${sources[@]}" || rc=$?
    fi
    record "pycuda install" "$rc"
fi

step "device"
"$PY" - <<'EOF'
import gpublas
print("backend:", gpublas.backend())
for k, v in gpublas.device_info().items():
    print(f"  {k}: {v}")
EOF
record "gpublas on the cuda backend" $?
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUTDIR/nvidia-smi.csv"
fi

step "tests (GPUBLAS_BACKEND=cuda) -> $OUTDIR/tests.log"
if "$PY" -c "import pytest" 2>/dev/null; then
    "$PY" -m pytest -p no:cacheprovider -q -rs tests 2>&1 | tee "$OUTDIR/tests.log"
    rc=${PIPESTATUS[0]}
    record "tests: $(grep -E '(passed|failed|error)' "$OUTDIR/tests.log" | tail -n 1)" "$rc"
else
    echo "pytest does not import here (add its wheel to .whl/); tests not run" | tee "$OUTDIR/tests.log"
    record "tests (pytest missing)" 1
fi

step "benchmarks -> $OUTDIR"
suites=$("$PY" -c "import benchmarks; print(' '.join(benchmarks.SUITES))")
for suite in $suites; do
    "$PY" -m benchmarks "$suite" --no-progress --out "$OUTDIR" "${BENCH_ARGS[@]}" 2>&1 | tee "$OUTDIR/$suite.log"
    rc=${PIPESTATUS[0]}
    record "benchmark $suite" "$rc"
done

step "summary"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
echo "  files in $OUTDIR:"
find "$OUTDIR" -maxdepth 1 -type f -printf '    %f\n' | sort
exit "$FAILED"
