"""Snakemake's own tests, through the plugin: a fixed subset of the conformance harness.

Runs, in one invocation of :mod:`tests.snakemake.conformance`, the subset below with
Snakemake's local executor and with ``--executor hpcflow`` (local mode), from the sdist of
the installed Snakemake (downloaded with pip on first use, cached per version). It fails,
never skips, when Snakemake or its sdist cannot be had. Every test of the subset must
pass with hpcflow where it passes with the local executor, except
:data:`UPSTREAM_DIFFERENCES`, which must still differ (each named in docs/snakemake.md
with its reason): if one starts to pass, the list and the docs are out of date.
"""

from __future__ import annotations

import pytest

from tests.snakemake import conformance

pytestmark = pytest.mark.slow

#: The tests that passed with the local executor and failed with hpcflow (issue 39).
FIXED = (
    # jobs wanting more cpus than the local worker has
    "test_threads",
    "test_threads_overwrite",
    "test_github_issue1618",
    "test_temp",
    "test_spaces_in_fnames",
    "test_max_jobs_per_timespan",
    "test_scheduler_sequential_all_cores",
    # threads: 0; gpu=1 as a plain counter
    "test_threads0",
    "test_set_resources_human_readable",
    "test_set_resources_complex",
    # what Snakemake's job-command builder drops or garbles
    "test_config_replacing",
    "test_default_resources_mebibytes",
    # temp outputs removed by the main process, not the job
    "test_issue894",
    # an update() output's previous version kept after a failed job
    "test_update_flag_fail",
    # local mode a local executor to Snakemake: no group jobs, --cores kept
    "test_groupid_expand_local",
    "test_github_issue3913",
    # the output cache kept by the main process, as the local executor keeps it
    "test_output_file_cache",
)
#: Differences the plugin cannot remove (docs/snakemake.md, "Snakemake's own tests").
UPSTREAM_DIFFERENCES = ("test_temp_checkpoint",)
#: A sample of ordinary tests that must keep passing on both sides.
SAMPLE = ("test01", "test05", "test_script_python", "test_shadow", "test_run_namedlist")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return conformance.compare(
        FIXED + UPSTREAM_DIFFERENCES + SAMPLE,
        workdir=tmp_path_factory.mktemp("conformance"),
        timeout=900,
    )


def test_the_fixed_tests_pass_with_hpcflow_as_with_the_local_executor(report):
    wrong = {
        name: conformance._first_line(report.hpcflow.get(name))
        for name in FIXED + SAMPLE
        if report.verdicts.get(name) != "passed both"
    }
    assert not wrong, report.summary()


def test_the_upstream_differences_are_still_there(report):
    changed = {
        name: report.verdicts.get(name)
        for name in UPSTREAM_DIFFERENCES
        if report.verdicts.get(name) != "only-hpcflow-fails"
    }
    assert not changed, "update UPSTREAM_DIFFERENCES and docs/snakemake.md:\n" + report.summary()
