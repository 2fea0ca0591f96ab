"""Jobs mode's pure parts: units and array chunking, when a unit may be submitted and
after which jobs, what a failure skips, the submission rate, and job time limits."""

from __future__ import annotations

import pytest

from hpcflow.dag.graph import build_graph
from hpcflow.engine.ledger import downstream
from hpcflow.modes.jobs import job_walltime
from hpcflow.modes.jobs_plan import (
    JobUnit,
    LimitBackoff,
    SubmitThrottle,
    blocking_deps,
    chunk,
    plan_units,
    scheduler_dependencies,
)
from hpcflow.settings.profile import Profile
from hpcflow.spec.loader import load_workflow
from hpcflow.store import statedb as st
from tests.conftest import write_workflow

PIPELINE = """
name: pipeline
tasks:
  - name: make
    foreach: {i: {range: [0, 5]}}
    command: echo {i} > {outputs}
    outputs: ["out/make-{i}.txt"]
  - name: use
    foreach: {i: {range: [0, 5]}}
    inputs: ["out/make-{i}.txt"]
    command: cat {inputs} > {outputs}
    outputs: ["out/use-{i}.txt"]
  - name: reduce
    inputs: ["out/use-*.txt"]
    command: cat {inputs} > {outputs}
    outputs: [out/all.txt]
  - name: alone
    command: "true"
"""


def graph_of(tmp_path, text=PIPELINE):
    return build_graph(load_workflow(write_workflow(tmp_path, text)))


def ids(graph, unit: JobUnit) -> list[str]:
    return [graph.instances[i].id for i in unit.indices]


def test_chunk():
    assert chunk(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert chunk(list(range(3)), 1000) == [[0, 1, 2]]
    assert chunk([], 5) == []
    with pytest.raises(ValueError):
        chunk([1], 0)


def test_a_sweep_of_200_becomes_ceil_200_over_limit_arrays(tmp_path):
    graph = graph_of(
        tmp_path,
        "name: big\ntasks:\n  - name: t\n    foreach: {i: {range: [0, 200]}}\n"
        "    command: echo {i}\n",
    )
    everything = list(range(200))
    assert [u.size for u in plan_units(graph, everything, 1000)] == [200]
    units = plan_units(graph, everything, 64)
    assert [u.size for u in units] == [64, 64, 64, 8]
    assert [u.number for u in units] == [1, 2, 3, 4]
    assert sorted(i for u in units for i in u.indices) == everything


def test_units_are_per_task_and_in_dependency_order(tmp_path):
    graph = graph_of(tmp_path)
    units = plan_units(graph, graph.order, 1000)
    names = [graph.templates[u.spec_index].spec.name for u in units]
    assert sorted(names) == ["alone", "make", "reduce", "use"]
    position = {name: n for n, name in enumerate(names)}
    assert position["make"] < position["use"] < position["reduce"]
    by_name = dict(zip(names, units, strict=True))
    assert len(by_name["make"].indices) == len(by_name["use"].indices) == 5
    # A unit never contains an instance and one of its dependencies.
    for unit in units:
        members = set(unit.indices)
        assert not any(d in members for i in unit.indices for d in graph.instances[i].deps)


def test_only_included_instances_are_planned(tmp_path):
    graph = graph_of(tmp_path)
    use = [i for i in graph.order if graph.instances[i].id.startswith("use")]
    (unit,) = plan_units(graph, use[:2], 1000, first_number=7)
    assert unit.number == 7 and unit.indices == use[:2]


def test_scheduler_dependencies_name_the_upstream_jobs(tmp_path):
    graph = graph_of(tmp_path)
    units = plan_units(graph, graph.order, 2)  # make and use split into 3 arrays each
    unit_of = {i: u.number for u in units for i in u.indices}
    state = [st.PENDING] * len(graph.instances)
    use_first = next(u for u in units if ids(graph, u)[0].startswith("use"))
    blocking = blocking_deps(graph, use_first, state)
    assert {graph.instances[d].id for d in blocking} == {
        i.replace("use", "make") for i in ids(graph, use_first)
    }
    # Not submitted yet: the dependent must wait.
    assert scheduler_dependencies(blocking, unit_of, {}) is None
    native = {u.number: f"{100 + u.number}" for u in units}
    after = scheduler_dependencies(blocking, unit_of, native)
    assert after == sorted({native[unit_of[d]] for d in blocking})
    # Upstream instances that succeeded no longer block.
    for d in blocking:
        state[d] = st.SUCCEEDED
    assert blocking_deps(graph, use_first, state) == set()


def test_skip_downstream_of_a_failure(tmp_path):
    graph = graph_of(tmp_path)
    index = {inst.id: inst.index for inst in graph.instances}
    state = [st.PENDING] * len(graph.instances)
    bad = index["make[i=2]"]
    state[bad] = st.FAILED

    def still_open(i):
        return state[i] in (st.PENDING, st.RUNNING)

    skipped = {graph.instances[i].id for i in downstream(graph.dependents(), [bad], still_open)}
    assert skipped == {"use[i=2]", "reduce"}
    # Ended tasks are never skipped.
    state[index["reduce"]] = st.SUCCEEDED
    again = downstream(graph.dependents(), [bad], still_open)
    assert {graph.instances[i].id for i in again} == {"use[i=2]"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_submit_throttle_spaces_submissions():
    clock = FakeClock()
    throttle = SubmitThrottle(4.0, clock)
    assert throttle.wait_time() == 0.0
    throttle.note()
    assert throttle.wait_time() == pytest.approx(0.25)
    clock.now += 0.1
    assert throttle.wait_time() == pytest.approx(0.15)
    clock.now += 0.2
    assert throttle.wait_time() == 0.0
    with pytest.raises(ValueError):
        SubmitThrottle(0)


def test_limit_backoff_doubles_and_resets():
    backoff = LimitBackoff(first=1.0, cap=5.0)
    assert [backoff.refused() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    backoff.accepted()
    assert backoff.refused() == 1.0


def test_job_walltime(tmp_path):
    graph = graph_of(
        tmp_path,
        """
name: w
tasks:
  - name: bounded
    resources: {walltime: 10m}
    retries: {attempts: 2, backoff: 5s, factor: 2}
    command: "true"
  - name: timed
    timeout: 30s
    command: "true"
  - name: open
    command: "true"
""",
    )
    by_name = {t.spec.name: t for t in graph.templates}
    profile = Profile(name="p", walltime=3600)
    # 3 attempts of 10 minutes, waits of 5 s and 10 s, one minute to spare.
    assert job_walltime(by_name["bounded"], profile) == 3 * 600 + 15 + 60
    assert job_walltime(by_name["timed"], profile) == 30 + 60
    assert job_walltime(by_name["open"], profile) == 3600
    assert job_walltime(by_name["open"], Profile(name="p")) is None
