"""``scratch: true``: an attempt run in a fresh folder on the node's own disk.

A task that writes many temporary files, or rewrites its output many times, costs a
shared file system (Lustre, GPFS) dearly; on node-local storage the same is cheap. Such
a task gets a new folder below the profile's ``scratch_dir`` (``$SLURM_TMPDIR``,
``$TMPDIR`` or the system's temporary folder by default), named after the task and
attempt, and runs there:

- its declared inputs inside its working directory are *linked* (symbolic links, at the
  same relative paths), not copied: reading them costs what it would have cost anyway,
  and no time goes to copies of files the task may read only in part. Inputs elsewhere
  are named by their absolute paths. A task must not write to its inputs (it would
  write through the link).
- its ``{inputs}`` and ``{outputs}`` placeholders are rendered relative to its working
  directory, so they resolve inside the scratch folder;
- after it exits 0, every declared output is copied back beside its destination under
  a temporary name, and only once all are copied are they renamed into place: a failed
  copy (a full disk) leaves none of them, and no half-written file ever has an output's
  name. A missing output fails the attempt as usual.
- after a failure, the outputs it left are moved to the run's quarantine folder, as for
  any failed attempt, and the rest is removed with the folder: node-local disks are
  small and often wiped when the allocation ends, and the logs are on the shared file
  system anyway.

The scratch folder is removed in every case.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import secrets
import shutil
import tempfile

from hpcflow.worker.calls import TaskCall
from hpcflow.worker.logfiles import ensure_dir

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")


def scratch_root(setting: str) -> str:
    """The folder below which scratch folders are made on this node: ``setting`` with
    its $VARS expanded, or ``$SLURM_TMPDIR``, else the system's temporary folder."""
    if setting:
        return os.path.expanduser(os.path.expandvars(setting))
    return os.environ.get("SLURM_TMPDIR") or tempfile.gettempdir()


def inside(path: str, folder: str) -> str | None:
    """``path`` relative to ``folder`` when it lies inside it, else None."""
    relative = os.path.relpath(path, folder)
    if relative == os.curdir or relative.startswith(os.pardir + os.sep) or relative == os.pardir:
        return None
    return relative


class ScratchError(OSError):
    """The attempt cannot run in, or come back from, its scratch folder."""


@dataclasses.dataclass
class Scratch:
    """One attempt's scratch folder: the call as it runs there, and the way back."""

    call: TaskCall
    folder: str
    #: The call with its working directory and outputs inside :attr:`folder`.
    inner: TaskCall

    @classmethod
    def enter(cls, call: TaskCall) -> Scratch:
        """Make the folder, link the inputs in and make the outputs' folders."""
        mapped: list[str] = []
        for path in call.outputs:
            relative = inside(path, call.workdir)
            if relative is None:
                raise ScratchError(
                    f"scratch: output {path} is outside the task's folder {call.workdir}"
                )
            mapped.append(relative)
        root = scratch_root(call.scratch or "")
        ensure_dir(root)
        name = _UNSAFE.sub("_", os.path.basename(os.path.dirname(call.stdout)))[:60] or "task"
        folder = tempfile.mkdtemp(
            prefix=f"hpcflow-{name}-{call.attempt}-{secrets.token_hex(2)}-", dir=root
        )
        try:
            for path in call.inputs:
                relative = inside(path, call.workdir)
                if relative is None:
                    continue
                link = os.path.join(folder, relative)
                os.makedirs(os.path.dirname(link), exist_ok=True)
                os.symlink(path, link)
            outputs = tuple(os.path.join(folder, relative) for relative in mapped)
            for path in outputs:
                os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        env = dict(call.env or {})
        if call.kind == "python":  # the task's own folder stays importable
            path = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
            env["PYTHONPATH"] = f"{call.workdir}:{path}" if path else call.workdir
        env["HPCFLOW_WORKDIR"] = call.workdir
        inner = dataclasses.replace(
            call,
            workdir=folder,
            outputs=outputs,
            env=env,
        )
        log.debug("task %s attempt %d runs in %s", call.task_id, call.attempt, folder)
        return cls(call, folder, inner)

    def leave(self, succeeded: bool) -> str | None:
        """Copy the outputs back after a success, quarantine them after a failure, and
        remove the folder. Returns why a success cannot count (an output missing, or the
        copy failed: then none is copied back and those made are quarantined), else None."""
        try:
            if succeeded:
                return self._copy_back()
            self._quarantine()
            return None
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _copy_back(self) -> str | None:
        missing = [
            dest
            for dest, src in zip(self.call.outputs, self.inner.outputs, strict=True)
            if not os.path.lexists(src)
        ]
        if missing:
            self._quarantine()
            return "exited 0 but did not create: " + ", ".join(missing[:5])
        staged: list[tuple[str, str]] = []
        try:
            for dest, src in zip(self.call.outputs, self.inner.outputs, strict=True):
                ensure_dir(os.path.dirname(dest))
                temporary = f"{dest}.hpcflow-{secrets.token_hex(4)}.part"
                staged.append((temporary, dest))
                if os.path.isdir(src) and not os.path.islink(src):
                    shutil.copytree(src, temporary, symlinks=True)
                else:
                    shutil.copy2(src, temporary, follow_symlinks=True)
        except OSError as exc:
            for temporary, _ in staged:
                _remove(temporary)
            self._quarantine()
            return f"scratch: could not copy the outputs back: {exc}"
        for temporary, dest in staged:
            if os.path.isdir(dest) and not os.path.islink(dest):
                shutil.rmtree(dest, ignore_errors=True)
            os.replace(temporary, dest)
        return None

    def _quarantine(self) -> None:
        left = [path for path in self.inner.outputs if os.path.lexists(path)]
        if not left:
            return
        os.makedirs(self.call.quarantine_dir, exist_ok=True)
        for path in left:
            target = os.path.join(self.call.quarantine_dir, os.path.basename(path) or "output")
            try:
                shutil.move(path, target)
            except OSError as exc:
                log.warning("scratch: cannot quarantine %s: %s", path, exc)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)
