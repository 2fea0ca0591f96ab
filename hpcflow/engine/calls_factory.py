"""Turns a task instance into a :class:`TaskCall` (rendering its command) and a fingerprint."""

from __future__ import annotations

import hashlib
import json
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]

from hpcflow.dag.graph import TaskGraph
from hpcflow.dag.instances import TaskInstance
from hpcflow.envs.environments import Environments, TaskEnvironment
from hpcflow.envs.worker_code import ensure_worker_code
from hpcflow.launchers import task_prefix
from hpcflow.spec.models import Resources
from hpcflow.spec.placeholders import BUILTINS, Template, value_text
from hpcflow.spec.shell_context import ShellTemplate
from hpcflow.store.paths import RunPaths, task_slug
from hpcflow.worker.calls import TaskCall, ValuesIn
from hpcflow.worker.scratch import inside

#: What json.dumps writes for a string (ASCII only, as its default ``ensure_ascii``).
_json_str = encode_basestring_ascii

#: (kind, rendered shell command, rendered argv) of a task.
Action = tuple[str, str | None, list[str] | None]


@dataclass(frozen=True)
class TaskLaunch:
    """How MPI tasks (ranks > 1) start inside an allocation: what a pilot's config or a
    job's manifest says; the default starts them as they are."""

    #: "srun", "mpirun" or None (as is).
    mpi_launcher: str | None = None
    mpi: str = "pmix"
    #: Starts an MPI task that fits on one worker on the worker's own node (e.g. Open
    #: MPI's ``mpirun --mca plm isolated``; ``-n RANKS`` is added), instead of a step.
    local_mpi_launch: list[str] | None = None
    #: The most ranks such a task may have: one worker's slots.
    local_mpi_ranks: int = 0


