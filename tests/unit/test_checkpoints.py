"""The checkpoint signal on a worker (hpcflow/worker/checkpoints.py): a running task that
asked for one gets it; stopped by it, its attempt is interrupted (not failed); one that
finishes its work all the same succeeded; the ledger leaves an interrupted task pending
without spending a retry."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from hpcflow.store.states import TaskState
from hpcflow.worker.checkpoints import signal_attempts
from hpcflow.worker.execute import run_call
from tests.conftest import task_call

TRAP = (
    "trap 'echo saved > ckpt; exit {code}' USR1; touch started; "
    "for i in $(seq 300); do sleep 0.1; done"
)


@pytest.mark.parametrize("code", [3, 0])
def test_a_signalled_task_is_interrupted_unless_it_succeeds(tmp_path, code):
    call = task_call(
        tmp_path, 7, TRAP.format(code=code), checkpoint_signal=int(signal.SIGUSR1),
        checkpoint_before=60.0,
    )  # fmt: skip
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("out", run_call(call)))
    thread.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert signal_attempts([(7, 1), (99, 1)], int(signal.SIGUSR1)) == [(7, 1)]
    thread.join(30)
    outcome = result["out"]
    assert (tmp_path / "ckpt").read_text() == "saved\n"
    if code:
        assert outcome.state == TaskState.INTERRUPTED, outcome
        assert outcome.message == "interrupted by SIGUSR1 before the walltime (exit 3)"
    else:
        assert outcome.state == TaskState.SUCCEEDED, outcome


def test_nothing_is_signalled_that_does_not_run_here():
    assert signal_attempts([(1, 1)], int(signal.SIGUSR1)) == []


def test_an_interrupted_attempt_leaves_its_task_pending_without_a_retry(tmp_path):
    from hpcflow.engine.ledger import OutcomeLedger
    from hpcflow.engine.prepare import RunOptions, prepare
    from hpcflow.worker.calls import Outcome
    from tests.conftest import write_workflow

    wf = write_workflow(
        tmp_path,
        "name: c\ntasks:\n  - name: t\n    command: 'true'\n"
        "    checkpoint: {signal: USR2, before: 2m}\n",
    )
    prepared = prepare(wf, RunOptions(), take_lock=False)
    template = prepared.graph.templates[0]
    assert template.checkpoint is not None
    assert (template.checkpoint.signal, template.checkpoint.before) == ("SIGUSR2", 120.0)
    ledger = OutcomeLedger(prepared.graph, prepared.factory, None, prepared.memo, "r")  # type: ignore[arg-type]
    out = Outcome(
        index=0, attempt=1, state=TaskState.INTERRUPTED, exit_code=3, started=0.0, ended=1.0
    )
    # No retries allowed (the default): an interrupted attempt still is not a failure.
    assert ledger.state_after(out) == TaskState.PENDING
    prepared.memo.close()
