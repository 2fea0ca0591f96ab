"""Fewer files on a shared file system: per-worker task logs read back per task through
`hpcflow logs` and the Python API, and tasks run in node-local scratch folders."""

from __future__ import annotations

import json

import pytest

from tests.conftest import write_workflow

LOGS = """
name: chatty
tasks:
  - name: t
    foreach: {i: {range: [0, 40]}}
    command: echo "out {i}"; echo "err {i}" >&2
  - name: quiet
    command: "true"
  - name: fails
    command: echo "about to fail"; echo "bad thing" >&2; exit 4
  - name: py
    python: chatty_mod:hello
"""

MODULE = """import sys
def hello():
    print('hi from python')
    print('py err', file=sys.stderr)
    return 1
"""


def _run_id(hpcflow, wf) -> str:
    listing = json.loads(hpcflow("runs", "--json", cwd=wf.parent).stdout)
    return listing[0]["run_id"] if isinstance(listing, list) else listing["runs"][0]["run_id"]


@pytest.mark.parametrize("engine", ["pool", "dask"])
def test_per_worker_logs_read_back_per_task(tmp_path, hpcflow, env, engine):
    wf = write_workflow(tmp_path, LOGS)
    (tmp_path / "chatty_mod.py").write_text(MODULE)
    env["HPCFLOW_TASK_LOGS"] = "per-worker"
    args = ["--engine", engine] + (["--workers", "2"] if engine == "dask" else [])
    result = hpcflow("run", "-q", str(wf), *args, cwd=tmp_path)
    assert result.returncode == 1, result.output
    (run_dir,) = (tmp_path / ".hpcflow" / "runs").iterdir()
    logs = sorted((run_dir / "logs").iterdir())
    assert 1 <= len(logs) <= 4, logs
    # No per-task log files or folders: only the python task's result.
    made = sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / "tasks").rglob("*"))
    assert made == ["tasks/py", "tasks/py/1.result.json"] or made == [], made
    run = run_dir.name
    for i in (0, 17, 39):
        out = hpcflow("logs", run, f"t[i={i}]", cwd=tmp_path)
        assert out.returncode == 0, out.output
        assert f"out {i}\n" in out.stdout and f"err {i}\n" in out.stdout
        lines = [line for line in out.stdout.splitlines() if not line.startswith("--- ")]
        assert lines == [f"out {i}", f"err {i}"]
        only = hpcflow("logs", run, f"t[i={i}]", "--stream", "stderr", cwd=tmp_path)
        assert only.stdout == f"err {i}\n"
    assert "(empty: the task printed nothing here)" in hpcflow("logs", run, "quiet").stdout
    failed = hpcflow("logs", run, "fails", cwd=tmp_path).stdout
    assert "about to fail" in failed and "bad thing" in failed
    py = hpcflow("logs", run, "py", cwd=tmp_path).stdout
    assert "hi from python" in py and "py err" in py
    many = hpcflow("logs", run, "t", cwd=tmp_path).stdout
    assert many.count("==> t[i=") == 40 and all(f"out {i}\n" in many for i in range(40))
    status = hpcflow("status", run, cwd=tmp_path)
    assert "bad thing" in status.output  # the failures' stderr excerpt

    from hpcflow.api.run import open_run

    opened = open_run(run_dir)
    assert opened.log("t[i=5]") == "out 5\n"
    assert opened.log("t[i=5]", "stderr") == "err 5\n"
    assert opened.log("quiet") == ""


SCRATCH = """
name: scratchy
tasks:
  - name: make
    foreach: {i: [1, 2]}
    scratch: true
    inputs: [data/in.txt]
    command: |
      for k in 1 2 3; do cat {inputs} > temp_$k.txt; done
      mkdir -p out; echo "{i} $(cat temp_3.txt) $PWD" > {outputs}
    outputs: ["out/{i}.txt"]
  - name: broken
    scratch: true
    command: echo partial > broken.txt; exit 2
    outputs: [broken.txt]
  - name: gather
    inputs: ["out/*.txt"]
    command: cat {inputs} > all.txt
    outputs: [all.txt]
"""


def test_scratch_tasks_run_aside_and_bring_back_their_outputs(tmp_path, hpcflow, env):
    wf = write_workflow(tmp_path, SCRATCH)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "in.txt").write_text("payload")
    local = tmp_path / "node-local"
    local.mkdir()
    env["HPCFLOW_SCRATCH_DIR"] = str(local)
    result = hpcflow("run", "-q", str(wf), cwd=tmp_path)
    assert result.returncode == 1, result.output
    lines = (tmp_path / "all.txt").read_text().splitlines()
    assert [line.split()[:2] for line in lines] == [["1", "payload"], ["2", "payload"]]
    assert all(line.split()[2].startswith(str(local)) for line in lines)
    assert not list(tmp_path.glob("temp_*")) and not (tmp_path / "broken.txt").exists()
    assert list(local.iterdir()) == []  # every scratch folder removed
    (run_dir,) = (tmp_path / ".hpcflow" / "runs").iterdir()
    quarantined = run_dir / "quarantine" / "broken" / "1" / "broken.txt"
    assert quarantined.read_text() == "partial\n"
    again = hpcflow("run", "-q", str(wf), cwd=tmp_path)
    assert "2 up to date" in again.output or "up to date" in again.output


