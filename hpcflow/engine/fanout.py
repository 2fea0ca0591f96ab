"""Fan-out decided at run time: plan, during a run, the sweeps over files that a task of
the run has made (``from_files``/``from_table`` with ``after: TASK``).

A run starts with such a task (and what depends on it) *waiting*: not in the graph. Once
the tasks it reads files after have finished, the workflow is planned again with those
files read: the run's instances keep their numbers, the new ones are added to the state
database (and what was read to ``sources.json``, so every allocation of the run rebuilds
the same graph), and they run like the others. Planning happens when the run's driver
has nothing left to do (a barrier between the tasks planned so far and the new ones).
"""

from __future__ import annotations

import dataclasses
import logging

from hpcflow.dag.graph import TaskGraph, build_graph, renumbered
from hpcflow.engine.prepare import PreparedRun, collector_paused, files_made
from hpcflow.engine.resume import ResumeDecision, decide
from hpcflow.errors import RunError
from hpcflow.spec.loader import parse_workflow
from hpcflow.store import statedb as st
from hpcflow.store.atomic import write_json_atomic
from hpcflow.store.paths import RunPaths

log = logging.getLogger(__name__)

#: States of a finished upstream task that let its dependents run.
_DONE = (st.SUCCEEDED, st.CACHED)


def plan_made(prepared: PreparedRun, db: st.StateDB) -> PreparedRun | None:
    """The run grown by the tasks whose files are now made, with what to run decided
    (states of the new instances recorded in ``db``); None when no waiting task can be
    planned yet."""
    graph = prepared.graph
    if not graph.waiting:
        return None
    rows = db.tasks()
    pending = [row.state not in _DONE for row in rows]
    ready = files_made(graph, pending)
    if not ready:
        return None
    paths = prepared.factory.paths
    if paths is None:
        raise RunError("planning a fan-out needs a run directory")
    grown = _grown_graph(graph, paths, ready, [row.id for row in rows])
    # In this order: a run reopened after a crash between two of these writes still
    # numbers its instances as the state database does (new ones come last).
    write_json_atomic(paths.instance_order, [inst.id for inst in grown.instances])
    write_json_atomic(paths.sweep_sources, grown.loaded.sources)
    factory = prepared.factory
    factory.grow(grown)
    with collector_paused():
        decided = decide(
            grown, prepared.memo.load(), factory, force=prepared.force, rerun=prepared.rerun
        )
    states = [row.state for row in rows]
    run, reasons = _new_states(grown, decided, states)
    new = grown.instances[len(rows) :]
    db.add_tasks(
        (inst.index, inst.id, grown.template(inst).spec.name, factory.slug(inst), inst.deps,
         states[inst.index])
        for inst in new
    )  # fmt: skip
    db.set_meta(total=len(grown.instances), waiting=_waiting_names(grown))
    log.info(
        "planned %d task(s) after %s made their files: %d to run%s",
        len(new),
        ", ".join(sorted(ready)),
        sum(run),
        f"; still waiting: {', '.join(_waiting_names(grown))}" if grown.waiting else "",
    )
    return dataclasses.replace(prepared, graph=grown, decision=ResumeDecision(run, reasons))


def waiting_message(graph: TaskGraph) -> str | None:
    """What is still not planned at the end of a run, and why; None when nothing is."""
    if not graph.waiting:
        return None
    parts = [f"{graph.templates[i].spec.name} ({why})" for i, why in sorted(graph.waiting.items())]
    return "never planned: " + "; ".join(parts)


def _grown_graph(
    graph: TaskGraph, paths: RunPaths, ready: frozenset[str], ids: list[str]
) -> TaskGraph:
    """The run's workflow (its copy) planned again with the files of ``ready`` read."""
    loaded = graph.loaded
    if loaded.source is None:
        raise RunError("planning a fan-out needs the workflow's file")
    text = paths.workflow_copy.read_text(encoding="utf-8")
    again = parse_workflow(
        text,
        loaded.positions.file,
        source=loaded.source,
        frozen_sources=loaded.sources,
        frozen_includes=loaded.included,
        ready=ready,
    )
    with collector_paused():
        grown = renumbered(build_graph(again, check_files=False), ids)
    if [inst.id for inst in grown.instances[: len(ids)]] != ids:
        raise RunError(
            f"planning run {paths.run_dir} again lost some of its tasks",
            hint="the run's workflow copy or sources.json changed; start a new run",
        )
    return grown


def _new_states(
    grown: TaskGraph, decided: ResumeDecision, states: list[st.TaskState]
) -> tuple[list[bool], list[str]]:
    """What runs: only new instances, as decided, unless something they need did not
    succeed (then they are skipped). ``states`` is extended with the new ones' states."""
    known = len(states)
    run = [False] * len(grown.instances)
    reasons = ["planned before"] * known + decided.reasons[known:]
    states += [st.PENDING] * (len(grown.instances) - known)
    for i in grown.order:  # upstream first: a skip reaches everything below it
        if i < known:
            continue
        inst = grown.instances[i]
        failed = next((d for d in inst.deps if states[d] not in (*_DONE, st.PENDING)), None)
        if failed is not None:
            states[i] = st.SKIPPED
            reasons[i] = f"upstream {grown.instances[failed].id} did not succeed"
            continue
        # Below a task that ran in this run it runs too (the memo knows only what ran
        # before: the files a task made now are new to it).
        fresh = next((d for d in inst.deps if run[d] or states[d] == st.SUCCEEDED), None)
        run[i] = decided.run[i] or fresh is not None
        if fresh is not None and not decided.run[i]:
            reasons[i] = f"upstream {grown.instances[fresh].id} ran"
        states[i] = st.PENDING if run[i] else st.CACHED
    return run, reasons


def _waiting_names(graph: TaskGraph) -> list[str]:
    return [graph.templates[i].spec.name for i in sorted(graph.waiting)]
