#!/usr/bin/env bash
# Install hpcflow into ./.venv and run the hello workflow on the embedded local cluster.
# Usage (fresh Debian, as root or a user with python3-venv): bash scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-pip >/dev/null
    else
        echo "quickstart: python3-venv is missing; install it (apt-get install python3-venv)" >&2
        exit 1
    fi
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e .
.venv/bin/hpcflow run workflows/hello/workflow.yaml
