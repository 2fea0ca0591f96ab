"""Pools: a profile's allocation shapes, and which one each task definition runs in."""

from __future__ import annotations

import logging
import types

import pytest
from pydantic import ValidationError

from hpcflow.backends._commands import CommandRunner
from hpcflow.backends.slurm import SlurmBackend
from hpcflow.bootstrap.config import PilotConfig
from hpcflow.dag.graph import build_graph
from hpcflow.engine.pools import assign_pools, one_pool
from hpcflow.errors import ProfileError, SpecError
from hpcflow.modes.pilot_pools import plan_pools, pools_needed
from hpcflow.settings.profile import Profile
from hpcflow.spec.loader import load_workflow
from hpcflow.store.paths import RunPaths
from tests.conftest import write_workflow

PROFILE = Profile(
    name="site",
    backend="slurm",
    partition="debug",
    cpus_per_node=8,
    env={"A": "1"},
    pools={
        "big": {"partition": "fat", "cpus_per_node": 64, "memory_per_node": "1TB"},
        "gpu": {"partition": "gpu", "gpus_per_node": 4, "gpu_kind": "a100", "env": {"B": "2"}},
        "cpu": {"partition": "cpu", "cpus_per_node": 16},
    },
)

WORKFLOW = """
name: mixed
tasks:
  - name: small
    command: "true"
  - name: wide
    resources: {cpus: 32}
    command: "true"
  - name: train
    resources: {gpus: 1}
    command: "true"
  - name: share
    resources: {gpus: 0.25}
    command: "true"
  - name: named
    resources: {pool: big}
    command: "true"
  - name: kind
    resources: {gpus: 2, gpu_kind: a100}
    command: "true"
"""


def _graph(tmp_path, text: str = WORKFLOW):
    path = write_workflow(tmp_path, text)
    return build_graph(load_workflow(path))


def _by_name(graph, chosen):
    return {graph.templates[i].spec.name: pool for i, pool in chosen.items()}


def test_each_task_runs_in_the_pool_it_names_or_the_smallest_that_fits(tmp_path):
    graph = _graph(tmp_path)
    assert _by_name(graph, assign_pools(graph, PROFILE)) == {
        "small": "cpu",  # no GPUs first, then fewest cores
        "wide": "big",
        "train": "gpu",
        "share": "gpu",
        "named": "big",
        "kind": "gpu",
    }


def test_a_pool_shapes_the_profile_it_belongs_to():
    gpu = PROFILE.for_pool("gpu")
    assert (gpu.partition, gpu.gpus_per_node, gpu.cpus_per_node) == ("gpu", 4, 8)
    assert gpu.env == {"A": "1", "B": "2"} and gpu.pools == {}
    assert PROFILE.for_pool(None) is PROFILE
    assert PROFILE.for_pool("big").memory_per_node == 1024**4
    # A pool that would make an inconsistent profile is refused with the profile.
    with pytest.raises(ValidationError, match="pool odd: workers_per_node 'per-gpu'"):
        Profile(name="p", pools={"odd": {"workers_per_node": "per-gpu"}})
    with pytest.raises(ValidationError, match=r"pool gpu: min_workers \(3\) is more"):
        Profile(name="p", pools={"gpu": {"min_workers": 3, "max_workers": 2}})
    with pytest.raises(ValidationError, match="pool cpu: min_workers"):
        Profile(name="p", max_workers=2, pools={"cpu": {"min_workers": 3}})


