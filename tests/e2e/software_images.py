"""Container images for the software-environment tests, built from local files (no
registry is reachable here): a root file system of busybox (every applet a link, bash
too), a marker only the image has, and the folders the tests mount onto (Charliecloud
mounts only onto folders the image already has). A Python-capable image also holds the
C libraries this machine's interpreter and its extension modules need; the interpreter's
own folder is mounted in by the workflow that uses it. Also module trees, for Lmod
(Lua modulefiles) and Environment Modules (Tcl)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm_cluster import slurm_required

APPLETS = "sh echo cat ls env true false pwd printf mkdir sleep test [ id touch rm hostname".split()


def busybox_rootfs(dest: Path, name: str, mount_points: list[str]) -> Path:
    """An image folder at ``dest`` named ``name`` (in /etc/os-release and /hpcflow-image)."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    for folder in ("bin", "etc", "tmp", "proc", "sys", "dev", "home", "root", "run"):
        (dest / folder).mkdir(parents=True, exist_ok=True)
    shutil.copy2(busybox, dest / "bin" / "busybox")
    for applet in APPLETS:
        link = dest / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")
    # hpcflow runs a task's command with bash; busybox has no bash applet, its sh does.
    bash = dest / "bin" / "bash"
    bash.write_text('#!/bin/sh\nexec /bin/sh "$@"\n')
    bash.chmod(0o755)
    (dest / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (dest / "etc" / "group").write_text("root:x:0:\n")
    (dest / "etc" / "os-release").write_text(f"ID=hpcflow-{name}\nNAME={name}\n")
    (dest / "hpcflow-image").write_text(name + "\n")
    for point in mount_points:
        (dest / point.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return dest


def squashfs_image(rootfs: Path, dest: Path) -> Path:
    """``rootfs`` packed into one SquashFS file at ``dest``, which ``ch-run`` mounts
    itself (its own squashfuse). Needs ``mksquashfs`` (squashfs-tools)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mksquashfs", str(rootfs), str(dest), "-noappend", "-all-root", "-quiet",
         "-no-progress", "-processors", "1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return dest


def python_rootfs(dest: Path, name: str, mount_points: list[str]) -> tuple[Path, str]:
    """A busybox image that can run this machine's Python once its prefix (the second
    item, to mount at the same path) is mounted in."""
    prefix = sys.base_prefix
    busybox_rootfs(dest, name, [*mount_points, prefix])
    interpreter = os.path.realpath(sys.executable)
    libraries = [interpreter, *Path(prefix, "lib").glob("python3*/lib-dynload/*.so")]
    for library in _shared_libraries(libraries):
        if library.startswith(prefix):
            continue  # mounted with the prefix
        target = dest / library.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(library), target)
    return dest, prefix


def _shared_libraries(binaries: list[object]) -> set[str]:
    found: set[str] = set()
    for binary in binaries:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
            if path.startswith("/"):
                found.add(path)
    return found


#: Environment Modules 5 (the Tcl ``modulecmd.tcl``), unpacked by scripts/test.sh into
#: this private prefix: its Debian package conflicts with lmod, so it is not installed.
ENVIRONMENT_MODULES = Path("/opt/hpcflow-test/environment-modules")
#: The file a profile's ``modules_init`` names to get its ``module`` command.
ENVIRONMENT_MODULES_INIT = ENVIRONMENT_MODULES / "usr" / "share" / "modules" / "init" / "bash"
#: For tests that need it: where scripts/test.sh has unpacked it (as root, CI) they must
#: run, never skip.
requires_environment_modules = pytest.mark.skipif(
    not ENVIRONMENT_MODULES_INIT.is_file() and not slurm_required(),
    reason=f"needs Environment Modules unpacked in {ENVIRONMENT_MODULES} "
    "(scripts/test.sh unpacks it, as root)",
)


def _hpctool(root: Path) -> tuple[Path, Path]:
    """A folder holding the ``hpctool`` program, and the (new) modulefiles folder."""
    tools = root / "tools" / "bin"
    tools.mkdir(parents=True)
    tool = tools / "hpctool"
    tool.write_text("#!/bin/sh\necho hpctool 1.0\n")
    tool.chmod(0o755)
    modules = root / "modulefiles"
    (modules / "hpctool").mkdir(parents=True)
    return tools, modules


def lmod_tree(root: Path) -> Path:
    """A MODULEPATH folder holding hpctool/1.0 (a Lua modulefile that puts a tool on PATH
    and sets HPCTOOL_VERSION); returns it."""
    tools, modules = _hpctool(root)
    (modules / "hpctool" / "1.0.lua").write_text(
        f'prepend_path("PATH", "{tools}")\nsetenv("HPCTOOL_VERSION", "1.0")\n'
    )
    return modules


def tcl_module_tree(root: Path) -> Path:
    """A MODULEPATH folder of Tcl modulefiles (what Environment Modules reads): hpctool/1.0
    as in :func:`lmod_tree`, and sitewide/1.0, which sets SITEWIDE=1; returns it."""
    tools, modules = _hpctool(root)
    (modules / "hpctool" / "1.0").write_text(
        f"#%Module1.0\nprepend-path PATH {{{tools}}}\nsetenv HPCTOOL_VERSION 1.0\n"
    )
    (modules / "sitewide").mkdir()
    (modules / "sitewide" / "1.0").write_text("#%Module1.0\nsetenv SITEWIDE 1\n")
    return modules
