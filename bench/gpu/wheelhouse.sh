#!/usr/bin/env bash
# Download what the GPU check needs beyond the device machine's own image (which has
# Python 3.12, CuPy, NumPy): Dask and distributed-ucxx with its UCX libraries, and the
# small pure dependencies the image may or may not have (toolz, msgpack, ...). hpcflow itself
# comes from the repository (PYTHONPATH; the worker code the check runs needs no more).
# About 58 MB, under the device tool's 64 MiB carry limit.
#
#   bash bench/gpu/wheelhouse.sh            # -> bench/gpu/wheels/ (git-ignored)
#   PYVER=3.11 bash bench/gpu/wheelhouse.sh # wheels for this machine (to try the flow)
#
# Then, on the device machine: bash bench/gpu/device-check.sh (carry bench/gpu/wheels).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$here/wheels"
pyver="${PYVER:-3.12}"
cuda="${CUDA_MAJOR:-13}"
rm -rf "$out" && mkdir -p "$out"
"$repo/.venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
    --only-binary=:all: --python-version "$pyver" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$out" \
    "distributed-ucxx-cu$cuda==0.52.0" "ucxx-cu$cuda==0.52.0" "libucxx-cu$cuda==0.52.0" \
    "libucx-cu$cuda>=1.19,<1.22" "rmm-cu$cuda" "librmm-cu$cuda" rapids-logger \
    rapids-dask-dependency lazy-importer "dask==2026.7.1" "distributed==2026.7.1" \
    tornado zict tblib partd locket sortedcontainers \
    toolz cloudpickle msgpack psutil pyyaml jinja2 markupsafe click fsspec packaging \
    importlib-metadata zipp urllib3
du -sh "$out"
