"""Each task definition's software environment, resolved once per run for this site:
the argv that starts a task in it, what identifies it (a fingerprint's part), a line for
``--dry-run``, and the preflight that finds what is missing before anything runs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpcflow.envs.containers import ContainerRun, container_argv, mount_spec
from hpcflow.envs.identity import ImageError, image_identity, is_reference, prefix_identity
from hpcflow.envs.pulls import can_pull, pull_references, sif_name
from hpcflow.envs.shims import activate_argv, modules_argv
from hpcflow.envs.site import SiteEnvironment
from hpcflow.errors import HpcflowError
from hpcflow.spec.models import SoftwareKeys

#: Runtimes that pull registry images to a file of their own.
PULLING = ("apptainer", "singularity")


class SoftwareEnvironmentError(HpcflowError):
    """Tasks whose software environment cannot work here (found before anything runs)."""


@dataclass(frozen=True)
class TaskEnvironment:
    """One task definition's container, modules and Python environment, for this site."""

    modules: tuple[str, ...] = ()
    purge: bool = False
    modules_init: str | None = None
    container: ContainerRun | None = None
    #: (prefix, "venv" or "conda"): the Python environment to activate.
    activate: tuple[str, str] | None = None
    #: The interpreter python tasks start with ("python3" on the environment's PATH).
    python: str = "python3"
    #: What a change of re-runs the task (part of its fingerprint).
    identity: tuple[object, ...] = ()
    #: Variables the runtime reads (Apptainer's cache of pulled images).
    variables: tuple[tuple[str, str], ...] = ()

    def outer(self) -> list[str]:
        """argv to put before an MPI launcher (modules: the launcher may come from one)."""
        if not self.modules and not self.purge:
            return []
        return modules_argv(list(self.modules), self.purge, self.modules_init)

    def inner(
        self, workdir: str, mounts: Sequence[str] = (), env_names: Sequence[str] = ()
    ) -> list[str]:
        """argv to put after an MPI launcher, right before the program: the container
        (with ``mounts`` added to its own) and the Python environment's activation."""
        argv: list[str] = []
        if self.container is not None:
            run = self.container
            wanted = _without_nested([*run.mounts, *mounts])
            run = ContainerRun(
                runtime=run.runtime,
                command=run.command,
                image=run.image,
                mounts=tuple(wanted),
                options=run.options,
                gpus=run.gpus,
            )
            argv += container_argv(run, workdir, env_names)
        if self.activate is not None:
            argv += activate_argv(*self.activate)
        return argv

    def describe(self) -> str:
        """One line for ``--dry-run``."""
        parts = []
        if self.container is not None:
            parts.append(f"{self.container.runtime} {self.container.image}")
        if self.modules:
            parts.append("modules " + " ".join(self.modules))
        if self.activate is not None:
            parts.append(f"{self.activate[1]} {self.activate[0]}")
        return ", ".join(parts)


