"""Snakemake's DAG in the run's record: each job's row has the rows of the jobs it depends
on as deps, so ``hpcflow report`` draws the rules' edges."""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest

# Missing, it fails these tests (never a skip), naming the package.
importlib.import_module("snakemake_interface_executor_plugins")

from hpcflow.report.data import collect  # noqa: E402
from hpcflow.report.html import render  # noqa: E402
from hpcflow.store.paths import RunPaths  # noqa: E402
from hpcflow.store.statedb import StateDB  # noqa: E402
from snakemake_executor_plugin_hpcflow.executor import dag_links  # noqa: E402
from snakemake_executor_plugin_hpcflow.record import create_run_dir  # noqa: E402
from snakemake_executor_plugin_hpcflow.translate import JobRequest, task_for_job  # noqa: E402
from tests.snakemake.helpers import run_dirs, write_snakefile  # noqa: E402

#: Three rules: `generate` (3 jobs), `count` (one per generated file, all three in one
#: group job) and `reduce`.
SNAKEFILE = """
N = range(3)

rule all:
    input: "out/total.txt"

rule generate:
    output: "gen/{i}.txt"
    shell: "echo {wildcards.i} > {output}"

rule count:
    input: "gen/{i}.txt"
    output: "cnt/{i}.txt"
    group: "tally"
    shell: "wc -c < {input} > {output}"

rule reduce:
    input: expand("cnt/{i}.txt", i=N)
    output: "out/total.txt"
    shell: "cat {input} > {output}"
"""


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))


class FakeJob:
    """A Snakemake job as far as :func:`dag_links` reads one."""

    def __init__(self, jobid: int) -> None:
        self.jobid = jobid

    def is_group(self) -> bool:
        return False


class FakeGroup:
    def __init__(self, *jobs: FakeJob) -> None:
        self.jobs = set(jobs)
        self.jobid = "a-uuid"

    def is_group(self) -> bool:
        return True


def test_a_jobs_links_are_its_ids_and_its_upstream_jobs_outside_it():
    a, b, c, d = (FakeJob(i) for i in (1, 2, 3, 4))
    deps: defaultdict[FakeJob, dict[FakeJob, set[str]]] = defaultdict(dict)
    deps[b] = {a: {"a.txt"}}
    deps[c] = {b: {"b.txt"}, d: {"d.txt"}}
    workflow = SimpleNamespace(dag=SimpleNamespace(dependencies=deps))
    assert dag_links(workflow, a) == ((1,), ())
    assert dag_links(workflow, c) == ((3,), (2, 4))
    assert a not in deps  # read with .get: the defaultdict is not added to
    # A group of b and c: the edge b -> c is inside it.
    own, upstream = dag_links(workflow, FakeGroup(b, c))
    assert sorted(own) == [2, 3] and upstream == (1, 4)
    # No DAG of the shape Snakemake 9 has: no upstream jobs, the job still runs.
    assert dag_links(SimpleNamespace(), c) == ((3,), ())


def test_deps_are_the_rows_of_upstream_jobs_that_ran(tmp_path: Path):
    _, paths, record = create_run_dir(tmp_path, "local", "Snakefile", "local")

    def task(name: str, i: int):
        return task_for_job(JobRequest(name=name, jobid=i, wildcards=(("i", str(i)),)))

    first = record.started(task("generate", 1), (1,), ())
    group = record.started(
        task_for_job(JobRequest(name="tally", jobid="g", is_group=True)), (2, 3), (1, 7)
    )
    # Job 7 never ran (up to date): no row, no edge. A retry keeps the row's deps.
    last = record.started(task("reduce", 4), (4,), (2, 3, 7))
    assert record.started(task_for_job(JobRequest("reduce", 4, (("i", "4"),), attempt=2))) == last
    record.flush()
    with StateDB(paths.state_db, readonly=True) as db:
        deps = {row.idx: row.deps for row in db.tasks()}
    assert deps == {first: [], group: [first], last: [group]}


@pytest.mark.slow
def test_a_plugin_run_records_the_dag_and_its_report_draws_it(tmp_path: Path, snakemake, hpcflow):
    workdir = tmp_path / "wf"
    write_snakefile(workdir, SNAKEFILE)
    args = (
        "--executor", "hpcflow", "--hpcflow-local-groups", "--jobs", "4",
        "--group-components", "tally=3",
    )  # fmt: skip
    result = snakemake(*args, cwd=workdir)
    assert result.returncode == 0, result.output
    (run_dir,) = run_dirs(workdir)
    with StateDB(run_dir / "state.sqlite", readonly=True) as db:
        rows = db.tasks()
    by_name: dict[str, list] = defaultdict(list)
    for row in rows:
        by_name[row.name].append(row)
    (group_name,) = [name for name in by_name if name.startswith("group:")]
    assert sorted(by_name) == sorted(["generate", group_name, "reduce"])
    generated = {row.idx for row in by_name["generate"]}
    ((group,), (reduce,)) = by_name[group_name], by_name["reduce"]
    assert len(generated) == 3 and all(row.deps == [] for row in by_name["generate"])
    assert set(group.deps) == generated  # the union of its count jobs' upstream jobs
    assert reduce.deps == [group.idx]

    report = collect(RunPaths(run_dir))
    assert report.edges == {("generate", group_name), (group_name, "reduce")}
    page = render(report)
    assert page.count('class="edge"') == 2
    shown = hpcflow("report", run_dir.name, cwd=workdir)
    assert shown.returncode == 0, shown.output
    assert (run_dir / "report.html").read_text().count('class="edge"') == 2
    status = hpcflow("status", run_dir.name, cwd=workdir)
    assert status.returncode == 0 and "succeeded" in status.stdout, status.output

    # Again with only `reduce` out of date: its upstream jobs did not run, no edges.
    (workdir / "out" / "total.txt").unlink()
    again = snakemake(*args, cwd=workdir)
    assert again.returncode == 0, again.output
    (latest,) = [path for path in run_dirs(workdir) if path != run_dir]
    with StateDB(latest / "state.sqlite", readonly=True) as db:
        ((name, deps),) = [(row.name, row.deps) for row in db.tasks()]
    assert (name, deps) == ("reduce", [])
    assert collect(RunPaths(latest)).edges == set()
