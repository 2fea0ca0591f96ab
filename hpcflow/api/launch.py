"""Running a workflow file: what ``hpcflow run`` and ``Workflow.run`` both do.

:func:`plan_run` resolves the profile (and, started inside an allocation without one,
the allocation's layout), loads the workflow and decides what must run, taking the
workflow's lock; :meth:`RunPlan.execute` then hands it to the mode that runs it (local,
pilot, jobs or elastic) and returns how the run ended. The command line adds only its
display: the live table, the plan of a dry run, the summary.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from hpcflow.engine.lifecycle import RunSummary
from hpcflow.errors import RunError
from hpcflow.store.paths import RunPaths

if TYPE_CHECKING:  # imported when a run is planned (a settled run never is) or driven
    from hpcflow.engine.driver import Observer
    from hpcflow.engine.prepare import PreparedRun, RunOptions
    from hpcflow.settings.profile import Profile

log = logging.getLogger(__name__)

#: The variable that names the profile when none is given (as ``hpcflow run`` reads it).
PROFILE_VARIABLE = "HPCFLOW_PROFILE"

#: Local runs' engines: ``auto`` takes the pool unless more than one worker is asked for.
Engine = Literal["auto", "pool", "dask"]


class ProfileOverrides(TypedDict, total=False):
    """Settings of the profile a run may override (``hpcflow run --nodes 4 ...``)."""

    nodes: int
    partition: str
    account: str
    walltime: str
    mode: Literal["pilot", "jobs", "elastic"]
    transport: Literal["tcp", "tls", "ucx"]


@dataclass(frozen=True)
class RunRequest:
    """What a run is asked to do: ``hpcflow run``'s options, as data.

    ``profile`` None takes ``$HPCFLOW_PROFILE``, else ``local`` (or, inside an
    allocation with ranks to spare, the allocation itself). ``overrides`` values that
    are None count as not given.
    """

    profile: str | None = None
    overrides: Mapping[str, object] = field(default_factory=dict)
    run_dir: Path | None = None
    force: bool = False
    rerun: tuple[str, ...] = ()
    workers: int | None = None
    threads: int | None = None
    engine: Engine | str = "auto"
    dry_run: bool = False
    detach: bool = False


#: Told each batch submission: its id (or the worker jobs' name) and the run's paths.
OnSubmit = Callable[[str, RunPaths], None]


@dataclass
class RunPlan:
    """A run decided and ready to go: the profile it runs with, the workflow loaded with
    what must run (``prepared``), and, inside an allocation, its layout."""

    request: RunRequest
    profile: Profile
    options: RunOptions
    prepared: PreparedRun
    layout: dict[str, int] | None = None

    @property
    def order(self) -> list[str]:
        """The task names in the order of the workflow (a progress display's rows),
        then those not planned yet (a fan-out: they are planned during the run)."""
        graph = self.prepared.graph
        later = [graph.templates[i].spec.name for i in sorted(graph.waiting)]
        return [*graph.counts_by_task(), *later]

    def execute(
        self, observer: Observer | None = None, on_submit: OnSubmit | None = None
    ) -> RunSummary:
        """Run it, in the mode its profile takes; ``observer`` gets the task counts as
        they change, ``on_submit`` each batch submission. Ctrl-C ends the run as
        cancelled (the summary says so)."""
        from hpcflow.modes.registry import mode_of

        if self.request.dry_run:
            raise RunError("a dry run runs nothing", hint="plan it again without dry_run")
        if self.layout is None and mode_of(self.profile) == "local":
            from hpcflow.modes.local import run_local

            return run_local(self.prepared, self.options, observer=observer)
        from hpcflow.backends.registry import get_backend
        from hpcflow.modes.follow import Follow
        from hpcflow.modes.registry import runner_for

        if self.layout is not None:
            from hpcflow.modes.pilot import run_pilot

            slurm = resolve_run_profile("slurm", self.request.overrides)
            return run_pilot(
                self.prepared,
                self.options,
                slurm,
                get_backend("allocation"),
                Follow(observer=observer),
                layout=self.layout,
            )
        backend = get_backend(self.profile.backend, profile=self.profile)
        follow = Follow(observer=observer, detach=self.request.detach, on_submit=on_submit)
        return runner_for(mode_of(self.profile))(
            self.prepared, self.options, self.profile, backend, follow
        )


def plan_run(workflow: Path, request: RunRequest) -> RunPlan:
    """Resolve the profile, load ``workflow`` and decide what must run.

    A real run takes the workflow's lock here (released when the run ends); a dry run
    writes nothing and holds nothing. Raises :class:`~hpcflow.errors.SpecError` for a
    bad workflow, :class:`~hpcflow.errors.ProfileError` for a bad profile or override,
    :class:`~hpcflow.errors.RunLockedError` while another run of it is active.
    """
    from hpcflow.engine.prepare import RunOptions, prepare
    from hpcflow.envs.site import SiteEnvironment
    from hpcflow.modes.registry import mode_of

    profile_name = request.profile or os.environ.get(PROFILE_VARIABLE) or None
    layout = None
    if profile_name is None and not request.dry_run:
        from hpcflow.launchers.environment import allocation_layout

        # Inside an allocation (sbatch script, salloc) with ranks to spare: boot on them.
        layout = allocation_layout(os.environ)
        if layout is not None and (layout["ntasks"] < 3 or "HPCFLOW_RUN_ID" in os.environ):
            layout = None
    profile = resolve_run_profile(profile_name or "local", request.overrides)
    options = RunOptions(
        run_dir=request.run_dir,
        force=request.force,
        rerun=request.rerun,
        workers=request.workers,
        threads=request.threads,
        engine=request.engine,
        dry_run=request.dry_run,
        site=SiteEnvironment.from_profile(
            profile, commands_here=layout is not None or mode_of(profile) == "local"
        ),
    )
    prepared = prepare(workflow, options, take_lock=not request.dry_run)
    if request.dry_run:
        prepared.memo.close()
    return RunPlan(request, profile, options, prepared, layout)


def settled_run(workflow: Path, request: RunRequest) -> tuple[RunSummary, list[str]] | None:
    """A local run of ``workflow`` recorded at once, every task cached, when ``request``
    names no profile, override, run directory, force, rerun, dry run or detach and the
    workflow is as it was when a run left every task up to date, with every task's
    outputs as they were (:mod:`hpcflow.modes.settled`): its summary and task names in
    the workflow's order. None otherwise: plan it (:func:`plan_run`).
    """
    given = any(value is not None for value in request.overrides.values())
    if given or request.profile or request.run_dir or request.force or request.rerun:
        return None
    if request.dry_run or request.detach:
        return None
    from hpcflow.modes.settled import resume_settled

    return resume_settled(
        workflow, workers=request.workers, threads=request.threads, engine=request.engine
    )


def run_workflow(
    workflow: Path,
    request: RunRequest,
    observer: Observer | None = None,
    on_submit: OnSubmit | None = None,
) -> RunSummary:
    """Plan and execute a run of the workflow file ``workflow`` (:func:`plan_run`, then
    :meth:`RunPlan.execute`)."""
    return plan_run(workflow, request).execute(observer, on_submit)


def resolve_run_profile(name: str, overrides: Mapping[str, object]) -> Profile:
    """The profile ``name`` with a run's ``overrides`` on top (None: not given), each
    reported as coming from its ``--flag`` (``hpcflow profiles show``)."""
    from hpcflow.settings import resolve_profile

    flags = {key: f"--{key}" for key in overrides}
    return resolve_profile(name, overrides=overrides, flags=flags).profile