@dataclass
class Environments:
    """The run's resolver: task definitions' software keys → :class:`TaskEnvironment`,
    each image identified once."""

    site: SiteEnvironment = field(default_factory=SiteEnvironment)
    #: Where registry images are pulled to when the profile names no container_cache.
    images: Path | None = None
    _identities: dict[tuple[str, str], str] = field(default_factory=dict)
    _resolved: dict[int, TaskEnvironment | None] = field(default_factory=dict)

    def of(
        self, key: int, software: SoftwareKeys | None, base_dir: str, gpus: bool = False
    ) -> TaskEnvironment | None:
        """The environment of task definition ``key`` (None: it has none). Raises
        :class:`ImageError` when its image is not there."""
        if key in self._resolved:
            return self._resolved[key]
        found = None if software is None else self._resolve(software, base_dir, gpus)
        self._resolved[key] = found
        return found

    def _resolve(self, software: SoftwareKeys, base_dir: str, gpus: bool) -> TaskEnvironment:
        identity: list[object] = []
        container = None
        python = "python3"
        spec = software.container
        if spec is not None:
            runtime = spec.runtime or _runtime_of(spec.image, self.site.runtime)
            command = self.site.command(runtime)
            image = spec.image
            if runtime != "podman" and not is_reference(image):
                image = os.path.normpath(os.path.join(base_dir, image))
            run_image = self._pulled(runtime, image) or image
            mounts = [mount_spec(b, base_dir) for b in (*self.site.binds, *spec.binds)]
            container = ContainerRun(
                runtime=runtime,
                command=command,
                image=run_image,
                mounts=tuple([f"{base_dir}:{base_dir}", *mounts]),
                options=(*self.site.options, *spec.options),
                gpus=gpus,
            )
            python = spec.python
            identity += [runtime, image, self._identity(runtime, command, image)]
            identity += [list(spec.binds), list(spec.options), spec.python]
        modules = software.modules
        if modules is not None:
            identity += ["modules", list(modules.load), modules.purge]
        activate = None
        for kind in ("venv", "conda"):
            prefix = getattr(software, kind)
            if prefix is not None:
                activate = (os.path.normpath(os.path.join(base_dir, prefix)), kind)
                identity += [kind, activate[0], prefix_identity(activate[0])]
        variables: tuple[tuple[str, str], ...] = ()
        if container is not None and self.site.cache:
            if container.runtime in ("apptainer", "singularity"):
                variables = ((f"{container.runtime.upper()}_CACHEDIR", self.site.cache),)
        return TaskEnvironment(
            variables=variables,
            modules=tuple(modules.load) if modules else (),
            purge=bool(modules and modules.purge),
            modules_init=self.site.modules_init,
            container=container,
            activate=activate,
            python=python,
            identity=tuple(identity),
        )

    def pull_folder(self) -> Path | None:
        """Where registry images are pulled to: the profile's container_cache, else the
        workflow's own folder for them."""
        if self.site.cache:
            return Path(os.path.expanduser(os.path.expandvars(self.site.cache)))
        return self.images

    def _pulled(self, runtime: str, image: str) -> str | None:
        """The .sif file this run pulled ``image`` to, if it is a reference it pulled."""
        folder = self.pull_folder()
        if runtime not in PULLING or not is_reference(image) or folder is None:
            return None
        path = folder / sif_name(image)
        return str(path) if path.exists() else None

    def pull(self, uses: Iterable[tuple[str, int, SoftwareKeys | None, str, bool]]) -> None:
        """Pull every registry image the tasks in ``uses`` name (Apptainer/Singularity),
        once, where this run starts; tasks then run the pulled files. A reference whose
        runtime is not installed here is left to the nodes."""
        folder = self.pull_folder()
        wanted: dict[str, tuple[str, list[str]]] = {}
        for name, key, software, base_dir, gpus in uses:
            env = self.of(key, software, base_dir, gpus)
            spec = software.container if software is not None else None
            if env is None or env.container is None or spec is None:
                continue
            runtime = env.container.runtime
            if runtime in PULLING and is_reference(spec.image) and can_pull(env.container.command):
                wanted.setdefault(spec.image, (env.container.command, []))[1].append(name)
        if not wanted or folder is None:
            return
        pull_references(wanted, folder)
        self._resolved.clear()  # resolved again: they run the pulled files now

    def _identity(self, runtime: str, command: str, image: str) -> str:
        key = (runtime, image)
        if key not in self._identities:
            self._identities[key] = image_identity(runtime, command, image)
        return self._identities[key]

    def preflight(self, uses: Iterable[tuple[str, int, SoftwareKeys | None, str, bool]]) -> None:
        """Check, before anything runs, that each task definition's environment can work:
        its image exists, its runtime is installed (where tasks start here), its Python
        environment is a folder. ``uses``: (task name, key, software keys, workflow
        folder, needs GPUs) of the definitions that will run. Raises one error listing
        every problem, each naming its task and the fix."""
        problems: list[str] = []
        commands: dict[str, bool] = {}
        for name, key, software, base_dir, gpus in uses:
            if software is None:
                continue
            try:
                env = self.of(key, software, base_dir, gpus)
            except ImageError as exc:
                problems.append(f"task {name!r}: {exc.message}" + _hint(exc.hint))
                continue
            if env is None:
                continue
            run = env.container
            if run is not None and self.site.commands_here:
                if run.command not in commands:
                    commands[run.command] = shutil.which(run.command) is not None
                if not commands[run.command]:
                    problems.append(
                        f"task {name!r}: its container needs {run.command} ({run.runtime}), "
                        "which is not installed here"
                        + _hint(
                            "install it, load its module in the profile's setup, or name "
                            f"its command: container_commands: {{{run.runtime}: PATH}}"
                        )
                    )
            if env.activate is not None and run is None:
                prefix, kind = env.activate
                if not os.path.isdir(os.path.join(prefix, "bin")):
                    problems.append(
                        f"task {name!r}: {kind} {prefix} is not an environment (no bin/ folder)"
                        + _hint(f"create it first, or fix the path of '{kind}:'")
                    )
            if env.modules_init is not None and self.site.commands_here:
                if (env.modules or env.purge) and not os.path.isfile(env.modules_init):
                    problems.append(
                        f"task {name!r}: the profile's modules_init {env.modules_init} "
                        "is not there" + _hint("set it to Lmod's or Environment Modules' init file")
                    )
        if problems:
            raise SoftwareEnvironmentError(
                "software environments that cannot work:\n  " + "\n  ".join(problems)
            )


def _hint(text: str | None) -> str:
    return f" (hint: {text})" if text else ""


def _runtime_of(image: str, default: str) -> str:
    """The runtime an image's form asks for, else the site's default."""
    if image.endswith((".sqfs", ".squashfs")):
        return "charliecloud"
    if image.endswith(".sif") or image.startswith(("docker://", "oras://", "library://")):
        return default if default in ("apptainer", "singularity") else "apptainer"
    return default


def _without_nested(mounts: Sequence[str]) -> list[str]:
    """``mounts`` without repeats and without a same-path mount inside another one."""
    out: list[str] = []
    same: list[str] = []
    for mount in mounts:
        src, _, dst = mount.partition(":")
        if mount in out:
            continue
        if src == dst and any(src == p or src.startswith(p.rstrip("/") + "/") for p in same):
            continue
        out.append(mount)
        if src == dst:
            same.append(src)
    return out
