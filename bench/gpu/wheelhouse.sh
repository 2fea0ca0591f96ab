#!/usr/bin/env bash
# Download what the GPU checks need beyond the device machine's own image (Python 3.12
# with CuPy, NumPy, click, jinja2, psutil, pyyaml, rich, msgpack, toolz, cloudpickle, ...:
# the image's package list is in the device tool's KINDS.md): Dask and distributed-ucxx
# with its UCX libraries, and pydantic for hpcflow's engine. hpcflow itself comes from the
# repository (PYTHONPATH). About 58 MB, under the device tool's 64 MiB carry limit
# together with the working tree.
#
#   bash bench/gpu/wheelhouse.sh            # -> bench/gpu/wheels/ (git-ignored)
#
# Then, on the device machine: bash bench/gpu/device-check.sh (carry bench/gpu/wheels).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$here/wheels"
pyver="${PYVER:-3.12}"
cuda="${CUDA_MAJOR:-13}"
rm -rf "$out" && mkdir -p "$out"
download() {
    "$repo/.venv/bin/python" -m pip download -q --disable-pip-version-check \
        --only-binary=:all: --python-version "$pyver" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform any -d "$out" "$@"
}
download --no-deps \
    "distributed-ucxx-cu$cuda==0.52.0" "ucxx-cu$cuda==0.52.0" "libucxx-cu$cuda==0.52.0" \
    "libucx-cu$cuda>=1.19,<1.22" "rmm-cu$cuda" "librmm-cu$cuda" rapids-logger \
    rapids-dask-dependency lazy-importer "dask==2026.7.1" "distributed==2026.7.1" \
    tornado zict tblib partd locket
# pydantic with the pydantic-core release it pins (and its small pure dependencies).
download "pydantic>=2.5,<3"
# The image has its own typing-extensions; two versions of one package stop the install.
rm -f "$out"/typing_extensions-*.whl
du -sh "$out"
