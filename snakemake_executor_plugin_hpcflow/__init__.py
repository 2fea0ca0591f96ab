"""Snakemake executor plugin: ``snakemake --executor hpcflow`` runs Snakemake jobs in hpcflow.

Snakemake finds this package by its name (``snakemake_executor_plugin_<name>``) and reads
three attributes: ``common_settings`` (how Snakemake prepares job commands),
``ExecutorSettings`` (the ``--hpcflow-...`` flags) and ``Executor``. Written against
snakemake-interface-executor-plugins 9.x (``>=9.4,<10``).
"""

from snakemake_interface_executor_plugins.settings import CommonSettings

from snakemake_executor_plugin_hpcflow.executor import Executor
from snakemake_executor_plugin_hpcflow.settings import ExecutorSettings

common_settings = CommonSettings(
    # Jobs run in other processes (Dask workers), started through Snakemake's own job
    # command (`python -m snakemake --mode remote ...`).
    non_local_exec=True,
    # hpcflow runs jobs where the run directory is: a shared file system.
    implies_no_shared_fs=False,
    job_deploy_sources=False,
    pass_default_storage_provider_args=True,
    # The executor passes them itself, as written (Snakemake's copy turns mem_mib into
    # mem_mb with the MiB number: executor.default_resource_args).
    pass_default_resources_args=False,
    # Workers do not inherit the Snakemake process's environment in an allocation, so
    # declared --envvars travel inside the command.
    pass_envvar_declarations_to_cmd=True,
    auto_deploy_default_storage_provider=False,
    # Checking a job is reading an in-memory Dask future: start at once.
    init_seconds_before_status_checks=0,
)

__all__ = ["Executor", "ExecutorSettings", "common_settings"]
