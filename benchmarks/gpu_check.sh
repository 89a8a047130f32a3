#!/usr/bin/env bash
# gpu_check.sh OUTDIR [benchmark options...]: the whole GPU check on an offline NVIDIA machine.
#
#   1. installs PyCUDA into /tmp/site from the local files in .whl/, with no network: the other
#      wheels there (pytools, mako, ...), then a prebuilt .whl/pycuda-*.whl when one imports here,
#      else the .whl/pycuda-*.tar.gz source built against $CUDA_ROOT (the wheel it builds is kept in
#      .whl/ for the next run; when the linker cannot find -lcuda it retries with the toolkit's
#      lib64/stubs and the driver's directory from ldconfig);
#   2. runs gpublas from this checkout (PYTHONPATH) on the cuda backend and prints the device, the
#      driver and nvcc;
#   3. pre-builds every kernel family (cuda_src/ and nn/cuda/, float and double) in parallel, so the
#      tests and benchmarks do not wait on nvcc;
#   4. runs the whole test suite with GPUBLAS_BACKEND=cuda, tee'd to OUTDIR/tests.log;
#   5. runs every benchmark suite, writing OUTDIR/<suite>-<device>-<date>.json and .png (and
#      OUTDIR/<suite>.log); extra arguments go to each run, e.g. --quick;
#   6. prints a summary. Exit status: 0 when every step passed, 1 otherwise, 2 for bad usage.
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

SITE=${GPUBLAS_SITE:-/tmp/site}
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
pycuda_imports() { "$PY" -c "import pycuda.driver" 2>/dev/null; }
pip_site() { "$PY" -m pip install -q --no-index --no-deps --upgrade --target "$SITE" "$@"; }
build_pycuda() {  # build_pycuda SDIST DIR: a wheel into DIR, the log in OUTDIR/pycuda-build.log
    "$PY" -m pip wheel --no-index --no-deps --no-build-isolation -w "$2" "$1" >"$OUTDIR/pycuda-build.log" 2>&1
}

step "installing PyCUDA from .whl/ into $SITE"
mkdir -p "$SITE"
shopt -s nullglob
deps=()
for w in .whl/*.whl; do [[ "$(basename "$w")" == pycuda-* ]] || deps+=("$w"); done
pycuda_wheels=(.whl/pycuda-*.whl)
sources=(.whl/pycuda-*.tar.gz)
shopt -u nullglob
if pycuda_imports; then
    how="already there"
else
    how=""
    [[ ${#deps[@]} -gt 0 ]] && pip_site "${deps[@]}"
    for w in "${pycuda_wheels[@]}"; do
        if pip_site "$w" && pycuda_imports; then how="prebuilt $(basename "$w")"; break; fi
        echo "$(basename "$w") does not import here (another Python or platform?); trying the next way"
    done
    if [[ -z "$how" && ${#sources[@]} -gt 0 ]]; then
        t0=$SECONDS
        built_dir=$(mktemp -d)
        if ! build_pycuda "${sources[0]}" "$built_dir"; then
            tail -n 5 "$OUTDIR/pycuda-build.log"
            if grep -q -- "cannot find -lcuda" "$OUTDIR/pycuda-build.log"; then
                # the linker's default path lacks libcuda.so: the toolkit's stub (link time only; the
                # driver's libcuda.so.1 is loaded at run time) and the driver's own directory
                stubs="$CUDA_ROOT/lib64/stubs"
                driver=$(ldconfig -p | awk '/libcuda\.so/ {print $NF; exit}' | xargs -r dirname)
                echo "-lcuda not found: retrying with LIBRARY_PATH=$stubs${driver:+:$driver}"
                LIBRARY_PATH="$stubs${driver:+:$driver}${LIBRARY_PATH:+:$LIBRARY_PATH}" \
                    build_pycuda "${sources[0]}" "$built_dir"
            fi
        fi
        shopt -s nullglob
        built=("$built_dir"/pycuda-*.whl)
        shopt -u nullglob
        if [[ ${#built[@]} -gt 0 ]] && pip_site "${built[0]}" && pycuda_imports; then
            cp "${built[0]}" .whl/ 2>/dev/null  # the next run installs it in seconds
            how="built from $(basename "${sources[0]}") in $((SECONDS - t0)) s, wheel kept in .whl/"
        else
            echo "building PyCUDA failed; see $OUTDIR/pycuda-build.log and README's GPU section" >&2
        fi
        rm -rf "$built_dir"
    fi
fi
if [[ -n "$how" ]]; then
    echo "pycuda $("$PY" -c 'import pycuda; print(pycuda.VERSION_TEXT)'): $how"
    record "pycuda install ($how)" 0
else
    echo "pycuda does not import and .whl/ holds no wheel that imports nor a source that builds" >&2
    record "pycuda install" 1
fi

step "device"
"$PY" - <<'EOF'
import gpublas
from gpublas.backends.cuda import nvcc
print("backend:", gpublas.backend())
for k, v in gpublas.device_info().items():
    print(f"  {k}: {v}")
import pycuda.driver as drv
v = drv.get_driver_version()
print(f"  driver CUDA: {v // 1000}.{v % 1000 // 10}; nvcc: {nvcc()[1]}")
EOF
record "gpublas on the cuda backend" $?
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUTDIR/nvidia-smi.csv"
fi

step "pre-building every kernel family into $GPUBLAS_CACHE_DIR"
"$PY" - <<'EOF'
import os, sys, time
from gpublas.launch import prebuild
from nn.kernels import KERNELS
t = time.perf_counter()
results = prebuild(roots=[None, KERNELS], workers=os.cpu_count())
failed = [r for r in results if r[2]]
print(f"{len(results) - len(failed)} of {len(results)} modules ready in {time.perf_counter() - t:.0f} s")
for family, dtype, error in failed:
    print(f"  FAILED {family} ({dtype}): {error}")
sys.exit(1 if failed else 0)
EOF
record "pre-build of every kernel family" $?

step "tests (GPUBLAS_BACKEND=cuda) -> $OUTDIR/tests.log"
if "$PY" -c "import pytest" 2>/dev/null; then
    workers=()
    "$PY" -c "import xdist" 2>/dev/null && workers=(-n 8)
    "$PY" -m pytest -p no:cacheprovider -q -rs "${workers[@]}" tests 2>&1 | tee "$OUTDIR/tests.log"
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
