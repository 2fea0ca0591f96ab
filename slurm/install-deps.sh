#!/usr/bin/env bash
# Install the Debian packages needed to run the private local SLURM test
# cluster (see slurm/start-cluster.sh). Idempotent: when every package is
# already installed this is a fast no-op (only `dpkg -s` is run).
#
# Usage: sudo bash slurm/install-deps.sh [--accounting]
#
# --accounting (or WITH_ACCOUNTING=1): also install slurmdbd and
# mariadb-server, needed by `start-cluster.sh --accounting` (sacct).
set -euo pipefail

# glusterfs-*: the shared file system the test cluster's nodes and the submit side mount.
PACKAGES=(slurm-wlm munge slurm-wlm-torque openmpi-bin libopenmpi-dev
    glusterfs-server glusterfs-client iproute2)
ACCOUNTING="${WITH_ACCOUNTING:-0}"

for arg in "$@"; do
    case "$arg" in
        --accounting) ACCOUNTING=1 ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-deps: unknown argument: $arg" >&2; exit 2 ;;
    esac
done
if [ "$ACCOUNTING" = "1" ]; then
    PACKAGES+=(slurmdbd mariadb-server)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-deps: all packages already installed (${PACKAGES[*]})"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: must run as root (sudo bash $0)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]}"
apt-get update -qq
# Do not start any service the packages ship (no systemd here anyway, and the
# test cluster runs its own private daemons).
policy_rc=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy_rc" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy_rc"
    chmod 755 "$policy_rc"
    created_policy=1
fi
cleanup() { if [ "$created_policy" -eq 1 ]; then rm -f "$policy_rc"; fi; }
trap cleanup EXIT
apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}" > /dev/null
echo "install-deps: done"
