"""The example workflows run end to end through the real CLI, and re-runs resume."""

from __future__ import annotations

import json


def test_hello(example, hpcflow):
    wf = example("hello")
    result = hpcflow("run", str(wf))
    assert result.returncode == 0, result.output
    results = wf.parent / "results"
    assert (results / "all-greetings.txt").read_text().splitlines() == [
        "Hello, Ada!",
        "Hello, Grace!",
        "Hello, Linus!",
    ]
    assert (results / "count.txt").read_text().strip() == "3"
    assert "succeeded: 5 ran, 0 up to date" in result.stdout

    again = hpcflow("run", str(wf))
    assert again.returncode == 0, again.output
    assert "0 ran, 5 up to date" in again.stdout


def test_sweep_reduce_reads_every_instance(example, hpcflow):
    wf = example("sweep")
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 0, result.output
    summary = (wf.parent / "results" / "summary.txt").read_text()
    assert summary.startswith("estimates=120 ")
    mean = float(summary.split("mean=")[1])
    assert 3.0 < mean < 3.3
    assert "121 ran" in result.stdout


def test_python_tasks_record_json_results(example, hpcflow):
    wf = example("python-tasks")
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 0, result.output
    assert (wf.parent / "results" / "total.txt").read_text().strip() == str(
        sum(x * x for x in range(1, 11))
    )
    status = hpcflow("status", "--json")
    data = json.loads(status.stdout)
    run_dir = data["run_dir"]
    from pathlib import Path

    total = json.loads((Path(run_dir) / "tasks" / "total" / "1.result.json").read_text())
    assert total == 385
    square = next((Path(run_dir) / "tasks").glob("square.x=3-*"))
    assert json.loads((square / "1.result.json").read_text()) == {"x": 3, "square": 9}
    assert (square / "1.out").read_text() == "squared 3\n"


def test_arrays_pass_between_tasks(example, hpcflow):
    import numpy as np

    wf = example("arrays")
    result = hpcflow("run", str(wf), "-q", cwd=wf.parent)
    assert result.returncode == 0, result.output
    shown = hpcflow("result", "latest", "summary", cwd=wf.parent)
    assert shown.returncode == 0, shown.output
    summary = json.loads(shown.stdout)
    raw = [np.random.default_rng(s).standard_normal((8192, 1024)) for s in (1, 2, 3, 4)]
    assert summary["seeds"] == [1, 2, 3, 4]
    assert summary["raw_means"] == [round(float(a.mean()), 6) for a in raw]
    assert len(summary["smoothed_std"]) == 4
    dag = hpcflow("dag", str(wf))
    assert "smooth ×4  ← simulate (trace)" in dag.stdout, dag.stdout


def test_containers_each_step_in_its_own_image(example, hpcflow):
    import shutil
    import subprocess

    import pytest

    from tests.slurm_cluster import slurm_required

    if shutil.which("ch-run") is None and not slurm_required():
        pytest.skip("needs charliecloud-runtime (scripts/test.sh installs it)")
    wf = example("containers")
    subprocess.run(["bash", "make-images.sh"], cwd=wf.parent, check=True, capture_output=True)
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 0, result.output
    assert (wf.parent / "report.txt").read_text().splitlines() == [
        "alpha has 5 letters (count-image)",
        "beta has 4 letters (count-image)",
        "gamma has 5 letters (count-image)",
        "report made in report-image",
    ]
    again = hpcflow("run", str(wf), "-q")
    assert again.returncode == 0 and "0 ran, 4 up to date" in again.stdout, again.output


READS_SUMMARY = (
    "sample\ttissue\tchunks\treads\tgc_percent\n"
    "kidney\tkidney\t3\t10\t51.88\n"
    "liver\tliver\t4\t14\t48.89\n"
)


def test_reads_sample_sheet_fan_out_and_includes(example, hpcflow):
    """The realistic example: a sample sheet (the 'empty' sample left out), chunks known
    only when split ends, and a QC sub-workflow included for raw and trimmed reads."""
    wf = example("reads")
    dag = hpcflow("dag", str(wf)).stdout
    assert "qc_trimmed.stats ×2  ← trim" in dag
    assert "gc (not planned yet: its instances are known when split ends)  ← split" in dag
    result = hpcflow("run", str(wf), "-q")
    assert result.returncode == 0, result.output
    assert "20 ran, 0 up to date" in result.stdout
    assert (wf.parent / "summary.tsv").read_text() == READS_SUMMARY
    raw = [json.loads(line) for line in (wf.parent / "qc" / "raw.jsonl").read_text().splitlines()]
    assert [r["reads"] for r in raw] == [10, 14]
    status = json.loads(hpcflow("status", "--json", cwd=wf.parent).stdout)
    assert status["counts"]["gc"] == {"succeeded": 7}
    assert status["counts"]["qc_raw.stats"] == {"succeeded": 2}
    again = hpcflow("run", str(wf), "-q")
    assert "0 ran, 20 up to date" in again.stdout
