"""A workflow built in Python: the same document a workflow file holds, made by calls.

``Workflow("name")`` and ``wf.task(...)`` build the mapping a ``workflow.yaml`` holds,
key for key (:meth:`Workflow.to_dict`, :meth:`Workflow.to_yaml`). Everything that
checks, plans and runs it reads that YAML text with the loader ``hpcflow run`` uses, so
a workflow built here and the same workflow written by hand are one plan, fail with the
same errors and run the same way; only the errors' positions differ: they name the
Python call that made the offending part (:mod:`hpcflow.api.callsites`).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpcflow.api.callsites import CallSite, CallSites, caller, relocate
from hpcflow.api.entry_writer import EntryWriter, task_workdir, value_sources
from hpcflow.api.keys import (
    Checkpoint,
    Container,
    Defaults,
    Duration,
    Modules,
    Resources,
    Retries,
    ValueShape,
)
from hpcflow.errors import RunError, SpecError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from hpcflow.api.launch import Engine, ProfileOverrides
    from hpcflow.api.plan import Plan
    from hpcflow.api.run import Counts, Run
    from hpcflow.dag.graph import TaskGraph
    from hpcflow.engine.driver import Observer

#: The first line of every file the API writes: it overwrites only files that have it.
HEADER = (
    "# Written by hpcflow's Python API (hpcflow.api.Workflow): edit the Python, not this file.\n"
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Task:
    """A task of a :class:`Workflow`: give it to another task's ``needs`` or ``from_``."""

    name: str
    #: Its place among the workflow's own tasks (``tasks[index]`` in the file).
    index: int
    workflow: Workflow = field(repr=False, compare=False)

    def __str__(self) -> str:
        return self.name

    @property
    def spec(self) -> dict[str, Any]:
        """Its entry of the workflow document (a copy)."""
        return copy.deepcopy(self.workflow._tasks[self.index])


@dataclass(frozen=True)
class Include:
    """Another workflow file included under a name (``include:``): its tasks are
    named ``NAME.TASK``."""

    name: str
    file: str

    def task(self, name: str) -> str:
        """The name its task ``name`` has in the including workflow (for ``needs``)."""
        return f"{self.name}.{name}"