@dataclass
class CallFactory:
    """Renders calls for one graph; parses each task's templates once.

    Built with everything it renders from; a later stage that learns more (the run's
    folder and journal, once the run is created) makes a new one (:meth:`for_run`)."""

    graph: TaskGraph
    paths: RunPaths | None = None
    #: How MPI tasks start inside an allocation.
    launch: TaskLaunch = field(default_factory=TaskLaunch)
    _commands: dict[int, ShellTemplate] = field(default_factory=dict)
    _argv: dict[int, list[Template]] = field(default_factory=dict)
    _env: dict[int, dict[str, Template]] = field(default_factory=dict)
    #: Where the run's journal of successes starts (:mod:`hpcflow.worker.journal`);
    #: "" keeps none.
    journal: str = ""
    _slugs: dict[int, str] = field(default_factory=dict)
    #: The fingerprint call() computed for each task in flight (rendered once per attempt).
    _fingerprints: dict[int, str] = field(default_factory=dict)
    #: Producers (``from:``) that this run does not run: the run that holds each value.
    value_runs: dict[int, RunPaths] = field(default_factory=dict)
    _received: set[int] | None = None
    _key_file: str | None = None
    #: The tasks' software environments (containers, modules, venvs) on this site.
    environments: Environments = field(default_factory=Environments)
    #: Tasks whose last attempt its checkpoint signal interrupted: they run again with
    #: HPCFLOW_CONTINUATION=1.
    continued: set[int] = field(default_factory=set)

    def for_run(self, paths: RunPaths, journal: str) -> CallFactory:
        """This factory for the run in ``paths``, whose journal of successes starts at
        ``journal`` (what it parsed and decided so far kept)."""
        return replace(self, paths=paths, journal=journal)

    def grow(self, graph: TaskGraph) -> None:
        """Render the calls of ``graph`` from now on: the run's graph grown by tasks
        planned during the run (same task definitions; instances keep their numbers)."""
        self.graph = graph
        self._received = None

    def _value_key(self) -> str:
        """The run's value key file, for the calls that values flow through."""
        if self._key_file is None:
            if self.paths is None:
                raise RuntimeError("CallFactory needs run paths to locate values")
            self._key_file = str(self.paths.value_key)
        return self._key_file

    def launched_locally(self, resources: Resources) -> bool:
        """Whether an MPI task with ``resources`` starts on its worker's own node (with
        :attr:`TaskLaunch.local_mpi_launch`), holding ``ranks`` of the worker's slots, rather than
        as a launcher step: one node, and no more ranks than one worker's slots, in a
        pilot whose workers srun started (a worker that mpirun started carries that
        launch's variables, and an mpirun of the task's would take itself for its rank)."""
        launch = self.launch
        return bool(
            launch.local_mpi_launch
            and launch.mpi_launcher == "srun"
            and resources.ranks > 1
            and (resources.nodes or 1) == 1
            and resources.ranks <= launch.local_mpi_ranks
        )

    def held_cpus(self, resources: Resources) -> int:
        """The worker slots a task holds while it runs: its cpus; an MPI task started in
        the worker's own process tree also its ranks (a step holds only its cpus there)."""
        if self.launch.mpi_launcher and not self.launched_locally(resources):
            return resources.cpus
        return max(resources.cpus, resources.ranks)

    def _values(self, inst: TaskInstance) -> dict[str, object]:
        values: dict[str, object] = dict(inst.params)
        values["inputs"] = list(inst.inputs)
        values["outputs"] = list(inst.outputs)
        if self.graph.template(inst).spec.scratch:
            # Run in a scratch folder (hpcflow.worker.scratch): what lies in the task's
            # folder is named relative to it, so that it resolves in the scratch folder.
            values["inputs"] = [scratch_path(p, inst.workdir) for p in inst.inputs]
            values["outputs"] = [scratch_path(p, inst.workdir) for p in inst.outputs]
        return values

    def action(self, inst: TaskInstance) -> Action:
        """(kind, rendered shell command, rendered argv) of ``inst``."""
        template = self.graph.template(inst)
        spec = template.spec
        if spec.command is not None:
            parsed = self._commands.get(inst.spec_index)
            if parsed is None:
                parsed = self._commands[inst.spec_index] = ShellTemplate.parse(spec.command)
            # A command that names neither {inputs} nor {outputs} needs only the parameters.
            values = inst.params if BUILTINS.isdisjoint(parsed.names) else self._values(inst)
            # Each value quoted for its place in bash's quoting (hpcflow.spec.shell_context).
            return "shell", parsed.render(values), None
        if spec.argv is not None:
            parts = self._argv.get(inst.spec_index)
            if parts is None:
                parts = self._argv[inst.spec_index] = [Template.parse(a) for a in spec.argv]
            values = self._values(inst)
            argv: list[str] = []
            for part in parts:
                if part.parts in (("", "inputs", ""), ("", "outputs", "")):
                    argv.extend(str(v) for v in values[part.parts[1]])  # type: ignore[attr-defined]
                else:
                    argv.append(part.render(values, value_text))
            return "argv", None, argv
        return "python", None, None

    def env(self, inst: TaskInstance) -> dict[str, str]:
        template = self.graph.template(inst)
        if not template.env:
            return {}
        parsed = self._env.get(inst.spec_index)
        if parsed is None:
            parsed = self._env[inst.spec_index] = {
                k: Template.parse(v) for k, v in template.env.items()
            }
        return {k: t.render(inst.params, value_text) for k, t in parsed.items()}

    def environment(self, inst: TaskInstance) -> TaskEnvironment | None:
        """The software environment ``inst`` runs in (None: the worker's own)."""
        template = self.graph.template(inst)
        if template.software is None:
            return None
        return self.environments.of(
            inst.spec_index, template.software, template.base_dir, template.resources.gpus > 0
        )

    def fingerprint(self, inst: TaskInstance) -> str:
        """A hash of everything that defines what the task does (not of its input data).

        Uses what :meth:`call` computed for the task, if it did, instead of rendering again.
        """
        known = self._fingerprints.pop(inst.index, None)
        if known is not None:
            return known
        return self._fingerprint(inst, self.action(inst), self.env(inst))

    def _fingerprint(self, inst: TaskInstance, action: Action, env: dict[str, str]) -> str:
        kind, command, argv = action
        spec = self.graph.template(inst).spec
        payload: list[object] = [
            kind,
            command,
            argv,
            spec.python,
            _jsonable(inst.params) if kind == "python" else None,
            env,
            inst.workdir,
            inst.outputs,  # (written as a list)
        ]
        software = self.environment(inst)
        if software is not None:  # as with values: other fingerprints stay as they were
            payload.append(["software", *software.identity])
        if inst.values:  # only then: the fingerprints of every other task stay as they were
            payload.append(
                {
                    name: [arg.shape, [self.graph.instances[p].id for p in arg.producers]]
                    for name, arg in sorted(inst.values.items())
                }
            )
        return hashlib.sha1(_json_text(payload).encode(), usedforsecurity=False).hexdigest()

    def forget(self, inst: TaskInstance) -> None:
        """Drop what :meth:`call` kept for ``inst`` (an attempt that did not succeed)."""
        self._fingerprints.pop(inst.index, None)

    def slug(self, inst: TaskInstance) -> str:
        """The task's folder name (cached: computed once per task)."""
        slug = self._slugs.get(inst.index)
        if slug is None:
            slug = self._slugs[inst.index] = task_slug(inst.id)
        return slug

    def received(self) -> set[int]:
        """The instances whose return value some task receives (computed once)."""
        if self._received is None:
            self._received = {
                p for inst in self.graph.instances for arg in inst.values.values()
                for p in arg.producers
            }  # fmt: skip
        return self._received

    def value_file(self, producer: int) -> str:
        """Where ``producer``'s return value is: this run's, or the run that made it."""
        paths = self.value_runs.get(producer, self.paths)
        if paths is None:
            raise RuntimeError("CallFactory needs run paths to locate values")
        return paths.value(self.slug(self.graph.instances[producer]))

    def values_in(self, inst: TaskInstance) -> ValuesIn | None:
        """What ``inst`` receives (``from:``): for each argument, its shape and files."""
        if not inst.values:
            return None
        out: ValuesIn = {}
        for name, arg in inst.values.items():
            keys = arg.keys or (None,) * len(arg.producers)
            out[name] = (
                arg.shape,
                [(key, self.value_file(p)) for key, p in zip(keys, arg.producers, strict=True)],
            )
        return out

    def call(self, inst: TaskInstance, attempt: int) -> TaskCall:
        template = self.graph.template(inst)
        action = self.action(inst)
        kind, command, argv = action
        if self.paths is None:
            raise RuntimeError("CallFactory needs run paths to build calls")
        slug = self.slug(inst)
        stdout, stderr, result = self.paths.attempt_files(slug, attempt)
        env = self.env(inst)
        fingerprint = self._fingerprints[inst.index] = self._fingerprint(inst, action, env)
        resources = template.resources
        received = kind == "python" and inst.index in self.received()
        prefix: list[str] = []
        if resources.ranks > 1:
            env.setdefault("HPCFLOW_RANKS", str(resources.ranks))
            launch = self.launch
            if self.launched_locally(resources) and launch.local_mpi_launch:
                prefix = [*launch.local_mpi_launch, "-n", str(resources.ranks)]
            else:
                prefix = task_prefix(
                    launch.mpi_launcher or "", resources.ranks, resources.nodes, mpi=launch.mpi
                )
        software = self.environment(inst)
        outer: list[str] = []
        inner: list[str] = []
        python_exe = ""
        if software is not None:
            env.update(software.variables)
            outer = software.outer()
            run_dir = str(self.paths.run_dir)
            inner = software.inner(inst.workdir, [f"{run_dir}:{run_dir}"], list(env))
            if kind == "python":
                python_exe = software.python
                code = ensure_worker_code(self.paths.worker_code)
                env["PYTHONPATH"] = f"{code}:{env['PYTHONPATH']}" if env.get("PYTHONPATH") else code
        if inst.index in self.continued:
            env["HPCFLOW_CONTINUATION"] = "1"
        checkpoint = template.checkpoint
        site = self.environments.site
        if prefix or (kind != "python" and (outer or inner)):
            program = argv or [] if kind == "argv" else ["bash", "-c", command or ""]
            argv = [*outer, *prefix, *inner, *program]
            kind, command = "argv", None
        values_in = self.values_in(inst) if kind == "python" else None
        return TaskCall(
            index=inst.index,
            attempt=attempt,
            kind=kind,
            command=command,
            argv=argv,
            python=template.spec.python,
            kwargs=dict(inst.params) if kind == "python" else None,
            workdir=inst.workdir,
            env=env or None,
            timeout=template.timeout,
            inputs=inst.inputs,
            outputs=inst.outputs,
            stdout=stdout,
            stderr=stderr,
            result=result,
            quarantine_dir=self.paths.quarantine(slug, attempt),
            task_id=inst.id,
            fingerprint=fingerprint,
            journal=self.journal,
            values_in=values_in,
            received=received,
            value_out=self.paths.value(slug) if received else "",
            # Only a call that values flow through needs the key (one string for all).
            value_key=self._value_key() if received or values_in else "",
            wrap=[*outer, *inner] if kind == "python" and (outer or inner) else None,
            python_exe=python_exe,
            gpus=resources.gpus,
            checkpoint_signal=int(getattr(signal, checkpoint.signal)) if checkpoint else 0,
            checkpoint_before=checkpoint.before if checkpoint else 0.0,
            logs=str(self.paths.logs_dir) if site.task_logs == "per-worker" else "",
            scratch=site.scratch_dir if template.spec.scratch else None,
            confine=template.paths.removable if template.paths else (),
        )


def scratch_path(path: str, workdir: str) -> str:
    """``path`` as a task in a scratch folder names it: relative to ``workdir`` when it
    lies inside it, else as it is."""
    return inside(path, workdir) or path


def _json_text(payload: list[object]) -> str:
    """``json.dumps(payload, sort_keys=True)``, the text fingerprints hash, made without an
    encoder for the items a task's payload mostly holds (text, None, a list or tuple of
    text, an empty mapping): a resume of many tasks computes one per task."""
    items = []
    for item in payload:
        if item is None:
            items.append("null")
        elif isinstance(item, str):
            items.append(_json_str(item))
        elif isinstance(item, list | tuple):
            try:  # text only (the C encoder refuses anything else)
                items.append("[" + ", ".join(map(_json_str, item)) + "]")
            except TypeError:
                items.append(json.dumps(item, sort_keys=True))
        elif isinstance(item, dict) and not item:
            items.append("{}")
        else:
            items.append(json.dumps(item, sort_keys=True))
    return "[" + ", ".join(items) + "]"


def _jsonable(params: Mapping[str, object]) -> dict[str, object]:
    return {
        k: (v if isinstance(v, str | int | float | bool | list) else value_text(v))
        for k, v in params.items()
    }
