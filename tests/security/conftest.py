"""A second Unix account that plays another user of the cluster.

The tests in this folder attack the user running the suite (root in CI) from an account
of their own: ``useradd`` creates it for the session, ``userdel`` removes it afterwards.
The attacker runs real programs (this venv's Python, ``curl``, ``ss``) as that account.

Two things keep the attacks honest:

* the victim's files live in :func:`shared_dir`, a sticky world-writable folder like a
  cluster's shared scratch, never under pytest's ``tmp_path`` (0700: nobody else could
  enter it whatever hpcflow did);
* the attacker must be able to run this checkout's venv, so every folder above it gets
  ``o+x`` (traversal only, not listing) for the session, restored afterwards.

Without root, or without ``useradd``, the tests fail with the reason: they never skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Account:
    """Another user of the machine: its name, ids and home, and a way to run as it."""

    name: str
    uid: int
    gid: int
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        """A plain environment for this account (its own HOME, this venv on PATH)."""
        venv_bin = str(Path(sys.executable).parent)
        return {
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "LANG": "C.UTF-8",
            **extra,
        }

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as this account and wait for it (output captured as text)."""
        return subprocess.run(
            list(argv),
            cwd=cwd if cwd is not None else self.home,
            env=env if env is not None else self.env(),
            user=self.uid,
            group=self.gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )

    def popen(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | str | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[str]:
        """Start ``argv`` as this account in a session of its own (stdout/stderr piped)."""
        return subprocess.Popen(
            list(argv),
            cwd=cwd if cwd is not None else self.home,
            env=env if env is not None else self.env(),
            user=self.uid,
            group=self.gid,
            extra_groups=[],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def python(
        self, code: str, *, timeout: float = 120, **kw: object
    ) -> subprocess.CompletedProcess[str]:
        """Run ``code`` with this checkout's Python, as this account."""
        return self.run([sys.executable, "-c", code], timeout=timeout, **kw)  # type: ignore[arg-type]


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "tests/security need root to create a second Unix account (useradd); "
            "run the suite as root, as scripts/test.sh does in CI"
        )
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.fail("tests/security need useradd and userdel (Debian package: passwd)")


#: Shared by every pytest process of a run (xdist workers): the folders given o+x, their
#: first modes, and how many sessions still need them; changed under an flock.
_TRAVERSAL_BOOK = Path("/tmp/hpcflow-security-traversal.json")


@contextlib.contextmanager
def _traversal(paths: Sequence[Path]) -> Iterator[None]:
    """Give ``o+x`` to every folder from ``/`` down to each path while any session needs
    it; the last session to leave puts the first modes back."""
    lock = os.open(str(_TRAVERSAL_BOOK) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with _locked(lock):
            book = json.loads(_TRAVERSAL_BOOK.read_text()) if _TRAVERSAL_BOOK.exists() else {}
            modes: dict[str, int] = book.get("modes", {})
            for path in paths:
                for folder in [*reversed(path.parents), path]:
                    mode = stat.S_IMODE(folder.stat().st_mode)
                    if not mode & stat.S_IXOTH:
                        modes.setdefault(str(folder), mode)
                        os.chmod(folder, mode | stat.S_IXOTH)
            book = {"modes": modes, "users": book.get("users", 0) + 1}
            _TRAVERSAL_BOOK.write_text(json.dumps(book))
        yield
    finally:
        with _locked(lock):
            book = json.loads(_TRAVERSAL_BOOK.read_text())
            book["users"] -= 1
            if book["users"] <= 0:
                for folder, mode in sorted(book["modes"].items(), reverse=True):
                    with contextlib.suppress(FileNotFoundError):
                        os.chmod(folder, mode)
                _TRAVERSAL_BOOK.unlink()
            else:
                _TRAVERSAL_BOOK.write_text(json.dumps(book))
        os.close(lock)


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def other_account(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Account]:
    """A second Unix account for the session, removed (with its files) afterwards."""
    _need_root()
    name = "hpcfx" + secrets.token_hex(4)
    base = Path("/tmp") / f"hpcflow-other-homes-{secrets.token_hex(4)}"
    base.mkdir(mode=0o755)
    home = base / name
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash",
         "--user-group", name],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    # The venv's python links to the base interpreter (under /root with pyenv).
    needed = [Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.executable, REPO)]
    stack = contextlib.ExitStack()
    try:
        entry = pwd.getpwnam(name)
        account = Account(name, entry.pw_uid, entry.pw_gid, home)
        stack.enter_context(_traversal([p if p.is_dir() else p.parent for p in needed]))
        probe = account.python("import distributed, hpcflow; print('ok')")
        if probe.stdout.strip() != "ok":
            pytest.fail(
                f"the second account {name} cannot run this venv's Python "
                f"({sys.executable}): {probe.stderr.strip()[-500:]}"
            )
        yield account
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
        stack.close()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A sticky, world-writable folder (mode 1777) like a cluster's shared scratch.

    The victim's workflows and run folders go here, so that only hpcflow's own file modes
    stand between them and the other account."""
    path = Path("/tmp") / f"hpcflow-shared-{secrets.token_hex(6)}"
    path.mkdir()
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
