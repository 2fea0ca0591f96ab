#!/usr/bin/env bash
# The GPU checks of issue 17 as one command on the device machine, from the repository
# root, with bench/gpu/wheels carried (bash bench/gpu/wheelhouse.sh makes it):
#
#   bash bench/gpu/device-check.sh          # results under $OUT (default /tmp/gpu-out)
#
# A venv on top of the image's python (its CuPy) with the carried wheels (no download:
# nothing outside the machine can be reached), hpcflow from this checkout, then bench/gpu/transfer.py
# (raw worker-to-worker transfer) and bench/gpu/task_values.py (through hpcflow's
# worker code), over ucx and tcp, 1 GiB. Each stops itself within 280 s.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${OUT:-/tmp/gpu-out}"
mkdir -p "$out"
venv="${GPU_VENV:-/tmp/hpcflow-gpu-venv}"
python="${PYTHON:-python3}"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    "$python" --version
} > "$out/machine.txt" 2>&1
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install -q --no-index --no-deps --disable-pip-version-check \
        "$here"/wheels/*.whl > "$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
export UCX_WARN_UNUSED_ENV_VARS=n
rc=0
"$venv/bin/python" "$here/transfer.py" --json "$out/transfer.json" 2>"$out/transfer.err" \
    | tee "$out/transfer.txt" || rc=1
"$venv/bin/python" "$here/task_values.py" --json "$out/task_values.json" \
    --results "$out/RESULTS-gpu.md" 2>"$out/task_values.err" | tee "$out/task_values.txt" || rc=1
exit $rc
