"""Elastic mode with several pools: each pool's worker jobs (their shape, their Dask
resource) and each pool scaled on its own backlog in one shared cluster.

The scaling test runs dask-jobqueue's own ``LocalCluster`` (its jobs are real worker
processes started from the job script, no batch system): two pools' :class:`PoolAdaptive`
on it, driven by backlogs the test sets.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hpcflow.engine.pools import POOL_CAPACITY, pool_resource
from hpcflow.modes.elastic_plan import ElasticPlan, plan_elastic
from hpcflow.modes.elastic_watch import WorkerWatch
from hpcflow.settings.profile import Profile
from hpcflow.store.paths import RunPaths

RUN_ID = "20260101-000000-abcdef"


def _site() -> Profile:
    return Profile(
        name="site",
        backend="slurm",
        partition="compute",
        cpus_per_node=4,
        max_workers=6,
        pools={
            "cpu": {"cpus_per_node": 8},
            "gpu": {
                "partition": "gpu",
                "gpus_per_node": 2,
                "gpu_kind": "h100",
                "min_workers": 0,
                "max_workers": 2,
            },
        },
    )


def test_each_pool_has_worker_jobs_of_its_own_shape(tmp_path):
    profile = _site()
    plans = {
        pool: plan_elastic(profile.for_pool(pool), tmp_path, RUN_ID, tmp_path, pool=pool)
        for pool in ("cpu", "gpu")
    }
    cpu, gpu = plans["cpu"], plans["gpu"]
    assert (cpu.job_name, gpu.job_name) == (f"hpcflow-{RUN_ID}-w-cpu", f"hpcflow-{RUN_ID}-w-gpu")
    assert (cpu.kwargs["queue"], gpu.kwargs["queue"]) == ("compute", "gpu")
    assert (cpu.kwargs["job_cpu"], gpu.kwargs["job_cpu"]) == (8, 4)
    assert "--gres=gpu:h100:2" in gpu.kwargs["job_extra_directives"]
    assert not any("gres" in d for d in cpu.kwargs["job_extra_directives"])
    # The pool's limits, else the profile's.
    assert (cpu.minimum, cpu.maximum, gpu.minimum, gpu.maximum) == (0, 6, 0, 2)
    # Each pool's workers offer its Dask resource, which its tasks ask for.
    assert cpu.resources[pool_resource("cpu")] == POOL_CAPACITY
    assert pool_resource("cpu") not in gpu.resources and gpu.resources["GPU"] == 2
    assert f"pool-gpu={POOL_CAPACITY:g}" in ",".join(gpu.kwargs["worker_extra_args"])
    # Without a pool: the run's one shape, as before.
    plain = plan_elastic(profile, tmp_path, RUN_ID, tmp_path)
    assert plain.job_name == f"hpcflow-{RUN_ID}-w" and not any(
        name.startswith("pool-") for name in plain.resources
    )


def test_dry_run_scripts_and_costs_show_a_worker_job_per_pool(tmp_path):
    from hpcflow.backends._commands import CommandRunner
    from hpcflow.backends.slurm import SlurmBackend
    from hpcflow.dag.graph import build_graph
    from hpcflow.modes.registry import render_scripts
    from hpcflow.spec.loader import load_workflow
    from tests.conftest import write_workflow

    wf = write_workflow(
        tmp_path,
        """
name: two
tasks:
  - name: prep
    command: "true"
  - name: train
    needs: [prep]
    resources: {gpus: 1}
    command: "true"
