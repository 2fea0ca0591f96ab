"""What the plugin changes in a job before it is sent: its slot (local mode) and the
options its command carries (pure functions, with Snakemake's own resource parser)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from snakemake.resources import Resources

from snakemake_executor_plugin_hpcflow.calls import CapacityError, cap_to_worker, check_fits
from snakemake_executor_plugin_hpcflow.translate import JobRequest, task_for_job
from snakemake_executor_plugin_hpcflow.upstream import (
    default_resource_args,
    job_command_extras,
    without_option,
)
from tests.snakemake.conformance import Outcome, verdict
from tests.snakemake.swap.conformance_swap import swap_shellcmd


def task(threads=1, **resources):
    return task_for_job(JobRequest(name="a", jobid=0, threads=threads, resources=resources))


def test_local_mode_caps_the_slot_at_the_worker_and_says_so():
    capped, cut = cap_to_worker(task(threads=20), max_cpus=2, gpus=0)
    assert capped.dask_resources == {"cpus": 2.0}
    assert "20 cpus" in cut and "has 2" in cut
    assert capped.resources.cpus == 20  # what the job asked for stays on record


def test_local_mode_takes_gpu_as_a_plain_counter_without_gpus():
    capped, cut = cap_to_worker(task(gpu=1), max_cpus=2, gpus=0)
    assert capped.dask_resources == {"cpus": 1.0}
    assert "plain Snakemake resource" in cut
    held, _ = cap_to_worker(task(gpu=2), max_cpus=2, gpus=1)
    assert held.dask_resources == {"cpus": 1.0, "GPU": 1.0}


def test_a_job_that_fits_is_unchanged():
    original = task(threads=2, gpu=1)
    assert cap_to_worker(original, max_cpus=2, gpus=1) == (original, "")


def test_batch_modes_still_refuse_what_no_worker_holds_with_the_hint():
    with pytest.raises(CapacityError) as info:
        check_fits(task(threads=20), max_cpus=2, gpus=0)
    assert "asks for 20 cpus but a worker of this hpcflow cluster has 2" in str(info.value)
    assert "cpus_per_node" in info.value.hint
    with pytest.raises(CapacityError) as info:
        check_fits(task(threads=1, gpu=1), max_cpus=2, gpus=0)
    assert "asks for 1 GPUs but a worker of this hpcflow cluster has 0" in str(info.value)
    assert "slurm-gpu" in info.value.hint


def test_default_resources_keep_their_mib_unit():
    """Snakemake's own ``Resources.args`` turns ``mem_mib=953.67`` into ``mem_mb=953.67``."""
    parsed = Resources.parse(
        ["mem_mib=953.67", "disk_mb=2*input.size_mb", "runtime=5"],
        defaults="full",
        allow_expressions=True,
    )
    args = default_resource_args(parsed)
    assert "mem_mib=953.67" in args
    assert "disk_mb=2*input.size_mb" in args
    assert "runtime=5" in args
    assert not any(arg.startswith("mem_mb=") for arg in args)


def test_job_commands_carry_replace_workflow_config():
    def workflow(replace):
        return SimpleNamespace(
            config_settings=SimpleNamespace(replace_workflow_config=replace),
            resource_settings=SimpleNamespace(
                _parsed_default_resources=Resources.parse(
                    ["mem_mib=10"], defaults="bare", allow_expressions=True
                )
            ),
        )

    assert "--replace-workflow-config" in job_command_extras(workflow(True))
    assert "--replace-workflow-config" not in job_command_extras(workflow(False))
    assert any(
        extra.startswith("--default-resources base64//")
        for extra in job_command_extras(workflow(False))
    )


def test_the_harness_swaps_a_shell_command_to_hpcflow(monkeypatch):
    # Local mode is a local executor to Snakemake: the test's own --cores hold.
    monkeypatch.delenv("HPCFLOW_CONFORMANCE_MODE", raising=False)
    assert swap_shellcmd("snakemake -c20 --set-threads a=2", 4) == (
        "snakemake --executor hpcflow -c20 --set-threads a=2"
    )
    assert swap_shellcmd("snakemake --executor slurm", 4) == "snakemake --executor slurm"
    # A batch mode needs --jobs: the test's cores, else the harness's number.
    monkeypatch.setenv("HPCFLOW_CONFORMANCE_MODE", "pilot")
    monkeypatch.setenv("HPCFLOW_CONFORMANCE_PROFILE", "p")
    pilot = "--executor hpcflow --hpcflow-mode pilot --hpcflow-profile p"
    assert swap_shellcmd("snakemake -c20 --set-threads a=2", 4) == (
        f"snakemake {pilot} --jobs 20 -c20 --set-threads a=2"
    )
    assert swap_shellcmd("snakemake -j 1 --config a=b", 4) == (
        f"snakemake {pilot} --jobs 4 -j 1 --config a=b"
    )


def test_jobs_keep_their_temp_outputs_for_the_main_process_to_remove():
    """The job's arguments lose ``--unneeded-temp-files`` and its values, nothing else."""
    args = (
        "--target-jobs 'a:' --cores 3 --unneeded-temp-files 'b' 'c d' "
        "--wait-for-files '/w/.snakemake/tmp.x'"
    )
    assert without_option(args, "--unneeded-temp-files") == (
        "--target-jobs a: --cores 3 --wait-for-files /w/.snakemake/tmp.x"
    )
    assert without_option("--cores 3", "--unneeded-temp-files") == "--cores 3"


def test_the_harness_tells_what_the_machine_lacks_from_an_executor_difference():
    passed, failed = Outcome("passed", 1.0), Outcome("failed", 1.0, "assert 16 <= 8")
    lacks = Outcome("failed", 1.0, "WorkflowError", "ModuleNotFoundError: No module named 'x'")
    assert verdict(passed, failed) == "only-hpcflow-fails"
    assert verdict(passed, None) == "only-hpcflow-fails"
    assert verdict(failed, passed) == "only-local-fails"
    assert verdict(lacks, lacks) == "needs-what-machine-lacks"
    assert verdict(failed, failed) == "failed both"
    assert verdict(Outcome("skipped", 0.0), passed) == "needs-what-machine-lacks"
