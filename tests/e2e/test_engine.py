"""Local engines: the pool (threads in the driver for commands, worker processes for
Python calls) by default, the embedded Dask cluster when asked; the same results."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import write_workflow

ROOT = Path(__file__).resolve().parents[2]

SHELL = """
name: shell
tasks:
  - name: make
    foreach: {i: {range: [0, 6]}}
    command: echo {i} > {outputs}
    outputs: ["out/part-{i}.txt"]
  - name: big
    resources: {cpus: 2}
    inputs: ["out/part-*.txt"]
    command: cat {inputs} > {outputs}
    outputs: [out/all.txt]
"""


def _run_info(root: Path) -> dict:
    (run_dir,) = sorted((root / ".hpcflow" / "runs").glob("*"))
    return json.loads((run_dir / "run.json").read_text())


@pytest.mark.parametrize(
    ("args", "engine"),
    [((), "pool"), (("--engine", "dask"), "dask"), (("--workers", "2"), "dask")],
)
def test_runs_take_the_pool_unless_asked(tmp_path, hpcflow, args, engine):
    wf = write_workflow(tmp_path, SHELL)
    result = hpcflow("run", str(wf), "-q", "--threads", "2", *args, cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert _run_info(tmp_path)["engine"] == engine
    assert (tmp_path / "out" / "all.txt").read_text().split() == [str(i) for i in range(6)]


def _python_example(tmp_path: Path) -> Path:
    folder = tmp_path / "py"
    shutil.copytree(
        ROOT / "workflows" / "python-tasks",
        folder,
        ignore=shutil.ignore_patterns("results", ".hpcflow"),
    )
    return folder / "workflow.yaml"


@pytest.mark.parametrize(("args", "engine"), [((), "pool"), (("--engine", "dask"), "dask")])
def test_python_tasks_run_on_either_engine(tmp_path, hpcflow, args, engine):
    wf = _python_example(tmp_path)
    result = hpcflow("run", str(wf), "-q", "--threads", "2", *args, cwd=wf.parent)
    assert result.returncode == 0, result.output
    assert _run_info(wf.parent)["engine"] == engine
    assert (wf.parent / "results" / "total.txt").read_text().strip() == str(
        sum(x * x for x in range(1, 11))
    )


def test_a_task_wider_than_the_slots_is_refused_before_the_run(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, SHELL)
    result = hpcflow("run", str(wf), "-q", "--threads", "1", cwd=tmp_path)
    assert result.returncode == 2, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_python_task_may_start_its_own_processes(tmp_path, hpcflow):
    """Workers are not daemonic: a task's own multiprocessing.Pool works, as on Dask
    (where hpcflow sets ``distributed.worker.daemon: False``)."""
    (tmp_path / "poolmod.py").write_text(
        "import multiprocessing as mp\n\n"
        "def pool_sum(n):\n"
        "    with mp.Pool(2) as p:\n"
        "        return sum(p.map(abs, range(n)))\n"
    )
    wf = write_workflow(
        tmp_path, "name: mp\ntasks:\n  - name: uses_pool\n    python: poolmod:pool_sum\n"
        "    params: {n: 10}\n"
    )  # fmt: skip
    result = hpcflow("run", str(wf), "-q", cwd=tmp_path)
    assert result.returncode == 0, result.output
    assert _run_info(tmp_path)["engine"] == "pool"
    (result_file,) = (tmp_path / ".hpcflow" / "runs").glob("*/tasks/*/1.result.json")
    assert json.loads(result_file.read_text()) == 45
