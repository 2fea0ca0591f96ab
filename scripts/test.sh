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
# Environment Modules' modulecmd.tcl (unpacked below) runs on /usr/bin/tclsh8.6.
command -v tclsh8.6 >/dev/null || need_apt+=(tcl8.6)
dpkg -s busybox-static >/dev/null 2>&1 || need_apt+=(busybox-static)
# SquashFS images for Charliecloud.
command -v mksquashfs >/dev/null || need_apt+=(squashfs-tools)
if [ "${#need_apt[@]}" -gt 0 ]; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
# Environment Modules 5 (the Tcl modulecmd) as well as Lmod: its Debian package conflicts
# with lmod, so it is unpacked, not installed, into a private prefix (the compute nodes of
# the test cluster see it too), with its absolute paths pointed there. The tests source
# $ENVMODULES/usr/share/modules/init/bash (tests/e2e/software_images.py).
ENVMODULES=/opt/hpcflow-test/environment-modules
if [ ! -e "$ENVMODULES/.unpacked" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "test.sh: not root: Environment Modules is not unpacked into $ENVMODULES;" \
             "its tests will skip" >&2
    else
        mkdir -p "$(dirname "$ENVMODULES")"
        em_tmp=$(mktemp -d "$(dirname "$ENVMODULES")/.environment-modules.XXXXXX")
        chown _apt "$em_tmp" 2>/dev/null || true  # apt-get download drops to user _apt
        if ! (cd "$em_tmp" && apt-get download -qq environment-modules 2>/dev/null); then
            apt-get update -qq
            (cd "$em_tmp" && apt-get download -qq environment-modules)
        fi
        em_deb=$(echo "$em_tmp"/environment-modules_*.deb)
        dpkg -x "$em_deb" "$em_tmp/root"
        # One pass, so a rewritten path is not rewritten again.
        grep -rlIZ -e /usr/share/modules -e /etc/environment-modules \
            -e /usr/lib/x86_64-linux-gnu "$em_tmp/root" | xargs -0 sed -i \
            "s#\\(/usr/share/modules\\|/etc/environment-modules\\|/usr/lib/x86_64-linux-gnu\\)#$ENVMODULES\\1#g"
        find "$em_tmp/root" -type l | while read -r link; do
            target=$(readlink "$link")
            case "$target" in /*) ln -sfn "$ENVMODULES$target" "$link" ;; esac
        done
        rm -rf "$ENVMODULES"
        mv "$em_tmp/root" "$ENVMODULES"
        env -i PATH=/usr/bin:/bin bash -c '. "$1" && module --version' _ \
            "$ENVMODULES/usr/share/modules/init/bash" >/dev/null 2>&1 \
            || { echo "test.sh: the unpacked Environment Modules in $ENVMODULES does not work" >&2; exit 1; }
        dpkg-deb -f "$em_deb" Version > "$ENVMODULES/.unpacked"  # last: it marks success
        rm -rf "$em_tmp"
    fi
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

# As root with the packages installed, the SLURM tests must run, and no test may skip for
# a missing dependency: a skip fails the run unless it names hardware (tests/strict_skips.py).
if [ "$(id -u)" -eq 0 ]; then
    export HPCFLOW_REQUIRE_SLURM=1
    export HPCFLOW_NO_SKIPS=1
fi
# Lint and types first: quick, and they name the file and line.
.venv/bin/ruff check hpcflow snakemake_executor_plugin_hpcflow tests bench
.venv/bin/ruff format --check --quiet hpcflow snakemake_executor_plugin_hpcflow tests bench
.venv/bin/mypy hpcflow snakemake_executor_plugin_hpcflow

# Two passes. Most tests wait (on SLURM, on allocations, on processes), so they run on
# several workers at once (pytest-xdist, a file per worker at a time; each worker that
# reaches a SLURM test starts a test cluster of its own on its own ports). The tests
# marked `exclusive` (bound to a 1-minute walltime, loading every core, or timing the
# shared file system: docs/batch.md lists which and why) then run one at a time.
# A `-m` among the arguments replaces each pass's own.
# HPCFLOW_TEST_WORKERS sets the number of workers of the first pass. The default, 1, runs it
# in this process, one test at a time (about 37 min on 2 cores). 3 workers take about 19
# min under load, but each of three such runs had a test fail (each a real bug or a
# test's mistake, fixed but for a jobs-mode cancel race: docs/batch.md), so CI stays
# serial until 5 consecutive parallel runs pass.
workers=${HPCFLOW_TEST_WORKERS:-1}
if [ "$workers" -gt 1 ]; then
    parallel=(-n "$workers" --dist loadfile)
else
    parallel=(-p no:xdist)
fi
set +e
.venv/bin/python -m pytest -q "${parallel[@]}" -m "not exclusive" "$@"
rc_shared=$?
.venv/bin/python -m pytest -q -p no:xdist -m exclusive "$@"
rc_alone=$?
set -e
# Exit 5 means a pass collected nothing: fine for one pass (the arguments chose tests of
# the other), a failure for both.
if [ "$rc_shared" -eq 5 ] && [ "$rc_alone" -eq 5 ]; then
    echo "test.sh: pytest collected no tests; that is a failure" >&2
    exit 1
fi
for rc in "$rc_shared" "$rc_alone"; do
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
        exit "$rc"
    fi
done
exit 0
