"""What the plugin amends in Snakemake's remote-job path, which drops or garbles things a
job's result depends on (Snakemake 9.x, ``snakemake_interface_executor_plugins`` 9.x).

A job runs as ``python -m snakemake --mode remote ...`` (``--mode subprocess`` in local
mode) built by Snakemake's job-command builder (``format_job_exec``, ``general_args``); the
main process then checks and cleans up after it. hpcflow's jobs always see the main
process's files (its run directory is on the same file system), so the plugin can put back
what that path loses:

- options the builder does not pass on or passes wrongly (:func:`job_command_extras`);
- ``--unneeded-temp-files``, left out (:func:`without_option`) so that temp outputs are
  checked, then removed, by the main process;
- the previous version of an ``update()`` output after a failed job
  (:func:`keep_restored_updates`).

docs/snakemake.md lists what cannot be amended here.
"""

from __future__ import annotations

import logging
import os
import shlex
from pathlib import Path
from typing import Any

from snakemake_interface_executor_plugins.utils import format_cli_arg

log = logging.getLogger(__name__)


def without_option(args: str, option: str) -> str:
    """``args`` (shell words) without ``option`` and the values that follow it."""
    if option not in args:
        return args
    words = shlex.split(args)
    kept: list[str] = []
    skipping = False
    for word in words:
        if word == option:
            skipping = True
            continue
        if skipping and not word.startswith("-"):
            continue
        skipping = False
        kept.append(word)
    return " ".join(shlex.quote(word) for word in kept)


def job_command_extras(workflow: Any) -> list[str]:
    """Options of the main Snakemake that its job-command builder (``general_args``) does
    not pass on, or passes wrongly, though a job's result depends on them:

    - ``--replace-workflow-config`` (without it the job merges ``--config`` into the
      Snakefile's ``configfile:`` where the main process replaced it);
    - ``--default-resources`` as the user wrote them (:func:`default_resource_args`;
      ``common_settings.pass_default_resources_args`` is off, so this is the only copy).
    """
    extras: list[str] = []
    config_settings = getattr(workflow, "config_settings", None)
    if getattr(config_settings, "replace_workflow_config", False):
        extras.append("--replace-workflow-config")
    resource_settings = getattr(workflow, "resource_settings", None)
    parsed = getattr(resource_settings, "_parsed_default_resources", None)
    if parsed is not None:
        extras.append(
            format_cli_arg("--default-resources", default_resource_args(parsed), base64_encode=True)
        )
    return [extra for extra in extras if extra]


def default_resource_args(resources: Any) -> list[str]:
    """``NAME=EXPRESSION`` for each default resource, as the main process parsed it.

    Snakemake's own ``Resources.args`` (9.x) writes a ``_mib`` resource under its
    standardized ``_mb`` name with the MiB expression (``mem_mib=953.67`` becomes
    ``mem_mb=953.67``: the job then has 954 MB where the main process has 1000): such a
    resource is written back as ``_mib``.
    """
    args: list[str] = []
    for name, resource in getattr(resources, "_data", {}).items():
        raw = getattr(resource, "raw", None)
        if raw is None:
            continue
        if name.endswith("_mb") and _converts_from_mib(resource):
            name = name[: -len("_mb")] + "_mib"
        args.append(f"{name}={raw}")
    return args


def _converts_from_mib(resource: Any) -> bool:
    """Whether Snakemake standardized ``resource`` from a ``_mib`` value (its evaluator
    wraps ``snakemake.resources.mib_to_mb``)."""
    try:
        from snakemake.resources import mib_to_mb
    except ImportError:
        return False
    evaluator = getattr(resource, "_evaluator", None)
    cells = getattr(evaluator, "__closure__", None) or ()
    for cell in cells:
        try:
            if cell.cell_contents is mib_to_mb:
                return True
        except ValueError:  # an empty cell
            continue
    return False


def keep_restored_updates(job: Any, workflow: Any) -> None:
    """After ``job`` failed: give each ``update()`` output that is there and has no backup
    a backup again, so that the main process keeps it.

    The job's own Snakemake backs such an output up before the job and, when the job
    fails, restores it (using the backup up); the main process then finds no backup to
    restore and removes the output as incomplete. With the local executor the previous
    version stays. A backup still there (the job was killed before restoring) is left
    alone: the main process restores from it.
    """
    persistence = getattr(workflow, "persistence", None)
    backup_path = getattr(persistence, "_get_backup_path", None)
    if persistence is None or backup_path is None:
        return
    try:
        from snakemake.io import is_flagged
    except ImportError:
        return
    members = list(getattr(job, "jobs", ())) if job.is_group() else [job]
    for member in members:
        for output in getattr(member, "output", ()):
            if not is_flagged(output, "update"):
                continue
            path = Path(str(output))
            try:
                if os.path.lexists(path) and not backup_path(path).exists():
                    persistence.backup_output(path)
            except OSError as exc:
                log.warning("could not keep the previous version of %s: %s", path, exc)