def test_a_missing_pool_and_a_task_no_pool_fits_are_refused_at_their_lines(tmp_path):
    text = WORKFLOW.replace("pool: big", "pool: huge") + (
        "  - name: giant\n    resources: {gpus: 8}\n    command: 'true'\n"
        "  - name: h100\n    resources: {gpus: 1, gpu_kind: h100}\n    command: 'true'\n"
        "  - name: wrong\n    resources: {gpus: 1, gpu_kind: h100, pool: gpu}\n"
        "    command: 'true'\n"
    )
    graph = _graph(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        assign_pools(graph, PROFILE)
    problems = caught.value.problems
    assert [p.line for p in problems] == [16, 22, 25, 28]  # resources.pool, resources
    assert "task 'named' asks for pool 'huge'" in problems[0].message
    assert problems[0].hint == "use one of: big, cpu, gpu"
    assert "task 'giant' fits no pool" in problems[1].message
    assert "gpu: 8 GPUs, its nodes have 4" in problems[1].message
    assert "gpu: h100 GPUs, its GPUs are a100" in problems[2].message
    assert "needs h100 GPUs, but pool 'gpu' has a100" in problems[3].message


def test_a_pool_under_defaults_is_reported_there(tmp_path):
    graph = _graph(
        tmp_path,
        "name: d\ndefaults:\n  resources: {pool: nope}\ntasks:\n  - name: a\n    command: 'true'\n",
    )
    with pytest.raises(SpecError) as caught:
        assign_pools(graph, PROFILE)
    assert caught.value.problems[0].line == 3


def test_without_pools_a_named_pool_is_only_a_warning(tmp_path, caplog):
    graph = _graph(tmp_path)
    plain = Profile(name="laptop-site", backend="slurm")
    with caplog.at_level(logging.WARNING, logger="hpcflow.engine.pools"):
        chosen = assign_pools(graph, plain)
    assert set(chosen.values()) == {None}
    assert "task 'named' asks for pool 'big', but profile 'laptop-site' has no pools" in caplog.text


def test_pilot_and_elastic_runs_take_the_one_pool_their_tasks_need(tmp_path):
    graph = _graph(tmp_path)
    with pytest.raises(ProfileError, match=r"need 3 pools .*big: wide, named; cpu: small"):
        one_pool(graph, PROFILE)
    gpu_only = [t.resources.gpus > 0 for t in graph.templates]
    run = [gpu_only[inst.spec_index] for inst in graph.instances]
    assert one_pool(graph, PROFILE, run).partition == "gpu"
    nothing_pooled = Profile(name="p", backend="slurm", partition="x")
    assert one_pool(graph, nothing_pooled) is nothing_pooled


def test_a_pilot_run_plans_an_allocation_per_pool_with_the_head_first(tmp_path):
    graph = _graph(tmp_path)
    run = [True] * len(graph.instances)
    head, of_template = pools_needed(graph, PROFILE, run)
    assert head == "cpu"  # the pool of the first task to run (small)
    paths = RunPaths(tmp_path / "run")
    pools = plan_pools(PROFILE, paths, "RID", tmp_path, head, of_template)
    assert list(pools.plans) == ["cpu", "big", "gpu"] and pools.others() == ["big", "gpu"]
    cpu, big, gpu = (pools.plans[name] for name in ("cpu", "big", "gpu"))
    # The head runs the scheduler and the driver, and knows every task's pool.
    assert "--role" in cpu.request.command and "head" in cpu.request.command
    assert cpu.config.task_pools == {str(i): p for i, p in of_template.items()}
    assert cpu.config.releasable == ["big", "gpu"]
    assert cpu.config.pool_slots == {"cpu": 16, "big": 64, "gpu": 8}
    # The others run their workers only, in their own partition, told their pool.
    assert "head" not in gpu.request.command and gpu.request.command[0] == "srun"
    assert gpu.request.partition == "gpu" and gpu.request.gpus_per_node == 4
    assert "#SBATCH --gres=gpu:a100:4\n" in SlurmBackend(CommandRunner()).render(gpu.request)
    assert gpu.request.env["HPCFLOW_POOL"] == "gpu" and gpu.config.pool == "gpu"
    assert big.request.memory_per_node == 1024**4 and big.request.stderr.name == "2.err"
    paths.run_dir.mkdir(parents=True)
    pools.write_configs(paths)
    assert PilotConfig.read(paths.pilot_pool_config("gpu")).gpus_per_worker == 4
    assert PilotConfig.read(paths.pilot_config).pool == "cpu"
    one = [graph.templates[inst.spec_index].spec.name == "small" for inst in graph.instances]
    assert pools_needed(graph, PROFILE, one) is None


@pytest.fixture
def two_pools(tmp_path, monkeypatch):
    """A created run of prep (cpu pool, the head) then train (gpu pool): its state
    database, its pools' plans and a clock the test moves."""
    from hpcflow.engine.lifecycle import RunLife
    from hpcflow.engine.prepare import RunOptions, prepare

    monkeypatch.setenv("HPCFLOW_HOME", str(tmp_path / "home"))
    wf = write_workflow(
        tmp_path,
        "name: two\ntasks:\n  - name: prep\n    command: 'true'\n"
        "  - name: train\n    needs: [prep]\n    resources: {gpus: 1}\n    command: 'true'\n",
    )
    options = RunOptions()
    prepared = prepare(wf, options)
    graph = prepared.graph
    head, of_template = pools_needed(graph, PROFILE, [True] * len(graph.instances))
    with RunLife(prepared, options) as life:
        life.create()
        pools = plan_pools(PROFILE, life.paths, life.run_id, tmp_path, head, of_template)
        yield types.SimpleNamespace(
            db=life.db, graph=graph, paths=life.paths, pools=pools, now=[0.0]
        )


def test_another_pools_allocation_is_queued_once_one_of_its_tasks_is_near_ready(two_pools):
    from hpcflow.modes.pilot_pools import PoolCompanions
    from hpcflow.store import statedb as st

    run, queued = two_pools, []
    companions = PoolCompanions(
        run.pools, run.graph, run.paths, lambda pool: queued.append(pool) or f"job-{pool}",
        clock=lambda: run.now[0],
    )  # fmt: skip
    db = run.db
    assert companions.submit_due(db) == [] and queued == []  # prep has not started
    # prep done, train handed to Dask (running, to the driver), waiting for workers.
    db.set_states([(0, st.SUCCEEDED), (1, st.RUNNING)])
    db.flush()
    assert companions.submit_due(db) == []  # looked a moment ago: not yet again
    run.now[0] += 5
    assert companions.submit_due(db) == ["gpu"] and companions.native_ids == {"gpu": "job-gpu"}
    run.now[0] += 5
    assert companions.submit_due(db) == [] and queued == ["gpu"]  # once


def test_a_pool_allocation_seen_ended_with_tasks_left_ends_the_run_only_after_a_grace(
    two_pools,
):
    """The batch system's word that a released pool's allocation ended may come before
    the driver's record of that pool's last task reaches this side: only an allocation
    still ended with tasks left after the grace ends the run."""
    from hpcflow.backends.base import AllocationState, AllocationStatus
    from hpcflow.backends.poller import Poller
    from hpcflow.modes.pilot_pools import ENDED_EARLY_GRACE, PoolCompanions
    from hpcflow.store import statedb as st

    class Ended:
        name = "slurm"

        def poll(self, native_ids):
            done = AllocationState.COMPLETED
            return {i: AllocationStatus(i, done, "COMPLETED") for i in native_ids}

    run = two_pools
    now = run.now
    companions = PoolCompanions(
        run.pools, run.graph, run.paths, lambda pool: f"job-{pool}", clock=lambda: now[0]
    )
    companions.submit_all()
    poller = Poller(Ended(), interval=0.01, initial_delay=0.0, clock=lambda: now[0])
    poller.track(companions.ids())
    poller.poll_once()
    db = run.db
    db.set_states([(0, st.SUCCEEDED), (1, st.RUNNING)])
    db.flush()
    assert companions.ended_early(poller, db) is None  # just seen: within the grace
    now[0] += ENDED_EARLY_GRACE / 2
    db.set_states([(1, st.SUCCEEDED)])  # the driver's record arrives: nothing was lost
    db.flush()
    now[0] += ENDED_EARLY_GRACE
    assert companions.ended_early(poller, db) is None
    db.set_states([(1, st.RUNNING)])  # (as if it had not: the grace starts again)
    db.flush()
    assert companions.ended_early(poller, db) is None
    now[0] += ENDED_EARLY_GRACE
    pool, native_id, why = companions.ended_early(poller, db)
    assert (pool, native_id) == ("gpu", "job-gpu")
    assert why == "the allocation of pool gpu ended (COMPLETED) with 1 of its task(s) still to run"


def test_a_one_pool_pilot_allocation_is_recorded_with_its_pool(tmp_path):
    """``hpcflow status`` names the pool of a run whose tasks all need one pool."""
    from hpcflow.engine.pools import one_pool_name
    from hpcflow.modes.pilot import submit_allocation
    from hpcflow.modes.pilot_plan import plan_pilot
    from hpcflow.store.statedb import SubmitDB

    class Accepting(SlurmBackend):
        """Renders as SLURM does; takes every allocation as job 42 (no batch system)."""

        def submit(self, script, request):
            return "42"

    graph = _graph(tmp_path)
    one = [graph.templates[inst.spec_index].spec.name == "small" for inst in graph.instances]
    pool = one_pool_name(graph, PROFILE, one)
    assert pool == "cpu"
    paths = RunPaths(tmp_path / "run")
    plan = plan_pilot(PROFILE.for_pool(pool), paths, "RID", tmp_path, pool=pool)
    assert plan.config.pool == "cpu" and plan.request.partition == "cpu"
    paths.run_dir.mkdir(parents=True)
    with SubmitDB(paths.submit_db) as submit:
        submit_allocation(Accepting(CommandRunner()), plan, paths, submit, 1)
        submit.flush()
        assert [(a.native_id, a.pool) for a in submit.allocations()] == [("42", "cpu")]


def test_continued_pool_allocations_take_new_numbers_and_logs_of_their_own(two_pools):
    """A pool's allocation that stopped early is asked for again as the next number (its
    own script and logs); when the head allocation is continued, every other pool's
    allocation is queued again, when due, under a new number too."""
    from hpcflow.modes.pilot_pools import PoolCompanions
    from hpcflow.store import statedb as st

    run, sent = two_pools, []

    def submit_pool(pool: str) -> str:
        plan, number = companions.allocation_for(pool)
        sent.append((pool, number, plan))
        return f"job-{number}"

    companions = PoolCompanions(
        run.pools, run.graph, run.paths, submit_pool, clock=lambda: run.now[0]
    )
    companions.submit_all()
    assert [(pool, number) for pool, number, _ in sent] == [("gpu", 2)]
    assert sent[0][2] is run.pools.plans["gpu"]
    # Its walltime: the gpu pool's allocation is asked for again, as allocation 3.
    assert companions.resubmit("gpu") == "job-3"
    pool, number, plan = sent[-1]
    assert (pool, number) == ("gpu", 3) and companions.native_ids == {"gpu": "job-3"}
    assert plan.request.stderr == run.paths.allocation_stderr(3)
    assert plan.request.env["HPCFLOW_ALLOCATION_NUMBER"] == "3"
    assert plan.request.env["HPCFLOW_POOL"] == "gpu" and plan.config.pool == "gpu"
    # The head's walltime: its continuation is allocation 4; the gpu pool's is queued
    # again only when one of its tasks is near ready, as allocation 5.
    assert companions.new_number() == 4
    companions.restart()
    assert companions.native_ids == {} and companions.unsubmitted() == ["gpu"]
    assert companions.submit_due(run.db) == []  # prep has not started
    run.db.set_states([(0, st.RUNNING)])
    run.db.flush()
    run.now[0] += 5
    assert companions.submit_due(run.db) == ["gpu"]
    assert (sent[-1][0], sent[-1][1]) == ("gpu", 5)


def test_a_pool_allocation_cancelled_at_a_continuation_or_the_end_is_recorded_ended(two_pools):
    """When the head allocation is continued, the other pools' live allocations are
    cancelled and their pools queued again; the cancelled ones are still followed until
    the batch system reports them ended, and at the run's end the cancelled allocations
    are waited for (bounded) so the record does not leave them 'running'."""
    from hpcflow.backends.base import AllocationState, AllocationStatus
    from hpcflow.backends.poller import Poller
    from hpcflow.modes.pilot_pools import PoolCompanions
    from hpcflow.store.statedb import AllocationRow, SubmitDB

    now = two_pools.now

    def row(native_id: str, number: int) -> AllocationRow:
        return AllocationRow(
            native_id=native_id,
            number=number,
            backend="slurm",
            state="pending",
            native_state=None,
            reason=None,
            submitted=0.0,
            updated=None,
            script="s",
            stdout="o",
            stderr="e",
            pool="gpu",
        )

    class Batch:
        """Each allocation runs until cancelled, then is CANCELLED one poll later."""

        name = "slurm"

        def __init__(self):
            self.cancelled: dict[str, int] = {}

        def poll(self, native_ids):
            out = {}
            for i in native_ids:
                polls = self.cancelled.get(i)
                if polls is None or polls == 0:
                    out[i] = AllocationStatus(i, AllocationState.RUNNING, "RUNNING")
                    if polls is not None:
                        self.cancelled[i] = 1
                else:
                    out[i] = AllocationStatus(i, AllocationState.CANCELLED, "CANCELLED")
            return out

        def cancel(self, native_ids):
            for i in native_ids:
                self.cancelled.setdefault(i, 0)

    def sleep(seconds):
        now[0] += seconds

    batch, counter = Batch(), iter(range(2, 10))
    companions = PoolCompanions(
        two_pools.pools, two_pools.graph, two_pools.paths,
        lambda pool: f"job-{next(counter)}", clock=lambda: now[0],
    )  # fmt: skip
    poller = Poller(batch, interval=1.0, initial_delay=0.0, clock=lambda: now[0], sleep=sleep)
    paths = two_pools.paths
    with SubmitDB(paths.submit_db) as submit:
        companions.submit_all()
        submit.add_allocation(row("job-2", 2))
        poller.track(companions.ids())
        poller.poll_once()
        companions.update(poller, submit)
        # The head drained: the gpu allocation is cancelled and its pool queued again.
        companions.cancel_live(batch, poller)
        companions.restart()
        companions.submit_all()
        submit.add_allocation(row("job-3", 3))
        poller.track(companions.ids())
        for _ in range(4):
            now[0] += 2.5
            poller.poll_once()
            companions.update(poller, submit)
        submit.flush()
        states = {a.native_id: a.state for a in submit.allocations()}
        assert states == {"job-2": "cancelled", "job-3": "running"}, states
        # The run ends: job-3 is cancelled and waited for.
        companions.cancel_live(batch, poller)
        companions.settle(poller, submit, timeout=30)
        submit.flush()
        states = {a.native_id: a.state for a in submit.allocations()}
        assert states == {"job-2": "cancelled", "job-3": "cancelled"}, states
