"""hpcflow's own state is private: folders 0700 and files 0600 whatever the umask, and
state that another account owns, or may change, is refused.

Run folders often sit on shared scratch, beside other users' folders. What hpcflow keeps
there (task states, the memo of every task id and its parameters, journals, logs, value
files) is the user's alone, and what hpcflow reads back from there it trusts only when
no other account could have written it: owned by this user, not writable by group or
others. Every folder hpcflow makes for itself goes through :func:`private_dir`; files
are created ``0600`` (:mod:`hpcflow.store.atomic`, :func:`private_file`). Workers import
this module: standard library only.
"""

from __future__ import annotations

import os
import stat

from hpcflow.errors import HpcflowError

StrPath = str | os.PathLike[str]

#: Mode bits that let another account change a file or a folder's entries.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class StateNotPrivate(HpcflowError):
    """hpcflow state that another account owns or may change: it is not read."""


def refusal(path: StrPath, st: os.stat_result) -> StateNotPrivate | None:
    """Why hpcflow does not trust ``path`` (stat ``st``) as its own, or None when it does:
    it must belong to this user and be writable by nobody else."""
    me = os.geteuid()
    if st.st_uid != me:
        return StateNotPrivate(
            f"{path} belongs to another account (uid {st.st_uid}, you are uid {me}): "
            "hpcflow does not read state it does not own",
            hint="use a run folder of your own (--run-dir); remove or move away what "
            "another account put there",
        )
    if st.st_mode & _OTHERS_WRITE:
        return StateNotPrivate(
            f"{path} is writable by other accounts (mode {stat.S_IMODE(st.st_mode):04o}): "
            "hpcflow does not read state another account may have changed",
            hint=f"if nobody else changed it, make it private: chmod go-w '{path}' "
            "(hpcflow creates its state 0700/0600)",
        )
    return None


def _open_to_others(path: StrPath, st: os.stat_result) -> bool:
    """Whether others may read or enter ``path`` (stat ``st``), once it is shown to be
    this user's and writable by no one else (:class:`StateNotPrivate` otherwise)."""
    problem = refusal(path, st)
    if problem is not None:
        raise problem
    return bool(stat.S_IMODE(st.st_mode) & 0o077)


def check_private(path: StrPath) -> None:
    """Raise :class:`StateNotPrivate` unless ``path`` is this user's and writable by no
    one else (a symbolic link is judged by what it points to)."""
    problem = refusal(path, os.stat(path))
    if problem is not None:
        raise problem


def private_dir(path: StrPath, *, top: StrPath | None = None) -> None:
    """``mkdir -p path`` where each folder made is ``0700`` whatever the umask.

    The folders from ``top`` (an ancestor of ``path``; ``path`` alone when None) down to
    ``path`` are hpcflow's own: those that exist already must be this user's and not
    writable by others (:class:`StateNotPrivate`), and are made ``0700`` if they were
    readable by others (state an older hpcflow made under the umask)."""
    target = os.path.abspath(os.fspath(path))
    first = os.path.abspath(os.fspath(top)) if top is not None else target
    own = [target]
    while own[-1] != first and os.path.dirname(own[-1]) != own[-1]:
        own.append(os.path.dirname(own[-1]))
    make_dirs(os.path.dirname(own[-1]))  # above hpcflow's own: the user's business
    # Top down, each checked before anything goes into it.
    for folder in reversed(own):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            if _open_to_others(folder, os.stat(folder)):
                os.chmod(folder, 0o700)


def make_dirs(path: StrPath) -> None:
    """``mkdir -p path``, each folder it makes ``0700`` whatever the umask (``os.makedirs``
    gives its mode to the last folder only); nothing that exists is checked."""
    target = os.fspath(path)
    missing: list[str] = []
    folder = target
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for made in reversed(missing):
        try:
            os.mkdir(made, 0o700)
        except FileExistsError:
            if not os.path.isdir(made):
                raise


def private_file(path: StrPath) -> None:
    """Create ``path`` empty and ``0600`` if missing (before a library such as SQLite
    opens it under the umask); an existing one must be this user's, not writable by
    others, and is made ``0600``."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except PermissionError:
        check_private(path)  # another account's file says so; else the error stands
        raise
    try:
        if _open_to_others(path, os.fstat(fd)):
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
