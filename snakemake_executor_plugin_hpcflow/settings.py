"""The plugin's settings: each field becomes a ``--hpcflow-<field>`` flag of ``snakemake``.

Snakemake builds the flags from this dataclass (field name, ``_`` → ``-``); every field
needs a ``help`` text and a default, and its type must be plain or ``Optional[...]``.
"""

from dataclasses import dataclass, field

# The interface parses Optional[...] but not `X | None`: keep the old spelling.
from typing import Optional

from snakemake_interface_executor_plugins.settings import CommonSettings, ExecutorSettingsBase

MODES = ("local", "pilot", "elastic")
RUNNERS = ("warm", "command")
TRANSPORTS = ("tcp", "tls", "ucx")

#: How Snakemake prepares and schedules this plugin's jobs (the package's
#: ``common_settings``). ``non_local_exec`` follows the mode of the :class:`ExecutorSettings`
#: made last (:meth:`ExecutorSettings.__post_init__`): local mode is a local executor to
#: Snakemake, the batch modes are not.
common_settings = CommonSettings(
    non_local_exec=False,
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


@dataclass
class ExecutorSettings(ExecutorSettingsBase):
    """How ``snakemake --executor hpcflow`` runs its jobs."""

    mode: str = field(
        default="local",
        metadata={
            "help": "where jobs run: 'local' (an hpcflow-owned Dask cluster on this machine), "
            "'pilot' (ONE batch allocation for the whole Snakemake run, started by the plugin "
            "and reused by every job) or 'elastic' (Dask workers come and go as batch jobs, "
            "between the profile's min_workers and max_workers; the scheduler runs here)",
            "choices": list(MODES),
            "env_var": False,
            "required": False,
        },
    )
    profile: Optional[str] = field(  # noqa: UP045
        default=None,
        metadata={
            "help": "hpcflow profile (name or path, see `hpcflow profiles`) that shapes the "
            "allocation (pilot mode) or the worker jobs (elastic mode); default "
            "$HPCFLOW_PROFILE, else 'slurm'",
            "env_var": False,
            "required": False,
        },
    )
    nodes: Optional[int] = field(  # noqa: UP045
        default=None,
        metadata={
            "help": "pilot mode: nodes of the allocation (overrides the profile)",
            "type": int,
            "env_var": False,
            "required": False,
        },
    )
    walltime: Optional[str] = field(  # noqa: UP045
        default=None,
        metadata={
            "help": "pilot mode: walltime of the allocation, e.g. '2h' or '02:00:00' "
            "(overrides the profile)",
            "env_var": False,
            "required": False,
        },
    )
    transport: Optional[str] = field(  # noqa: UP045
        default=None,
        metadata={
            "help": "pilot/elastic mode: how the plugin and the Dask processes talk: 'tls' "
            "(per-run certificates; the default on shared machines), 'tcp' or 'ucx' (pilot "
            "only)",
            "choices": list(TRANSPORTS),
            "env_var": False,
            "required": False,
        },
    )
    partition: Optional[str] = field(  # noqa: UP045
        default=None,
        metadata={
            "help": "pilot/elastic mode: partition (SLURM) or queue (PBS) of the allocation",
            "env_var": False,
            "required": False,
        },
    )
    account: Optional[str] = field(  # noqa: UP045
        default=None,
        metadata={
            "help": "pilot/elastic mode: account charged for the allocation (or worker jobs)",
            "env_var": False,
            "required": False,
        },
    )
    poll_interval: float = field(
        default=0.5,
        metadata={
            "help": "seconds between checks of the running jobs; a check reads hpcflow's "
            "in-memory Dask futures and never queries the batch system",
            "env_var": False,
            "required": False,
        },
    )
    runner: str = field(
        default="warm",
        metadata={
            "help": "how a worker runs a job: 'warm' (a runner per worker that has imported "
            "Snakemake and loaded the workflow once forks a process per job; jobs it cannot "
            "take run their command) or 'command' (Snakemake's own job command, `python -m "
            "snakemake ...`, for every job)",
            "choices": list(RUNNERS),
            "env_var": False,
            "required": False,
        },
    )

    local_groups: bool = field(
        default=False,
        metadata={
            "help": "local mode: form Snakemake's group jobs (`group:`, --groups), each run as "
            "one hpcflow task, as in the batch modes; Snakemake then takes the plugin for a "
            "remote executor (it needs --jobs, and a group's {groupid} is its UUID). Without "
            "it, local mode is a local executor to Snakemake, which runs no group jobs but "
            "pipe and service groups",
            "env_var": False,
            "required": False,
        },
    )

    @property
    def local_exec(self) -> bool:
        """Whether Snakemake takes the plugin for a local executor with these settings."""
        return self.mode == "local" and not self.local_groups

    def __post_init__(self) -> None:
        # Snakemake makes the settings before it reads common_settings: the command line
        # in cli.args_to_api (get_settings, then common_settings.local_exec), the API in
        # DAGApi.execute_workflow (validate_settings, then common_settings).
        common_settings.non_local_exec = not self.local_exec
