"""How a site runs containers and loads modules: the profile's settings, as plain data
that travels to wherever tasks are started (a pilot's driver, a batch job)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpcflow.settings.profile import Profile

#: The command each runtime is started with, unless the profile names another.
COMMANDS = {
    "apptainer": "apptainer",
    "singularity": "singularity",
    "charliecloud": "ch-run",
    "podman": "podman",
}


@dataclass(frozen=True)
class SiteEnvironment:
    """The profile's container and module settings (``container_*``, ``modules_init``),
    and where tasks' logs and scratch folders go (``task_logs``, ``scratch_dir``)."""

    runtime: str = "apptainer"
    commands: dict[str, str] = field(default_factory=dict)
    binds: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    cache: str | None = None
    modules_init: str | None = None
    #: Whether the runtimes' commands are to be found where the run starts (local runs);
    #: in batch modes tasks start on compute nodes, which may have other commands.
    commands_here: bool = True
    #: ``per-task`` (a file per attempt and stream) or ``per-worker`` (records in a file
    #: per worker process: :mod:`hpcflow.store.tasklogs`).
    task_logs: str = "per-task"
    #: Where ``scratch: true`` tasks get their folder on the node ($VARS expanded there;
    #: "": ``$SLURM_TMPDIR``, ``$TMPDIR`` or the system's temporary folder).
    scratch_dir: str = ""

    @classmethod
    def from_profile(cls, profile: Profile, *, commands_here: bool = True) -> SiteEnvironment:
        return cls(
            runtime=profile.container_runtime,
            commands=dict(profile.container_commands),
            binds=tuple(profile.container_binds),
            options=tuple(profile.container_options),
            cache=profile.container_cache,
            modules_init=profile.modules_init,
            commands_here=commands_here,
            task_logs=profile.task_logs,
            scratch_dir=profile.scratch_dir or "",
        )

    def command(self, runtime: str) -> str:
        """The command that starts ``runtime`` on this site."""
        return self.commands.get(runtime) or COMMANDS[runtime]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for a pilot's config or a job's manifest."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> SiteEnvironment:
        if not data:
            return cls()
        return cls(
            **{
                **data,
                "binds": tuple(data.get("binds", ())),
                "options": tuple(data.get("options", ())),
            }
        )
