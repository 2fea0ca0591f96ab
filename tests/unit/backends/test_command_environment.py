"""What a batch command starts is no task of the process that runs it: the task mark
(``MARK_VAR``) of the submitting process, say a run started inside another run's task,
must not reach the job, or ending that process's tasks (or an earlier run's leftovers,
found by their mark) would end the job's processes too."""

from __future__ import annotations

import sys

from hpcflow.backends._commands import CommandRunner
from hpcflow.store.process import MARK_VAR

PRINT_ENV = [sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"]


def test_a_batch_command_does_not_carry_the_submitters_task_mark(monkeypatch, tmp_path):
    import json

    monkeypatch.setenv(MARK_VAR, "outer-token")
    monkeypatch.setenv("HPCFLOW_SOMETHING_ELSE", "kept")
    runner = CommandRunner({"SLURM_CONF": "/etc/slurm/x.conf"})
    seen = json.loads(runner.run(PRINT_ENV).stdout)
    assert MARK_VAR not in seen
    assert seen["HPCFLOW_SOMETHING_ELSE"] == "kept" and seen["SLURM_CONF"] == "/etc/slurm/x.conf"

    out = tmp_path / "out.json"
    proc = runner.spawn(PRINT_ENV, stdout=out, stderr=tmp_path / "err")
    proc.wait(timeout=60)
    spawned = json.loads(out.read_text())
    assert MARK_VAR not in spawned and spawned["HPCFLOW_SOMETHING_ELSE"] == "kept"
