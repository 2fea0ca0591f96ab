"""The CLI's user-facing commands: clear errors, validate, dag, schema, status, logs, runs."""

from __future__ import annotations

import json
import time

from tests.conftest import write_workflow

GOOD = """
name: good
tasks:
  - name: a
    foreach: {x: [1, 2]}
    command: echo {x} > {outputs}; echo err{x} >&2
    outputs: ["a{x}.txt"]
  - name: b
    inputs: ["a*.txt"]
    command: cat {inputs} > b.txt
    outputs: [b.txt]
"""


def test_user_errors_are_messages_not_tracebacks(tmp_path, hpcflow):
    bad = write_workflow(tmp_path, "name: x\ntasks:\n  - name: a\n    comand: echo\n")
    for args in (["validate", str(bad)], ["run", str(bad)], ["dag", str(bad)]):
        result = hpcflow(*args)
        assert result.returncode == 2, result.output
        assert "Traceback" not in result.output
        assert f"{bad}:4:5: tasks[0].comand: unknown key 'comand'" in result.stderr
        assert "did you mean 'command'?" in result.stderr
    missing = hpcflow("run", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    cyc = write_workflow(
        tmp_path,
        "name: c\ntasks:\n  - {name: a, command: x, needs: [b]}\n"
        "  - {name: b, command: y, needs: [a]}\n",
        name="cyc.yaml",
    )
    result = hpcflow("validate", str(cyc))
    assert result.returncode == 2
    assert "dependency cycle: a → b → a" in result.stderr


def test_validate_dag_schema(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, GOOD)
    ok = hpcflow("validate", str(wf))
    assert ok.returncode == 0 and "2 task definition(s), 3 task(s)" in ok.stdout
    mermaid = hpcflow("dag", str(wf), "--format", "mermaid").stdout
    assert mermaid.startswith("flowchart TD") and 'n0["a ×2"]' in mermaid and "n0 --> n1" in mermaid
    dot = hpcflow("dag", str(wf), "--format", "dot", "--instances").stdout
    assert '"a[x=1]"' in dot and dot.count("->") == 2
    text = hpcflow("dag", str(wf)).stdout
    assert "b  ← a" in text
    schema = json.loads(hpcflow("schema").stdout)
    assert "tasks" in schema["properties"]
    assert "command" in json.dumps(schema)


def test_status_logs_runs(tmp_path, hpcflow):
    wf = write_workflow(tmp_path, GOOD)
    assert hpcflow("run", str(wf), "-q").returncode == 0
    status = json.loads(hpcflow("status", "--json").stdout)
    assert status["status"] == "succeeded"
    assert status["counts"] == {"a": {"succeeded": 2}, "b": {"succeeded": 1}}
    run_id = status["run_id"]
    human = hpcflow("status", run_id[:15]).stdout
    assert run_id in human and "succeeded" in human
    logs = hpcflow("logs", run_id, "a[x=2]")
    assert logs.returncode == 0
    assert "err2" in logs.stdout and "--- stderr" in logs.stdout
    only_err = hpcflow("logs", run_id, "a[x=1]", "--stream", "stderr").stdout
    assert only_err == "err1\n"
    both = hpcflow("logs", run_id, "a")
    assert "==> a[x=1] <==" in both.stdout and "==> a[x=2] <==" in both.stdout
    driver = hpcflow("logs", run_id).stdout
    assert "3 of 3 tasks to run" in driver
    runs = hpcflow("runs").stdout
    assert run_id in runs
    unknown = hpcflow("logs", run_id, "zzz")
    assert unknown.returncode == 2 and "no task 'zzz'" in unknown.stderr


def test_a_dry_run_writes_nothing(tmp_path, hpcflow):
    wf = tmp_path / "workflow.yaml"
    wf.write_text("name: w\ntasks:\n  - name: a\n    command: 'true'\n")
    result = hpcflow("run", str(wf), "--dry-run")
    assert result.returncode == 0, result.output
    assert "1 of 1 tasks would run" in result.stdout
    # Neither the workflow's .hpcflow/ (memo, journals) nor the user's run index.
    assert [p.name for p in tmp_path.iterdir()] == ["workflow.yaml"]
    # Nor, after a run, does it touch what that run left (memo, journals, run index).
    assert hpcflow("run", str(wf), "-q").returncode == 0

    def files() -> dict[str, tuple[int, int]]:
        return {
            str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in tmp_path.rglob("*")
            if p.is_file()
        }

    before = files()
    for args in ((), ("--force",)):
        assert hpcflow("run", str(wf), "--dry-run", *args).returncode == 0
    assert files() == before


def test_status_and_report_default_to_the_latest_run_in_this_folder(tmp_path, env, hpcflow):
    """Without RUN, status and report take the newest run of the workflows in the current
    folder (not a newer one of the same user elsewhere); where the folder has none, of
    those in its subfolders; else the user's newest run anywhere, with a warning."""
    from tests.conftest import run_cli

    dirs = {}
    for name in ("a", "b"):  # b's run is the newer one
        folder = tmp_path / name
        folder.mkdir()
        wf = folder / "workflow.yaml"
        wf.write_text(f"name: {name}\ntasks:\n  - name: t\n    command: 'true'\n")
        assert hpcflow("run", str(wf), "-q").returncode == 0
        (dirs[name],) = (folder / ".hpcflow" / "runs").iterdir()
    status = run_cli(("status", "--json"), env, tmp_path / "a")
    assert status.returncode == 0, status.output
    assert json.loads(status.stdout)["run_dir"] == str(dirs["a"].resolve())
    report = run_cli(("report",), env, tmp_path / "a")
    assert report.returncode == 0 and str(dirs["a"].resolve()) in report.output, report.output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    status = run_cli(("status", "--json"), env, elsewhere)
    assert json.loads(status.stdout)["run_dir"] == str(dirs["b"].resolve())
    # ... and says so, naming the run it took and how to choose another.
    assert f"no run of a workflow in {elsewhere.resolve()}" in status.stderr, status.stderr
    assert dirs["b"].name in status.stderr and "pass RUN" in status.stderr, status.stderr
    here = run_cli(("status", "--json"), env, tmp_path / "a")
    assert here.stderr == "", here.stderr
    # A folder with none of its own takes those of the workflows in its subfolders.
    above = run_cli(("status", "--json"), env, tmp_path)
    assert above.stderr == "" and json.loads(above.stdout)["run_dir"] == str(dirs["b"].resolve())


def test_the_latest_run_in_this_folder_includes_runs_kept_elsewhere(tmp_path, env, hpcflow):
    """A run of a workflow file in the current folder whose directory is elsewhere
    (--run-dir) is one of this folder's runs."""
    from tests.conftest import run_cli

    here, other = tmp_path / "here", tmp_path / "other"
    for folder in (here, other):
        folder.mkdir()
        (folder / "workflow.yaml").write_text("name: w\ntasks:\n  - name: t\n    command: 'true'\n")
    kept = tmp_path / "scratch" / "my-run"
    assert hpcflow("run", str(here / "workflow.yaml"), "--run-dir", str(kept), "-q").returncode == 0
    time.sleep(1.1)  # run ids start with their second
    assert hpcflow("run", str(other / "workflow.yaml"), "-q").returncode == 0
    status = run_cli(("status", "--json"), env, here)
    assert status.returncode == 0 and status.stderr == "", status.output
    assert json.loads(status.stdout)["run_dir"] == str(kept.resolve())
    logs = run_cli(("logs", "latest"), env, here)
    assert logs.returncode == 0 and json.loads(status.stdout)["run_id"] in logs.stdout


def test_a_sub_second_run_says_its_time_in_ms(tmp_path, hpcflow):
    """The summary line and the driver log's last line of a tiny run: "in 42 ms", never
    "in 0.0s", and the counts in words."""
    import re

    wf = tmp_path / "workflow.yaml"
    wf.write_text("name: w\ntasks:\n  - name: a\n    command: 'true'\n")
    for done in ("1 ran, 0 up to date", "0 ran, 1 up to date"):
        result = hpcflow("run", str(wf), cwd=tmp_path)
        assert result.returncode == 0, result.output
        line = rf"succeeded: {done}, 0 failed of 1 tasks in {ELAPSED} ·"
        assert re.search(line, result.stdout), result.stdout
    driver = hpcflow("logs", "latest", cwd=tmp_path).stdout.splitlines()
    ended = next(line for line in driver if " succeeded in " in line)
    assert re.search(rf"run \S+ succeeded in {ELAPSED}: 1 cached$", ended), ended


#: A run's time as people read it: "42 ms" under a second (a loaded machine may take
#: longer: "1.3s"), never "0.0s".
ELAPSED = r"(\d+ ms|[1-9]\d*\.\ds)"
