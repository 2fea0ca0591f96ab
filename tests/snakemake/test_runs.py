"""A Snakemake run is an hpcflow run: `hpcflow runs` lists it, `hpcflow status` shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.snakemake.helpers import run_dirs, write_snakefile

pytestmark = pytest.mark.slow

#: Two rules, three jobs; `bad` fails.
SNAKEFILE = """
rule all:
    input: "out/a.txt", "out/b.txt", "out/bad.txt"

rule good:
    output: "out/{name}.txt"
    wildcard_constraints: name="a|b"
    shell: "echo {wildcards.name} > {output}"

rule bad:
    output: "out/bad.txt"
    shell: "echo bad failed >&2; exit 4"
"""


def test_a_snakemake_run_is_listed_and_shown_like_any_run(tmp_path: Path, snakemake, hpcflow):
    workdir = tmp_path / "wf"
    write_snakefile(workdir, SNAKEFILE)
    result = snakemake("--executor", "hpcflow", "--jobs", "3", "--keep-going", cwd=workdir)
    assert result.returncode != 0
    (run_dir,) = run_dirs(workdir)

    listed = hpcflow("runs")
    assert listed.returncode == 0, listed.output
    (line,) = [line for line in listed.stdout.splitlines() if run_dir.name in line]
    assert "failed" in line and "Snakefile (snakemake)" in line, listed.stdout

    shown = hpcflow("status", run_dir.name, "--json")
    assert shown.returncode == 0, shown.output
    snap = json.loads(shown.stdout)
    assert snap["status"] == "failed"
    assert snap["engine"] == "snakemake"
    assert snap["workflow"] == str(workdir / "Snakefile")
    assert snap["counts"] == {"good": {"succeeded": 2}, "bad": {"failed": 1}}
    (bad,) = snap["failed"]
    assert bad["id"].startswith("bad#")
    # The job's process is Snakemake's own `python -m snakemake`: it exits 1 whatever
    # the rule's command exited with.
    assert bad["exit_code"] not in (0, None)
    assert "bad failed" in Path(bad["stderr"]).read_text()

    latest = hpcflow("status")  # no argument: the latest run
    assert latest.returncode == 0, latest.output
    assert run_dir.name in latest.stdout and "failed" in latest.stdout
    assert "engine   snakemake (local mode)" in latest.stdout
    assert "bad" in latest.stdout and "good" in latest.stdout

    logs = hpcflow("logs", run_dir.name, "bad")
    assert "bad failed" in logs.output, logs.output
