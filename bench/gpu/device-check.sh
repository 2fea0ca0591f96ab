#!/usr/bin/env bash
# The GPU checks of issue 17 as one command on the device machine, from the repository
# root, with bench/gpu/wheels carried (bash bench/gpu/wheelhouse.sh makes it):
#
#   bash bench/gpu/device-check.sh          # results under $OUT (default /tmp/gpu-out)
#
# The carried wheels go into a folder of their own on PYTHONPATH, on top of the image's
# python3 (its CuPy; nothing outside the machine can be reached), with hpcflow from this
# checkout. Then, over ucx and tcp, 1 GiB: bench/gpu/engine_values.py (a workflow through
# hpcflow's engine), bench/gpu/transfer.py (the raw worker-to-worker transfer) and
# bench/gpu/task_values.py (hpcflow's worker code alone). Each is stopped after 180 s.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${OUT:-/tmp/gpu-out}"
mkdir -p "$out"
site="${GPU_SITE:-/tmp/hpcflow-gpu-site}"
python="${PYTHON:-python3}"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    "$python" --version
} > "$out/machine.txt" 2>&1
if [ ! -e "$site/.installed" ]; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --disable-pip-version-check --upgrade --target "$site" "$here"/wheels/*.whl \
        > "$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
    touch "$site/.installed"
fi
export PYTHONPATH="$site:$repo"
export UCX_WARN_UNUSED_ENV_VARS=n PYTHONUNBUFFERED=1
"$python" -c 'import cupy, dask, distributed, distributed_ucxx, pydantic, hpcflow.engine.drive
print("cupy", cupy.__version__, "dask", dask.__version__, "distributed", distributed.__version__,
      "pydantic", pydantic.__version__)' 2>&1 | tee "$out/versions.txt"
rc=0
check() {  # NAME SCRIPT ARGS...
    local name="$1" script="$2"
    shift 2
    timeout 180 "$python" "$here/$script" --json "$out/$name.json" "$@" \
        2>"$out/$name.err" | tee "$out/$name.txt" || { rc=1; tail -20 "$out/$name.err"; }
}
check engine_values engine_values.py --results "$out/RESULTS-gpu.md"
check transfer transfer.py
check task_values task_values.py --results "$out/RESULTS-gpu.md"
exit $rc
