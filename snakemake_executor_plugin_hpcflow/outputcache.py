"""Snakemake's between-workflow output cache (``--cache``), kept by the main process.

Snakemake's local executor fetches a cached job's outputs before running it and stores
them after it (``cached_or_run`` in ``snakemake/executors/local.py``), in the main
process: the cache's key is the job's provenance hash over the main process's DAG. A job
that stores its own outputs from a job process computes that hash over its own partial
DAG (``--target-jobs``, ``--allowed-rules``), which differs: its outputs are stored
under other keys (Snakemake's ``test_output_file_cache``).

In local mode, where Snakemake takes the plugin for a local executor, the plugin does as
the local executor does for a single job of a cached rule: :func:`fetch` before the job
is sent (a hit: the job is done, nothing runs), ``--cache`` left out of the job's command
(:func:`without_cache`) and :func:`store` after the job succeeded. A group job (in
local mode only a ``pipe``/``service`` group) caches in its own Snakemake, as before.
"""

from __future__ import annotations

from typing import Any

from snakemake_executor_plugin_hpcflow.upstream import without_option


def kept_by_main(workflow: Any, job: Any) -> bool:
    """Whether the main process fetches and stores ``job``'s outputs: local mode, ``--cache``
    given, a single job of a rule whose outputs are cached (the local executor's test)."""
    if not getattr(workflow, "local_exec", False) or job.is_group():
        return False
    settings = getattr(workflow, "workflow_settings", None)
    cache = getattr(getattr(job, "rule", None), "cache", None)
    return getattr(settings, "cache", None) is not None and bool(cache and cache.output)


def fetch(workflow: Any, job: Any) -> bool:
    """Put ``job``'s outputs in place from the cache; False when they are not cached."""
    from snakemake.exceptions import CacheMissException

    try:
        workflow.async_run(job.rule.cache.fetch(job))
    except CacheMissException:
        return False
    return True


async def store(job: Any) -> None:
    """Move ``job``'s outputs into the cache (links left in their place)."""
    await job.rule.cache.store(job)


def without_cache(command: str, general_args: str) -> str | None:
    """``command`` (built with ``general_args``) with ``--cache`` and its rules left out
    of the general arguments; None where ``general_args`` is not part of it as written."""
    if general_args not in command:
        return None
    return command.replace(general_args, without_option(general_args, "--cache"), 1)
