"""Which tasks a run must execute, given what earlier runs recorded in the memo."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from hpcflow.dag.graph import TaskGraph
from hpcflow.engine.calls_factory import CallFactory
from hpcflow.store.memo import MemoEntry
from hpcflow.worker.execute import file_signatures

#: Why an up-to-date producer runs again (``from:``): its value is gone.
VALUE_NOT_KEPT = "a task that runs receives its value, which is not kept"


@dataclass(frozen=True)
class ResumeDecision:
    """``run[i]`` says whether instance ``i`` must run; ``reasons[i]`` says why (or why not)."""

    run: list[bool]
    reasons: list[str]

    @property
    def to_run(self) -> int:
        return sum(self.run)


def decide(
    graph: TaskGraph,
    memo: dict[str, MemoEntry],
    factory: CallFactory,
    *,
    force: bool = False,
    rerun: tuple[str, ...] = (),
    value_kept: Callable[[int, MemoEntry], bool] | None = None,
) -> ResumeDecision:
    """Run a task when forced, matched by ``rerun``, downstream of a task that runs, or when
    its memo entry is missing or stale (command, inputs or outputs changed).

    A task that does not run but whose return value a running task receives (``from:``)
    runs too when ``value_kept`` says its value is gone, and so does all below it.
    """
    again: set[int] = set()
    while True:
        decision = _decide(graph, memo, factory, force, rerun, again)
        if value_kept is None:
            return decision
        lost = {
            p
            for inst in graph.instances
            if inst.values and decision.run[inst.index]
            for arg in inst.values.values()
            for p in arg.producers
            if not decision.run[p] and not value_kept(p, memo[graph.instances[p].id])
        }
        if not lost:
            return decision
        again |= lost


def _decide(
    graph: TaskGraph,
    memo: dict[str, MemoEntry],
    factory: CallFactory,
    force: bool,
    rerun: tuple[str, ...],
    again: set[int],
) -> ResumeDecision:
    n = len(graph.instances)
    run = [False] * n
    reasons = [""] * n
    instances = graph.instances
    up_to_date: dict[str, str] = {}
    for i in graph.order:
        inst = instances[i]
        if force:
            run[i], reasons[i] = True, "forced"
            continue
        if rerun:
            name = graph.template(inst).spec.name
            if any(_matches(inst.id, name, p) for p in rerun):
                run[i], reasons[i] = True, "matched --rerun"
                continue
        upstream = next((d for d in inst.deps if run[d]), None) if inst.deps else None
        if upstream is not None:
            run[i], reasons[i] = True, f"upstream {instances[upstream].id} runs"
            continue
        entry = memo.get(inst.id)
        if entry is None:
            run[i], reasons[i] = True, "never succeeded"
            continue
        if entry.fingerprint != factory.fingerprint(inst):
            run[i], reasons[i] = True, "command or parameters changed"
            continue
        inputs = file_signatures(inst.inputs)[0] if inst.inputs else {}
        if inputs != entry.inputs:
            run[i], reasons[i] = True, "inputs changed"
            continue
        outputs, missing = file_signatures(inst.outputs)
        if missing or outputs != entry.outputs:
            run[i], reasons[i] = True, "outputs missing or changed"
            continue
        if i in again:
            run[i], reasons[i] = True, VALUE_NOT_KEPT
            continue
        reason = up_to_date.get(entry.run_id)
        if reason is None:  # one text per earlier run, shared by its tasks
            reason = up_to_date[entry.run_id] = f"up to date (run {entry.run_id})"
        reasons[i] = reason
    return ResumeDecision(run, reasons)


def _matches(task_id: str, name: str, pattern: str) -> bool:
    """An exact id or name (ids contain '[', a glob character), or a glob over either."""
    return pattern in (task_id, name) or fnmatchcase(task_id, pattern) or fnmatchcase(name, pattern)
