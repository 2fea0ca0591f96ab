#!/usr/bin/env bash
# Create bench/.venv-peers with the peer tools used by bench/run.py (and matplotlib,
# which bench/plot.py draws the report's PNG with). HyperQueue comes as its Python API
# (the wheel has the server and worker compiled in, but no `hq` command).
# Idempotent: re-running only installs what is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-peers"
py="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    echo "bench/setup.sh: creating $venv"
    "$py" -m venv "$venv"
fi

"$venv/bin/python" -c "import snakemake_executor_plugin_slurm" 2>/dev/null || "$venv/bin/python" -m pip install -qq --disable-pip-version-check "snakemake-executor-plugin-slurm>=2,<3"  # bench/snakemake_plugin.py
# Already complete? Then do nothing (no network needed).
if "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as md
v = md.version("snakemake")
assert v.split(".")[0] == "9", v
assert md.version("hyperqueue").startswith("0.27."), md.version("hyperqueue")
for pkg in ("parsl", "psutil", "matplotlib"):
    md.version(pkg)
PY
then
    echo "bench/setup.sh: peers already installed in $venv"
    exit 0
fi

echo "bench/setup.sh: installing snakemake 9.x, parsl, hyperqueue 0.27, psutil, matplotlib into $venv (quiet)"
"$venv/bin/python" -m pip install -qq --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install -qq --disable-pip-version-check \
    "snakemake>=9,<10" parsl "hyperqueue>=0.27,<0.28" psutil matplotlib
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
print("bench/setup.sh: done:", ", ".join(
    f"{p} {md.version(p)}"
    for p in ("snakemake", "parsl", "hyperqueue", "psutil", "matplotlib")))
PY