class Workflow:
    """A workflow, built in Python or read from a file (:meth:`load`).

    ``folder`` is where it lives (default: the current folder): relative paths start
    there, its runs are kept in its ``.hpcflow/``, and :meth:`run` writes the workflow
    to ``file`` in it (default ``NAME.workflow.yaml``). ``defaults`` and ``workdir`` are
    the file's keys of those names.
    """

    def __init__(
        self,
        name: str,
        *,
        folder: str | os.PathLike[str] | None = None,
        file: str | os.PathLike[str] | None = None,
        description: str | None = None,
        defaults: Defaults | None = None,
        workdir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.folder = Path(folder).resolve() if folder is not None else Path.cwd()
        self.file = self.folder / (file if file is not None else default_file_name(name))
        site = caller()
        self._site: CallSite | None = site
        self._head: dict[str, Any] = {"name": name}
        writer = EntryWriter(site)
        for key, value in (("description", description), ("workdir", workdir)):
            if value is not None:
                self._head[key] = writer.plain(value, key)
        if defaults is not None:
            self._head["defaults"] = writer.plain(defaults, "defaults")
        writer.raise_problems()
        self._includes: dict[str, Any] = {}
        self._include_sites: dict[str, CallSite | None] = {}
        self._tasks: list[dict[str, Any]] = []
        self._task_sites: list[CallSite | None] = []
        #: The document and text :meth:`load` read: run as they are while unchanged.
        self._loaded: tuple[dict[str, Any], str] | None = None

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, {len(self._tasks)} task(s), file={str(self.file)!r})"

    @property
    def name(self) -> str:
        return str(self._head["name"])

    @property
    def tasks(self) -> list[Task]:
        """The workflow's own tasks, in order (an include's are in its file)."""
        return [Task(str(t.get("name")), i, self) for i, t in enumerate(self._tasks)]

    def __getitem__(self, name: str) -> Task:
        """The task named ``name``."""
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(name)

    # -- building --------------------------------------------------------------------------

    def task(
        self,
        name: str,
        *,
        command: str | None = None,
        argv: Sequence[str | os.PathLike[str]] | None = None,
        python: str | Callable[..., Any] | None = None,
        description: str | None = None,
        foreach: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        inputs: Sequence[str | os.PathLike[str]] | None = None,
        outputs: Sequence[str | os.PathLike[str]] | None = None,
        needs: Sequence[Task | str] | None = None,
        from_: Mapping[str, Task | str | tuple[Task | str, ValueShape] | Mapping[str, Any]]
        | None = None,
        persist: bool | None = None,
        resources: Resources | None = None,
        retries: int | Retries | None = None,
        timeout: Duration | None = None,
        checkpoint: Checkpoint | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        scratch: bool | None = None,
        container: str | Container | None = None,
        modules: Sequence[str] | Modules | None = None,
        venv: str | os.PathLike[str] | None = None,
        conda: str | os.PathLike[str] | None = None,
    ) -> Task:
        """Add a task (an entry of ``tasks:``; the keywords are its keys, ``from_`` is
        ``from``) and return it.

        Exactly one of ``command`` (run by bash), ``argv`` (a program and its arguments)
        and ``python`` (a function, or ``"module:function"``) says what it runs.
        ``foreach`` is a sweep: a parameter's values as a list or a ``range``, or the
        file's forms (``product``, ``zip``, ``from_files``, ``from_table``). ``needs``
        and ``from_`` take tasks or their names; ``from_={"xs": (task, "dict")}`` gathers
        a sweep's values in a dict. Values are checked when the workflow is validated or
        run, and each error names this call's line.
        """
        site = caller()
        index = len(self._tasks)
        at = f"tasks[{index}]"
        writer = EntryWriter(site)
        entry: dict[str, Any] = {"name": name}
        if python is not None and not isinstance(python, str):
            own_workdir = task_workdir(self.folder, self._head, workdir)
            python = writer.function(python, own_workdir, f"{at}.python")
        given: list[tuple[str, Any]] = [
            ("description", description),
            ("command", command),
            ("argv", argv),
            ("python", python),
            ("foreach", foreach),
            ("params", params),
            ("inputs", inputs),
            ("outputs", outputs),
            ("needs", needs),
            ("from", from_),
            ("persist", persist),
            ("resources", resources),
            ("retries", retries),
            ("timeout", timeout),
            ("checkpoint", checkpoint),
            ("env", env),
            ("workdir", workdir),
            ("scratch", scratch),
            ("container", container),
            ("modules", modules),
            ("venv", venv),
            ("conda", conda),
        ]
        for key, value in given:
            if value is None:
                continue
            if key == "needs":
                self._check_own(value, f"{at}.needs", writer)
            elif key == "from":
                value = value_sources(value)
                self._check_own(value.values(), f"{at}.from", writer)
            writer.task_key(entry, key, value, at)
        writer.raise_problems()
        self._tasks.append(entry)
        self._task_sites.append(site)
        return Task(name, index, self)

    def include(
        self,
        name: str,
        file: str | os.PathLike[str],
        *,
        params: Mapping[str, Any] | None = None,
    ) -> Include:
        """Include another workflow file (or a folder with a ``workflow.yaml``, relative
        to this workflow's folder) under ``name``: its tasks join as ``NAME.TASK``, with
        ``params`` given to the parameters they use (``include:`` in a file)."""
        site = caller()
        writer = EntryWriter(site)
        if name in self._includes:
            writer.problem(f"include.{name}", f"include {name!r} is given twice")
        entry: dict[str, Any] = {"file": os.fspath(file)}
        if params is not None:
            entry["params"] = writer.plain(params, f"include.{name}.params")
        writer.raise_problems()
        self._includes[name] = entry
        self._include_sites[name] = site
        return Include(name, entry["file"])

    # -- the document ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The workflow document, as a ``workflow.yaml`` holds it (a copy)."""
        document = copy.deepcopy(self._head)
        if self._includes:
            document["include"] = copy.deepcopy(self._includes)
        document["tasks"] = copy.deepcopy(self._tasks)
        return document

    def to_yaml(self) -> str:
        """The workflow file's text (what :meth:`run` writes)."""
        return HEADER + yaml.safe_dump(
            self.to_dict(),
            sort_keys=False,
            allow_unicode=True,
            width=100,
            default_flow_style=None,
        )

    def write(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the workflow file to ``path`` (relative to the folder; default
        :attr:`file`) and return where it is. A file with the same text is left as it is
        (so a resumed run sees the same file); a file the API did not write is never
        overwritten (:class:`RunError`)."""
        target = self.folder / path if path is not None else self.file
        text = self._text()
        if target.exists():
            current = target.read_text(encoding="utf-8")
            if current == text:
                return target
            if not current.startswith(HEADER):
                raise RunError(
                    f"{target} exists and was not written by hpcflow's Python API: it is "
                    "not overwritten",
                    hint="write the workflow to another file: Workflow(..., file=NAME) or "
                    "wf.write(PATH)",
                )
        from hpcflow.store.atomic import write_text_atomic

        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, text, mode=0o644)  # the user's workflow, not state
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Workflow:
        """Read the workflow file at ``path`` (validated as ``hpcflow validate`` does,
        its errors naming its lines). Unchanged, it runs from that file; tasks added to
        it are written to another file (``file=``)."""
        from hpcflow.spec.loader import load_workflow

        source = Path(path).resolve()
        loaded = load_workflow(source)
        document = yaml.safe_load(loaded.text)
        workflow = cls.__new__(cls)
        workflow.folder = source.parent
        workflow.file = source
        workflow._site = None
        workflow._head = {k: v for k, v in document.items() if k not in ("include", "tasks")}
        workflow._includes = dict(document.get("include") or {})
        workflow._include_sites = dict.fromkeys(workflow._includes)
        workflow._tasks = list(document["tasks"])
        workflow._task_sites = [None] * len(workflow._tasks)
        workflow._loaded = (copy.deepcopy(document), loaded.text)
        return workflow

    # -- checking, planning, running -----------------------------------------------------

    def validate(self) -> TaskGraph:
        """Check the workflow as ``hpcflow validate`` does (keys, types, placeholders,
        dependencies, cycles, inputs no task makes that do not exist) and return its
        plan: every task instance (``.instances``) with its dependencies. Raises
        :class:`~hpcflow.errors.SpecError` naming the Python call of each problem."""
        from hpcflow.dag.graph import build_graph

        with self._errors_at_calls():
            return build_graph(self._parse())

    def plan(
        self,
        profile: str | None = None,
        *,
        force: bool = False,
        rerun: Sequence[str] = (),
        **overrides: Unpack[ProfileOverrides],
    ) -> Plan:
        """What :meth:`run` would run, and why, with its cost (``hpcflow run
        --dry-run``): writes the workflow file, runs nothing."""
        from hpcflow.api.launch import RunRequest, plan_run
        from hpcflow.api.plan import plan_of

        path = self._write_checked()
        request = RunRequest(
            profile, dict(overrides), force=force, rerun=tuple(rerun), dry_run=True
        )
        with self._errors_at_calls():
            return plan_of(plan_run(path, request))

    def run(
        self,
        profile: str | None = None,
        *,
        force: bool = False,
        rerun: Sequence[str] = (),
        run_dir: str | os.PathLike[str] | None = None,
        workers: int | None = None,
        threads: int | None = None,
        engine: Engine = "auto",
        detach: bool = False,
        observer: Observer | Callable[[Counts], None] | None = None,
        **overrides: Unpack[ProfileOverrides],
    ) -> Run:
        """Write the workflow file and run it, as ``hpcflow run FILE`` would, and return
        the run. A run again resumes: tasks up to date are not run again.

        ``profile`` is where it runs (a site profile's name or file; default
        ``$HPCFLOW_PROFILE``, else this machine), ``overrides`` its settings of the run's
        allocation (``nodes``, ``partition``, ``account``, ``walltime``, ``mode``,
        ``transport``). ``force`` runs every task; ``rerun`` the tasks whose id or name
        matches a glob, and what depends on them. ``observer`` (a callable, or an object
        with ``update``) gets the task counts as they change. ``detach`` (pilot mode)
        returns once the allocation is submitted: :meth:`Run.wait` then waits for it.
        Ctrl-C cancels the run. Raises :class:`~hpcflow.errors.SpecError` naming the
        Python call of each problem.
        """
        from hpcflow.api.launch import RunRequest, run_workflow
        from hpcflow.api.run import Run

        path = self._write_checked()
        request = RunRequest(
            profile,
            dict(overrides),
            run_dir=Path(run_dir) if run_dir is not None else None,
            force=force,
            rerun=tuple(rerun),
            workers=workers,
            threads=threads,
            engine=engine,
            detach=detach,
        )
        with self._errors_at_calls():
            summary = run_workflow(path, request, observer=_observer(observer))
        return Run(summary.paths.run_dir)

    def runs(self) -> list[Run]:
        """This workflow file's runs, oldest first."""
        from hpcflow.api.run import runs

        return [run for run in runs(self.folder) if run.workflow == self.file]

    # -- helpers ----------------------------------------------------------------------------

    def _text(self) -> str:
        """The text to check and run: the file read by :meth:`load` while the document
        is unchanged, else :meth:`to_yaml`."""
        if self._loaded is not None and self._loaded[0] == self.to_dict():
            return self._loaded[1]
        return self.to_yaml()

    def _parse(self) -> Any:
        from hpcflow.spec.loader import parse_workflow

        return parse_workflow(self._text(), str(self.file), source=self.file)

    def _write_checked(self) -> Path:
        """Check the document (so that no broken file is written), then write it."""
        with self._errors_at_calls():
            self._parse()
        return self.write()

    @contextmanager
    def _errors_at_calls(self) -> Iterator[None]:
        """Re-raise a :class:`SpecError` about the workflow's text with its problems at
        the Python calls that made the parts they are about."""
        try:
            yield
        except SpecError as exc:
            sites = CallSites(self._site, list(self._task_sites), dict(self._include_sites))
            raise relocate(exc, str(self.file), sites) from None

    def _check_own(self, tasks: Any, where: str, writer: EntryWriter) -> None:
        """Tasks given to ``needs`` or ``from_`` must be this workflow's."""
        for item in tasks:
            task = item[0] if isinstance(item, tuple) else item
            if isinstance(task, Mapping):
                task = task.get("task")
            if isinstance(task, Task) and task.workflow is not self:
                writer.problem(
                    where,
                    f"task {task.name!r} belongs to another workflow ({task.workflow.name!r})",
                    hint="give its name instead if it is included here, or add the "
                    "task to this workflow",
                )


def load(path: str | os.PathLike[str]) -> Workflow:
    """Read the workflow file at ``path`` (:meth:`Workflow.load`)."""
    return Workflow.load(path)


def default_file_name(name: str) -> str:
    """The file a workflow named ``name`` is written to in its folder."""
    return f"{_UNSAFE.sub('_', name).strip('._') or 'workflow'}.workflow.yaml"


def _observer(observer: Observer | Callable[[Counts], None] | None) -> Observer | None:
    """An engine observer from a callable (or an observer as it is)."""
    if observer is None or hasattr(observer, "update"):
        return observer  # type: ignore[return-value]
    return _Callback(observer)  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Callback:
    """Calls a function with the task counts each time they change (a copy of its own,
    without the states no task is in, as :meth:`Run.counts` has them)."""

    function: Callable[[Counts], None]

    def update(self, counts: Counts) -> None:
        self.function(
            {name: {s: n for s, n in by_state.items() if n} for name, by_state in counts.items()}
        )
