"""What identifies an image, for a task's fingerprint: a change to the image re-runs the
task and what depends on it. Image files and folders are identified by what ``stat``
says of them (as make does: size, modification time, and for a folder every entry's),
so a large image is never read whole; Podman images by their id; a registry reference
(docker://, oras://) by its text (pin a digest, ``@sha256:...``, to re-run on a change)."""

from __future__ import annotations

import hashlib
import os
import subprocess

from hpcflow.errors import HpcflowError


class ImageError(HpcflowError):
    """An image that is not there, or a runtime that cannot say what it is."""


def is_reference(image: str) -> bool:
    """Whether ``image`` is a registry reference (pulled by the runtime), not a path."""
    return "://" in image


def image_identity(runtime: str, command: str, image: str) -> str:
    """A short text that changes whenever ``image`` does."""
    if is_reference(image):
        return image
    if runtime == "podman":
        return _podman_id(command, image)
    try:
        st = os.stat(image)
    except OSError as exc:
        raise ImageError(f"the image {image} is not there ({exc.strerror})") from None
    if not os.path.isdir(image):
        return f"file:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(image):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                entry = os.lstat(path)
            except OSError:
                continue
            relative = os.path.relpath(path, image)
            digest.update(f"{relative}\0{entry.st_size}\0{entry.st_mtime_ns}\0".encode())
    return f"folder:{digest.hexdigest()}"


def _podman_id(command: str, image: str) -> str:
    try:
        done = subprocess.run(
            [command, "image", "inspect", "--format", "{{.Id}}", image],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        raise ImageError(f"{command} is not installed here") from None
    except subprocess.TimeoutExpired:
        raise ImageError(f"`{command} image inspect {image}` did not answer in 60s") from None
    if done.returncode != 0:
        raise ImageError(
            f"podman has no image {image}: {done.stderr.strip() or 'not found'}",
            hint=f"pull or build it first (`{command} pull {image}`)",
        )
    return f"podman:{done.stdout.strip()}"


def prefix_identity(prefix: str) -> str:
    """What identifies a Python environment's contents: the packages installed in it by
    name and version (a venv's ``*.dist-info`` folders, a conda prefix's ``conda-meta``
    records), so installing or upgrading one re-runs its tasks."""
    names: list[str] = []
    conda_meta = os.path.join(prefix, "conda-meta")
    if os.path.isdir(conda_meta):
        names += [n for n in os.listdir(conda_meta) if n.endswith(".json")]
    lib = os.path.join(prefix, "lib")
    for folder in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        site = os.path.join(lib, folder, "site-packages")
        if folder.startswith("python") and os.path.isdir(site):
            names += [n for n in os.listdir(site) if n.endswith((".dist-info", ".egg-info"))]
    digest = hashlib.sha256("\0".join(sorted(names)).encode()).hexdigest()
    return f"packages:{digest}"
