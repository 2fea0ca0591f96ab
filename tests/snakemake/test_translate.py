"""The pure Snakemake job → hpcflow task translation."""

from __future__ import annotations

import importlib

import pytest

# Missing, it fails these tests (never a skip), naming the package.
importlib.import_module("snakemake_interface_executor_plugins")

from snakemake_executor_plugin_hpcflow.translate import (  # noqa: E402
    JobRequest,
    JobTranslationError,
    task_for_job,
)


def job(**kwargs) -> JobRequest:
    base = {"name": "align", "jobid": 7, "wildcards": (("sample", "a"),)}
    base.update(kwargs)
    return JobRequest(**base)


def test_defaults_are_one_cpu_no_limits():
    task = task_for_job(job())
    assert task.task_id == "align[sample=a]"
    assert task.slug.startswith("align.sample=a-")
    assert task.resources.cpus == 1
    assert task.resources.memory is None
    assert task.resources.walltime is None
    assert task.timeout is None
    assert task.dask_resources == {"cpus": 1.0}
    assert task.partition is None and task.account is None


def test_threads_memory_runtime_partition_account():
    task = task_for_job(
        job(
            threads=4,
            attempt=2,
            resources={
                "mem_mb": 2000,
                "runtime": 90,
                "slurm_partition": "debug",
                "slurm_account": "proj1",
                "constraint": "skylake",
                "qos": "short",
            },
        )
    )
    assert task.resources.cpus == 4
    assert task.dask_resources == {"cpus": 4.0}
    assert task.resources.memory == 2_000_000_000  # Snakemake's MB are 10^6 bytes
    assert task.resources.walltime == 90 * 60
    assert task.timeout == 90 * 60
    assert task.attempt == 2
    assert (task.partition, task.account, task.constraint, task.qos) == (
        "debug",
        "proj1",
        "skylake",
        "short",
    )


def test_cpus_per_task_wins_when_larger_than_threads():
    assert task_for_job(job(threads=2, resources={"cpus_per_task": 8})).resources.cpus == 8


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"mem_mib": 1024}, 1024 * 1024 * 1024),
        ({"mem": "4GB"}, 4 * 1024**3),
        ({"mem_mb": 1.5}, 1_500_000),
    ],
)
def test_other_memory_spellings(resources, expected):
    assert task_for_job(job(resources=resources)).resources.memory == expected


@pytest.mark.parametrize(
    ("resources", "gpus"),
    [
        ({"gpu": 2}, 2),
        ({"gpus": 1}, 1),
        ({"gres": "gpu:2"}, 2),
        ({"gres": "gpu:a100:3"}, 3),
        ({"gres": "gpu"}, 1),
        ({"gres": "tmpdisk:10,gpu:1"}, 1),
        ({"gres": "tmpdisk:10"}, 0),
        ({"gpu": 2, "gres": "gpu:2"}, 2),
    ],
)
def test_gpus(resources, gpus):
    task = task_for_job(job(resources=resources))
    assert task.resources.gpus == gpus
    assert task.dask_resources.get("GPU", 0.0) == gpus


def test_mpi_job_holds_its_ranks_locally_but_only_its_cpus_in_an_allocation():
    request = job(threads=1, resources={"tasks": 4, "nodes": 2, "mpi": "srun"})
    local = task_for_job(request)
    assert local.resources.ranks == 4
    assert local.resources.nodes == 2
    assert local.dask_resources == {"cpus": 4.0}
    pilot = task_for_job(request, mpi_as_step=True)
    assert pilot.dask_resources == {"cpus": 1.0}


def test_nodes_without_mpi_tasks_is_ignored():
    assert task_for_job(job(resources={"nodes": 3})).resources.nodes is None


def test_ids_without_wildcards_and_for_groups():
    assert task_for_job(job(wildcards=())).task_id == "align#7"
    group = task_for_job(job(name="fan", jobid="1b2c", is_group=True, wildcards=()))
    assert group.task_id == "group:fan:1b2c"
    assert "/" not in group.slug and ":" not in group.slug


def test_hostile_wildcards_stay_inside_the_run_directory():
    task = task_for_job(job(wildcards=(("sample", "../../etc; rm -rf /"),)))
    assert "/" not in task.slug
    assert not task.slug.startswith(".")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"resources": {"mem_mb": "lots"}}, "mem_mb"),
        ({"resources": {"mem_mb": -1}}, "negative"),
        ({"resources": {"runtime": 0}}, "runtime"),
        ({"resources": {"gres": "gpu:x:y:z"}}, "gres"),
        ({"resources": {"gpu": 1, "gres": "gpu:2"}}, "disagree"),
        ({"resources": {"tasks": 2.5}}, "tasks"),
        ({"resources": {"gpu": True}}, "gpu"),
        ({"resources": {"mem": "huge"}}, "mem"),
        ({"threads": -1}, "threads"),
        ({"threads": 1.5}, "threads"),
    ],
)
def test_bad_values_are_user_errors_naming_the_resource(kwargs, needle):
    with pytest.raises(JobTranslationError) as info:
        task_for_job(job(**kwargs))
    assert needle in str(info.value)
    assert "align" in str(info.value)


def test_a_group_never_asks_for_more_than_the_cap():
    group = job(name="fan", jobid="g1", is_group=True, wildcards=(), threads=50)
    assert task_for_job(group, group_cpus_cap=4).dask_resources == {"cpus": 4.0}
    assert task_for_job(group).resources.cpus == 50
    single = job(threads=8)
    assert task_for_job(single, group_cpus_cap=4).resources.cpus == 8


def test_threads_zero_holds_no_slot_as_in_snakemake():
    """Snakemake takes ``threads: 0`` as a job that holds no core: so does its slot."""
    task = task_for_job(job(threads=0))
    assert task.dask_resources == {"cpus": 0.0}
    assert task.resources.cpus == 1
    assert task_for_job(job(threads=0, resources={"cpus_per_task": 2})).dask_resources == {
        "cpus": 2.0
    }
