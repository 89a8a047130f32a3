#!/usr/bin/env bash
# gpu_prepare.sh [--quick]: readies this checkout for a lent GPU machine, on a machine without one.
#
#   1. copies the PyCUDA wheel and its pure-Python needs from ../shared/gpu/wheels/ (or $GPU_WHEELS)
#      into .whl/ (ignored by git; name it in the device tool's `carry`);
#   2. records, on the simulator, every kernel module that stage 1's and stage 2's tests and benchmarks
#      load (GPUBLAS_RECORD_MODULES, gpublas/runtime/cubins.py), into .cubins/record.jsonl;
#   3. compiles those modules, and every family for float32 and float64, with nvcc for sm_90a (or
#      $GPU_ARCH) into .cubins/ (ignored; carry it too), which gpu_check.sh hands the cuda backend as
#      GPUBLAS_CUBIN_DIR.
# --quick skips the recording (the families alone). Then: gpu_check.sh --stage 1 OUT on the GPU.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
PY=${PYTHON:-python3}
WHEELS=${GPU_WHEELS:-$REPO/../shared/gpu/wheels}
mkdir -p .whl .cubins
cp "$WHEELS"/*.whl .whl/
echo "wheels: $(ls .whl | tr '\n' ' ')"
records=()
if [[ "${1:-}" != "--quick" ]]; then
    rec=.cubins/record.jsonl
    rm -f "$rec"
    export GPUBLAS_RECORD_MODULES="$REPO/$rec" GPUBLAS_BACKEND=sim
    source <(sed -n '/^STAGE1_TESTS=(/,/)$/p' benchmarks/gpu_check.sh)
    "$PY" -m pytest -q -n 2 -p no:cacheprovider "${STAGE1_TESTS[@]}" >.cubins/record-tests.log 2>&1 || \
        echo "some stage 1 tests failed on the sim (see .cubins/record-tests.log); recording goes on"
    for suite in gemm train attention gpt2 sort launch transfer; do
        "$PY" -m benchmarks "$suite" --quick --repeats 1 --no-progress $([[ $suite == train || $suite == gpt2 ]] && echo --graph) \
            >.cubins/record-$suite.log 2>&1 || echo "benchmark $suite failed on the sim"
    done
    unset GPUBLAS_RECORD_MODULES
    records=("$rec")
fi
# what stages 1 and 2 load first, then every family (for stage 3), so an interrupted build still helps
[[ ${#records[@]} -gt 0 ]] && GPUBLAS_BACKEND=sim "$PY" -m benchmarks.build_cubins --arch "${GPU_ARCH:-sm_90a}" --out .cubins "${records[@]}"
GPUBLAS_BACKEND=sim "$PY" -m benchmarks.build_cubins --arch "${GPU_ARCH:-sm_90a}" --out .cubins --families
du -sh .cubins .whl
