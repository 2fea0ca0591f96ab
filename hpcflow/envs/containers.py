"""The argv that starts a program inside a container, for each runtime. Pure: the
program's argv follows what these functions return."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

#: Environment variables a Podman container receives from the task's environment (the
#: other runtimes pass the whole environment through): hpcflow's own and the GPU's.
PODMAN_ENV = ("HPCFLOW_*", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "PYTHONPATH")


#: Sets USER (from ``id -un``) when it is not set, then runs its arguments.
_WITH_USER = 'USER="${USER:-$(id -un)}"; export USER; exec "$@"'
#: The same, for a SquashFS image on ch-run's default mount point: ch-run creates
#: /var/tmp/$USER.ch/mnt when it is missing, and two ch-runs starting at once race on it
#: ("can't mkdir: /var/tmp/USER.ch: File exists"); made here first, with mkdir -p, which
#: takes an existing folder as success.
_WITH_USER_SQUASH = (
    'USER="${USER:-$(id -un)}"; export USER; '
    'mkdir -p "/var/tmp/$USER.ch/mnt" 2>/dev/null || :; exec "$@"'
)


#: Runs ``podman run --name NAME ...`` (its arguments after NAME) and, when the task is
#: stopped (SIGTERM/SIGINT/SIGHUP: a timeout, a cancel), kills the container by name
#: before `podman run` itself goes. Standard input reaches podman (fd 3: a background job
#: would get /dev/null).
_PODMAN_SUPERVISOR = """name=$1
shift
podman=$1
exec 3<&0
"$@" <&3 3<&- &
child=$!
exec 3<&-
stop() { "$podman" kill "$name" >/dev/null 2>&1; kill -TERM "$child" 2>/dev/null; }
trap stop TERM INT HUP
wait "$child"
status=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; status=$?; done
exit "$status"
"""


@dataclass(frozen=True)
class ContainerRun:
    """One container start: the runtime, its command, the image and what it mounts."""

    runtime: str
    command: str
    image: str
    #: "SRC:DST" mounts, in order.
    mounts: tuple[str, ...]
    #: The site's extra arguments, then the task's.
    options: tuple[str, ...] = ()
    gpus: bool = False


def container_argv(run: ContainerRun, workdir: str, env_names: Sequence[str] = ()) -> list[str]:
    """argv that runs the argv following it inside ``run``'s image, in ``workdir``.

    ``env_names``: the task's own variables, which Podman must be told to pass on."""
    if run.runtime in ("apptainer", "singularity"):
        argv = [run.command, "exec"]
        if run.gpus:
            argv.append("--nv")
        for mount in run.mounts:
            argv += ["--bind", mount]
        return [*argv, "--pwd", workdir, *run.options, run.image]
    if run.runtime == "charliecloud":
        # ch-run refuses to start without USER, which batch jobs and cron may lack.
        squash = run.image.endswith(".sqfs") and not any(
            o in ("-m", "--mount") or o.startswith("--mount=") for o in run.options
        )
        wrapper = _WITH_USER_SQUASH if squash else _WITH_USER
        argv = ["/bin/sh", "-c", wrapper, "hpcflow-ch-run", run.command]
        for mount in run.mounts:
            argv += ["-b", mount]
        # GPUs: Charliecloud has no run-time switch; the image carries the driver's
        # libraries (ch-fromhost --nvidia) and CUDA_VISIBLE_DEVICES passes through.
        return [*argv, "-c", workdir, *run.options, run.image, "--"]
    if run.runtime == "podman":
        # The container runs under conmon, not under `podman run`: killing the task's
        # process group would leave it running. A small supervisor kills it by name.
        # -i: a python task's call comes on standard input; host network: Dask and MPI
        # addresses are the node's; labels off: the mounts are the host's own folders;
        # never pull: the image was checked before the run (a pull per task would be a
        # registry storm, and a missing image fails at once, not after pull retries).
        name = f"hpcflow-{uuid.uuid4().hex[:16]}"
        argv = [
            "/bin/sh", "-c", _PODMAN_SUPERVISOR, "hpcflow-podman", name,
            run.command, "run", "--name", name, "--rm", "-i", "--network=host",
            "--security-opt=label=disable", "--pull=never",
        ]  # fmt: skip
        for mount in run.mounts:
            argv += ["-v", mount]
        for name in (*PODMAN_ENV, *sorted(env_names)):
            argv += ["--env", name]
        if run.gpus:
            argv += ["--device", "nvidia.com/gpu=all"]
        return [*argv, "-w", workdir, *run.options, run.image]
    raise ValueError(f"unknown container runtime {run.runtime!r}")


def mount_spec(bind: str, base_dir: str) -> str:
    """A bind as ``SRC:DST`` (``SRC`` alone mounts at the same path; a relative ``SRC``
    starts in the workflow's folder)."""
    src, sep, dst = bind.partition(":")
    if not src.startswith("/"):
        src = f"{base_dir.rstrip('/')}/{src}"
    return f"{src}:{dst if sep and dst else src}"
