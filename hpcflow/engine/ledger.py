"""The one place that records what became of attempts, for the driver and for jobs mode.

For every task whose attempts came back: the attempt rows, the task's new state (a
failure that its retry policy allows again goes back to pending), a memo entry for each
success, in one transaction of the state database and one batch of the memo; and the
pending tasks downstream of a failure, which can never run, as skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hpcflow.dag.graph import TaskGraph
from hpcflow.engine.calls_factory import CallFactory
from hpcflow.store import statedb as st
from hpcflow.store.memo import Memo, MemoEntry
from hpcflow.worker.calls import Outcome

log = logging.getLogger(__name__)


@dataclass
class OutcomeLedger:
    """Writes outcomes to a run's state database and the workflow's memo."""

    graph: TaskGraph
    factory: CallFactory
    db: st.StateDB
    memo: Memo
    run_id: str

    def state_after(self, final: Outcome) -> st.TaskState:
        """The task's state after its latest attempt ``final``: pending again when it
        failed and its retry policy allows another attempt."""
        if final.state == st.SUCCEEDED:
            return st.SUCCEEDED
        inst = self.graph.instances[final.index]
        self.factory.forget(inst)
        if final.state == st.CANCELLED:
            return st.CANCELLED
        if final.state == st.INTERRUPTED:
            return st.PENDING  # its checkpoint is saved: a continuation goes on from it
        policy = self.graph.template(inst).retries
        return st.PENDING if policy.allows_another(final.attempt) else st.FAILED

    def record(self, attempts: Iterable[tuple[int, Sequence[Outcome]]]) -> dict[int, st.TaskState]:
        """Store each task's attempts (its latest last) and return its new state."""
        records: list[st.AttemptRecord] = []
        new_states: dict[int, st.TaskState] = {}
        memo: list[MemoEntry] = []
        for index, outcomes in attempts:
            records.extend(out.record(index) for out in outcomes)
            final = outcomes[-1]
            state = self.state_after(final)
            if state == st.SUCCEEDED:
                inst = self.graph.instances[index]
                memo.append(
                    MemoEntry(
                        inst.id,
                        self.factory.fingerprint(inst),
                        final.inputs_sig,
                        final.outputs_sig,
                        self.run_id,
                    )
                )
            new_states[index] = state
        self.db.record_attempts(records, new_states)
        if memo:
            self.memo.record(memo)
        return new_states

    def skip_downstream(
        self,
        dependents: Sequence[Sequence[int]],
        ended: Iterable[int],
        open_state: Callable[[int], bool],
    ) -> list[int]:
        """Mark skipped every task downstream of ``ended`` (failed or cancelled) that
        ``open_state`` says has not ended yet; return them."""
        skipped = downstream(dependents, ended, open_state)
        if skipped:
            self.db.set_states(
                ((i, st.SKIPPED) for i in skipped), message="an upstream task failed"
            )
            log.info("%d task(s) skipped: an upstream task failed", len(skipped))
        return skipped


def downstream(
    dependents: Sequence[Sequence[int]], ended: Iterable[int], open_state: Callable[[int], bool]
) -> list[int]:
    """Every task downstream of ``ended`` for which ``open_state`` holds, each once, the
    walk stopping at tasks that have already ended."""
    out: list[int] = []
    seen: set[int] = set()
    stack = [child for i in ended for child in dependents[i]]
    while stack:
        child = stack.pop()
        if child in seen or not open_state(child):
            continue
        seen.add(child)
        out.append(child)
        stack.extend(dependents[child])
    return out
