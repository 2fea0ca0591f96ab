"""The plugin's settings: each field becomes a ``--hpcflow-<field>`` flag of ``snakemake``.

Snakemake builds the flags from this dataclass (field name, ``_`` → ``-``); every field
needs a ``help`` text and a default, and its type must be plain or ``Optional[...]``.
"""

from dataclasses import dataclass, field

# The interface parses Optional[...] but not `X | None`: keep the old spelling.
from typing import Optional

from snakemake_interface_executor_plugins.settings import ExecutorSettingsBase

MODES = ("local", "pilot", "elastic")
RUNNERS = ("warm", "command")
TRANSPORTS = ("tcp", "tls", "ucx")


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
            "snakemake --mode remote ...`, for every job)",
            "choices": list(RUNNERS),
            "env_var": False,
            "required": False,
        },
    )