def test_scratch_and_a_container_are_refused_with_the_line(tmp_path, hpcflow):
    wf = write_workflow(
        tmp_path,
        "name: x\ntasks:\n  - name: a\n    command: 'true'\n    container: img.sif\n"
        "    scratch: true\n",
    )
    result = hpcflow("validate", str(wf))
    assert result.returncode == 2
    assert f"{wf}:6:" in result.stderr and "scratch" in result.stderr
    assert "Traceback" not in result.output


FAILING = """
name: failing
tasks:
  - name: ok
    command: echo fine
  - name: bad
    foreach: {i: [1, 2]}
    command: echo "to stdout {i}"; echo "bad thing {i}" >&2; exit 3
"""


def _log_lines(output: str) -> dict[str, str]:
    """The `log:` line under each failed task of a failure summary, by task id."""
    found, task = {}, None
    for line in output.splitlines():
        text = line.strip()
        if text.startswith("✗ "):
            task = text.split()[1]
        elif text.startswith("log: ") and task is not None:
            found[task] = text[len("log: ") :]
    return found


def _follow(hpcflow, where: str, cwd) -> str:
    """Run the `hpcflow logs` command a `log:` line names."""
    import shlex

    words = shlex.split(where)
    assert words[:2] == ["hpcflow", "logs"], where
    result = hpcflow(*words[1:], cwd=cwd)
    assert result.returncode == 0, result.output
    return result.stdout


def test_per_worker_logs_failed_tasks_name_a_usable_log(tmp_path, hpcflow, env):
    wf = write_workflow(tmp_path, FAILING)
    env["HPCFLOW_TASK_LOGS"] = "per-worker"
    result = hpcflow("run", str(wf), cwd=tmp_path)
    assert result.returncode == 1, result.output
    (run_dir,) = (tmp_path / ".hpcflow" / "runs").iterdir()
    run = run_dir.name
    assert not list(run_dir.rglob("*.err"))
    elsewhere = tmp_path / "elsewhere"  # the run found by its id, from any folder
    elsewhere.mkdir()
    status = hpcflow("status", run, cwd=tmp_path)
    for output in (result.output, status.output):
        lines = _log_lines(output)
        assert sorted(lines) == ["bad[i=1]", "bad[i=2]"], output
        for i in (1, 2):
            where = lines[f"bad[i={i}]"]
            assert where == f"hpcflow logs {run} 'bad[i={i}]' --stream stderr", where
            assert f"in {run_dir / 'logs'}/" in output
            assert _follow(hpcflow, where, elsewhere) == f"bad thing {i}\n"
        assert f"bad thing {i}" in output  # the excerpt

    data = json.loads(hpcflow("status", run, "--json", cwd=tmp_path).stdout)
    failed = {f["id"]: f for f in data["failed"]}
    for i in (1, 2):
        entry = failed[f"bad[i={i}]"]
        assert entry["stderr"] is None
        assert entry["log_command"] == f"hpcflow logs {run} 'bad[i={i}]' --stream stderr"
        assert _follow(hpcflow, entry["log_command"], elsewhere) == f"bad thing {i}\n"
        (record,) = entry["stderr_records"]
        assert record["file"].startswith(str(run_dir / "logs"))
        with open(record["file"], "rb") as handle:
            handle.seek(record["offset"])
            assert handle.read(record["length"]) == f"bad thing {i}\n".encode()

    page = tmp_path / "report.html"
    assert hpcflow("report", run, "-o", str(page), cwd=tmp_path).returncode == 0
    html = page.read_text()
    assert f"hpcflow logs {run}" in html and "bad thing 2" in html
    assert str(run_dir / "tasks" / "bad") not in html


def test_per_task_logs_failed_tasks_name_their_err_file(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, FAILING)
    result = hpcflow("run", str(wf), cwd=tmp_path)
    assert result.returncode == 1, result.output
    (run_dir,) = (tmp_path / ".hpcflow" / "runs").iterdir()
    (err,) = (run_dir / "tasks").glob("bad.i=1-*/1.err")
    status = hpcflow("status", run_dir.name, cwd=tmp_path).output
    for output in (result.output, status):
        assert _log_lines(output)["bad[i=1]"] == str(err), output
    data = json.loads(hpcflow("status", run_dir.name, "--json", cwd=tmp_path).stdout)
    entry = {f["id"]: f for f in data["failed"]}["bad[i=1]"]
    assert set(entry) == {"id", "exit_code", "attempts", "message", "stderr"}
    assert entry["stderr"] == str(err) and err.read_text() == "bad thing 1\n"
