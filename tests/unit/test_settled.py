"""A settled workflow's resume (hpcflow.modes.settled): recorded at once, every task
cached, while the workflow and every task's outputs are as a run left them; planned in
full as soon as anything differs, deciding as before."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hpcflow.modes.settled import resume_settled
from hpcflow.store.memo import Memo, MemoEntry
from hpcflow.store.paths import StateRoot, workflow_key
from tests.conftest import run_cli, write_workflow

WF = """
name: settles
tasks:
  - name: make
    foreach: {i: {range: [0, 5]}}
    command: echo {i} > out_{i}.txt
    outputs: ["out_{i}.txt"]
  - name: total
    needs: [make]
    command: cat out_*.txt > all.txt
    outputs: [all.txt]
"""


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No profile or setting from the environment, no user profiles, not in an allocation;
    the same environment for the CLI's processes and this one."""
    for name in list(os.environ):
        if name.startswith(("HPCFLOW_", "SLURM_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "hpcflow-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def _ran(env: dict[str, str], wf: Path) -> int:
    result = run_cli(("run", str(wf), "-q"), env)
    match = re.search(r"(\d+) ran, (\d+) up to date", result.stdout)
    assert match and result.returncode == 0, result.output
    return int(match.group(1))


def _resume(wf: Path) -> tuple[object, list[str]] | None:
    return resume_settled(wf, workers=None, threads=2, engine="auto")


def _memo(wf: Path) -> Memo:
    return Memo(StateRoot.beside(wf).memo_db, workflow_key(wf))


def _tasks(run_dir: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(run_dir / "state.sqlite")
    try:
        return conn.execute("SELECT idx, id, name, slug, deps, state FROM tasks").fetchall()
    finally:
        conn.close()


def test_an_unchanged_workflow_is_recorded_as_its_settled_run_left_it(tmp_path, clean_env):
    wf = write_workflow(tmp_path, WF)
    assert _ran(clean_env, wf) == 6
    # Planned in full (a profile named in the environment), every task cached:
    result = run_cli(("run", str(wf), "-q"), {**clean_env, "HPCFLOW_PROFILE": "local"})
    assert "0 ran, 6 up to date" in result.stdout, result.output
    full = Path(result.stdout.rsplit("run dir ", 1)[1].strip())

    ended = _resume(wf)
    assert ended is not None
    summary, order = ended
    assert summary.totals == {"cached": 6} and summary.ok  # type: ignore[attr-defined]
    assert order == ["make", "total"]
    quick = summary.paths.run_dir  # type: ignore[attr-defined]
    assert _tasks(quick) == _tasks(full)  # the same tasks, ids, slugs, deps: all cached
    for name in ("plan.json", "workflow.yaml"):
        assert (quick / name).read_text() == (full / name).read_text()
    info = json.loads((quick / "run.json").read_text())
    assert {k: v for k, v in info.items() if k not in ("run_id", "pid", "started")} == {
        k: v
        for k, v in json.loads((full / "run.json").read_text()).items()
        if k not in ("run_id", "pid", "started")
    }
    assert "cached" in (quick / "driver.log").read_text()
    memo = _memo(wf)
    settled = memo.settled()
    memo.close()
    assert settled is not None and settled.run_dir == quick

    # The command line takes the same path, and never loads the workflow's models.
    probe = (
        "import runpy, sys; sys.argv = ['hpcflow', 'run', sys.argv[1], '-q']\n"
        "try:\n    runpy.run_module('hpcflow.cli.main', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    print('exit', exc.code, 'pydantic' in sys.modules, file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(wf)], env=clean_env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert "0 ran, 6 up to date" in result.stdout, result.stderr
    assert result.stderr.strip().endswith("exit 0 False"), result.stderr


def test_a_changed_output_or_workflow_is_planned_in_full(tmp_path, clean_env):
    wf = write_workflow(tmp_path, WF)
    assert _ran(clean_env, wf) == 6
    out = tmp_path / "out_3.txt"
    stat = out.stat()
    os.utime(out, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert _resume(wf) is None
    assert _ran(clean_env, wf) == 2  # make[i=3] and what needs it, as before
    assert _resume(wf) is not None

    (tmp_path / "all.txt").unlink()
    assert _resume(wf) is None
    assert _ran(clean_env, wf) == 1

    write_workflow(tmp_path, WF + "# a comment\n")  # another text: planned in full...
    assert _resume(wf) is None
    assert _ran(clean_env, wf) == 0  # ...which finds every task up to date, and settles
    assert _resume(wf) is not None

    write_workflow(tmp_path, WF.replace("echo {i}", "echo x{i}"))
    assert _resume(wf) is None
    assert _ran(clean_env, wf) == 6


def test_a_memo_written_since_or_a_removed_run_unsettles(tmp_path, clean_env):
    wf = write_workflow(tmp_path, WF)
    assert _ran(clean_env, wf) == 6
    memo = _memo(wf)
    entry = memo.load()["total"]
    memo.record([MemoEntry("total", entry.fingerprint, {}, entry.outputs, entry.run_id)])
    memo.close()  # the same entry, written again: the memo is not as the run left it
    assert _resume(wf) is None
    assert _ran(clean_env, wf) == 0
    settled = _memo(wf).settled()
    assert settled is not None
    for path in sorted(settled.run_dir.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    settled.run_dir.rmdir()
    assert _resume(wf) is None
    assert _ran(clean_env, wf) == 0


def test_settings_from_the_environment_or_a_user_profile_are_planned_in_full(
    tmp_path, clean_env, monkeypatch
):
    wf = write_workflow(tmp_path, WF)
    assert _ran(clean_env, wf) == 6
    assert _resume(wf) is not None
    monkeypatch.setenv("HPCFLOW_PROFILE", "local")
    assert _resume(wf) is None
    monkeypatch.delenv("HPCFLOW_PROFILE")
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    assert _resume(wf) is None
    monkeypatch.delenv("SLURM_JOB_ID")
    user = tmp_path / "config" / "hpcflow" / "profiles"
    user.mkdir(parents=True)
    (user / "local.yaml").write_text("backend: local\n")
    assert _resume(wf) is None


def test_a_plan_that_reads_files_never_settles(tmp_path, clean_env):
    wf = write_workflow(
        tmp_path,
        WF + "  - name: count\n    inputs: [all.txt]\n    command: wc -l < all.txt > n.txt\n"
        "    outputs: [n.txt]\n",
    )
    assert _ran(clean_env, wf) == 7
    assert _ran(clean_env, wf) == 0
    memo = _memo(wf)
    assert memo.settled() is None
    memo.close()
    assert _resume(wf) is None


def test_a_full_disk_met_by_a_settled_resume_is_a_clear_error(clean_env, tmp_path, monkeypatch):
    """The settled path makes a run directory and notes it in the memo: a full disk there
    says so and what to do (was a traceback), and the earlier run stays as it was."""
    import errno

    import hpcflow.modes.settled as settled_mod
    from hpcflow.errors import RunError

    wf = write_workflow(tmp_path, WF)
    _ran(clean_env, wf)
    before = sorted(p.name for p in StateRoot.beside(wf).runs.iterdir())

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(settled_mod, "make_run_dir", full)
        with pytest.raises(RunError, match="the disk is full") as info:
            _resume(wf)
    assert "free space" in (info.value.hint or "")
    assert sorted(p.name for p in StateRoot.beside(wf).runs.iterdir()) == before
    # The workflow's lease was released: the next run can take it.
    from hpcflow.store.lock import RunLock

    lease = RunLock(StateRoot.beside(wf).lock_file(workflow_key(wf)))
    lease.acquire({"run_id": "next"})
    lease.release()


def test_a_run_inside_another_runs_task_takes_the_settled_path(clean_env, tmp_path, monkeypatch):
    """The task mark a run started inside another run's task carries names no setting:
    such a run still records an unchanged workflow at once."""
    from hpcflow.store.process import MARK_VAR

    wf = write_workflow(tmp_path, WF)
    _ran(clean_env, wf)
    monkeypatch.setenv(MARK_VAR, "an-outer-runs-task")
    assert _resume(wf) is not None
