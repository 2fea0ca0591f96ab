#!/usr/bin/env bash
# Install everything the tests need (Debian packages, the venv, the local SLURM test cluster's
# dependencies) and run the whole suite. Usage (fresh Debian, as root): bash scripts/test.sh
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
need_apt=()
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv python3-pip)
command -v gcc >/dev/null || need_apt+=(gcc)
# A real headless browser renders `hpcflow report` pages in the tests.
command -v chromium >/dev/null || need_apt+=(chromium)
# Tasks' software environments: a real container runtime, Lmod, and busybox to build the
# test images from.
command -v ch-run >/dev/null || need_apt+=(charliecloud-runtime)
# Podman with runc (crun refuses this machine's mixed cgroup v1/v2 mounts).
command -v podman >/dev/null || need_apt+=(podman)
command -v runc >/dev/null || need_apt+=(runc)
[ -r /usr/share/lmod/lmod/init/bash ] || need_apt+=(lmod)
dpkg -s busybox-static >/dev/null 2>&1 || need_apt+=(busybox-static)
# SquashFS images for Charliecloud.
command -v mksquashfs >/dev/null || need_apt+=(squashfs-tools)
if [ "${#need_apt[@]}" -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
# SLURM, munge, the PBS front ends and Open MPI for the integration tests.
bash slurm/install-deps.sh --accounting

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[dev]"
# UCX (distributed-ucxx) pins its own dask/distributed release, so the UCX tests' ranks
# run from a second venv. distributed-ucxx-cu12 goes in first: installed together with
# a newer distributed, pip backtracks to a broken stub release.
if ! .venv-ucx/bin/python -c 'import distributed_ucxx, hpcflow' 2>/dev/null; then
    [ -x .venv-ucx/bin/python ] || python3 -m venv .venv-ucx
    .venv-ucx/bin/python -m pip install -q "distributed-ucxx-cu12"
    .venv-ucx/bin/python -m pip install -q -e . "mpi4py>=3.1"
fi

# As root with the packages installed, the SLURM tests must run, never skip.
if [ "$(id -u)" -eq 0 ]; then
    export HPCFLOW_REQUIRE_SLURM=1
fi
# Lint and types first: quick, and they name the file and line.
.venv/bin/ruff check hpcflow snakemake_executor_plugin_hpcflow tests bench
.venv/bin/ruff format --check --quiet hpcflow snakemake_executor_plugin_hpcflow tests bench
.venv/bin/mypy hpcflow snakemake_executor_plugin_hpcflow

set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "test.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
exit "$rc"