""",
    )
    graph = build_graph(load_workflow(wf))
    profile = _site().model_copy(update={"mode": "elastic"})
    paths = RunPaths(tmp_path / "run")
    scripts = dict(render_scripts(graph, profile, SlurmBackend(CommandRunner()), paths, RUN_ID))
    assert list(scripts) == [
        "pool cpu: elastic worker job (up to 6 of them)",
        "pool gpu: elastic worker job (up to 2 of them)",
    ]
    gpu_script = scripts["pool gpu: elastic worker job (up to 2 of them)"]
    assert "#SBATCH -p gpu" in gpu_script and "--gres=gpu:h100:2" in gpu_script
    assert f"pool-gpu={POOL_CAPACITY:g}" in gpu_script


def _local_plan(pool: str, maximum: int) -> ElasticPlan:
    """A pool's worker jobs for dask-jobqueue's LocalCluster (only the options it takes)."""
    resources = f"cpus=1,{pool_resource(pool)}={POOL_CAPACITY:g}"
    return ElasticPlan(
        cluster_class="LocalCluster",
        kwargs={
            "cores": 1,
            "processes": 1,
            "memory": "1GiB",
            "job_name": f"w-{pool}",
            "worker_extra_args": ["--resources", resources, "--no-dashboard"],
        },
        minimum=0,
        maximum=maximum,
        interval=0.2,
        wait_count=2,
        workers_per_job=1,
        threads_per_worker=1,
        gpus_per_worker=0,
        memory_per_worker=None,
        job_name=f"w-{pool}",
    )


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_each_pool_scales_on_its_own_backlog_and_retires_only_idle_jobs(tmp_path):
    from distributed import Client, Event

    from hpcflow.modes.elastic_cluster import import_jobqueue
    from hpcflow.modes.elastic_pools import PoolAdaptive

    import_jobqueue()  # (a plain import would take over Ctrl-C in this process)
    from dask_jobqueue.local import LocalCluster

    backlog = {"cpu": 0, "gpu": 0}
    cluster = LocalCluster(
        cores=1, processes=1, memory="1GiB", scheduler_options={"dashboard": False}
    )
    adaptives: list[PoolAdaptive] = []
    try:
        for pool, maximum in (("cpu", 2), ("gpu", 1)):
            plan = _local_plan(pool, maximum)
            adaptives.append(
                PoolAdaptive(
                    cluster,
                    pool=pool,
                    plan=plan,
                    backlog=lambda pool=pool: backlog[pool],
                    minimum=0,
                    maximum=maximum,
                    interval="0.2s",
                    wait_count=2,
                )
            )
        client = Client(cluster, set_as_default=False)

        def workers(pool: str) -> list[str]:
            info = client.scheduler_info(n_workers=-1)["workers"].values()
            named = [w for w in info if str(w["name"]).startswith(f"{pool}.")]
            assert all(pool_resource(pool) in w["resources"] for w in named), named
            return sorted(str(w["name"]) for w in named)

        backlog["cpu"] = 5  # more than the pool's maximum of 2
        _wait_for(lambda: len(workers("cpu")) == 2, 90, "the cpu pool's 2 workers")
        assert workers("gpu") == []  # nothing for the gpu pool: none of its jobs queued
        assert [name for name in cluster.worker_spec if str(name).startswith("gpu.")] == []
        # What elastic.jsonl records: each pool's counts.
        sample = WorkerWatch(cluster, tmp_path / "elastic.jsonl", pools=["cpu", "gpu"]).sample()
        assert sample["pools"] == {
            "cpu": {"workers": 2, "requested": 2},
            "gpu": {"workers": 0, "requested": 0},
        }
        assert (sample["workers"], sample["requested"]) == (2, 2)

        backlog["gpu"] = 1
        _wait_for(lambda: len(workers("gpu")) == 1, 90, "the gpu pool's worker")
        ran_on = client.submit(
            lambda: __import__("distributed").get_worker().name,
            resources={pool_resource("gpu"): 1},
            pure=False,
        ).result(timeout=30)
        assert str(ran_on).startswith("gpu.")

        # The gpu pool's work is done: its job is retired while the cpu pool stays.
        backlog["gpu"] = 0
        _wait_for(lambda: workers("gpu") == [], 60, "the gpu pool's worker retired")
        assert len(workers("cpu")) == 2

        # A busy job is not retired: only the idle one goes while the task runs.
        go = Event("go", client=client)

        def hold() -> str:
            from distributed import Event, get_worker

            Event("go").wait()
            return str(get_worker().name)

        busy = client.submit(hold, resources={pool_resource("cpu"): 1}, pure=False)
        _wait_for(lambda: any(client.processing().values()), 30, "the task started")
        backlog["cpu"] = 0
        _wait_for(lambda: len(workers("cpu")) == 1, 60, "the idle cpu worker retired")
        still = workers("cpu")
        go.set()
        assert still == [busy.result(timeout=30)]
        # Then it goes too: the pool has nothing left.
        _wait_for(lambda: workers("cpu") == [], 60, "the last cpu worker retired")
        client.close()
    finally:
        for adaptive in adaptives:
            cluster.loop.add_callback(adaptive.stop, "test over")
        cluster.close()


def test_a_pool_worker_job_script_is_written_per_pool(tmp_path):
    paths = RunPaths(tmp_path)
    assert paths.pool_worker_job_script("gpu") == tmp_path / "workers" / "job-gpu.sh"
    assert Path(paths.worker_job_script).name == "job.sh"
