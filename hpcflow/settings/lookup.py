"""Finding profile files: by path, or by name along a search path.

The search order for a name is: each folder of ``$HPCFLOW_PROFILE_PATH`` (colon-separated,
first wins), the user's folder (``$XDG_CONFIG_HOME/hpcflow/profiles``, by default
``~/.config/hpcflow/profiles``), then the profiles shipped inside the package. A profile
named ``NAME`` is the file ``NAME.yaml`` (or ``NAME.yml``) in one of those folders.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpcflow.errors import ProfileError

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

logger = logging.getLogger(__name__)

#: Colon-separated folders searched before the user's and the shipped profiles.
PROFILE_PATH_ENV = "HPCFLOW_PROFILE_PATH"
#: The profile used when none is named.
DEFAULT_PROFILE_ENV = "HPCFLOW_PROFILE"
DEFAULT_PROFILE = "local"
SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class ProfileRef:
    """One profile file that was found, and where.

    ``origin`` says which part of the search found it: ``"file"`` (named by path),
    ``"$HPCFLOW_PROFILE_PATH"``, ``"user"`` or ``"shipped"``. ``location`` is what users
    are shown (a path). ``shadowed`` is true when a profile of the same name comes
    earlier in the search, so this one is never picked by name.
    """

    name: str
    origin: str
    location: str
    resource: Traversable
    shadowed: bool = False

    def read_text(self) -> str:
        """The file's text; a :class:`ProfileError` if it cannot be read."""
        try:
            return self.resource.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ProfileError(f"{self.location}: cannot read profile: {exc}") from None


def default_profile_name(environ: Mapping[str, str] | None = None) -> str:
    """``$HPCFLOW_PROFILE`` if set, else ``local``."""
    env = os.environ if environ is None else environ
    return env.get(DEFAULT_PROFILE_ENV) or DEFAULT_PROFILE


def user_profile_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/hpcflow/profiles``, by default ``~/.config/hpcflow/profiles``."""
    env = os.environ if environ is None else environ
    config = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(config) / "hpcflow" / "profiles"


def shipped_profile_dir() -> Traversable:
    """The profiles installed with the package (``hpcflow/settings/profiles``)."""
    from importlib import resources  # (its readers: imported only when a name is looked up)

    return resources.files("hpcflow.settings") / "profiles"


def search_dirs(environ: Mapping[str, str] | None = None) -> list[tuple[str, Traversable]]:
    """The folders searched for a profile name, first first, each with its origin."""
    env = os.environ if environ is None else environ
    dirs: list[tuple[str, Traversable]] = [
        (f"${PROFILE_PATH_ENV}", Path(part).expanduser())
        for part in env.get(PROFILE_PATH_ENV, "").split(":")
        if part
    ]
    dirs.append(("user", user_profile_dir(env)))
    dirs.append(("shipped", shipped_profile_dir()))
    return dirs


def list_profiles(
    environ: Mapping[str, str] | None = None, *, include_shadowed: bool = False
) -> list[ProfileRef]:
    """Every profile on the search path, in search order.

    Only the first profile of each name is returned unless ``include_shadowed``; the
    others are then marked ``shadowed``.
    """
    seen: set[str] = set()
    found: list[ProfileRef] = []
    for ref in _scan(environ):
        shadowed = ref.name in seen
        seen.add(ref.name)
        if shadowed and not include_shadowed:
            continue
        found.append(
            ProfileRef(ref.name, ref.origin, ref.location, ref.resource, shadowed=shadowed)
        )
    return found


def find_profile(name_or_path: str, environ: Mapping[str, str] | None = None) -> ProfileRef:
    """The profile file named (``slurm``) or pointed at (``./site.yaml``).

    A value ending in ``.yaml``/``.yml`` or containing a ``/`` is a path; anything else is
    a name looked up along :func:`search_dirs`.

    Raises
    ------
    ProfileError
        No such file, or no profile of that name (the message lists those there are and
        suggests the closest).
    """
    if name_or_path.endswith(SUFFIXES) or os.sep in name_or_path or "/" in name_or_path:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            what = "is not a file" if path.exists() else "does not exist"
            raise ProfileError(
                f"profile file {name_or_path!r} {what}",
                hint="give a profile name (`hpcflow profiles list`) or a path to a .yaml file",
            )
        return ProfileRef(path.stem, "file", str(path.resolve()), path.resolve())
    for ref in _scan(environ):
        if ref.name == name_or_path:
            return ref
    names = sorted({ref.name for ref in _scan(environ)})
    import difflib

    close = difflib.get_close_matches(name_or_path, names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    hint += f"profiles are: {', '.join(names)}" if names else "no profiles found"
    raise ProfileError(f"no profile named {name_or_path!r}", hint=hint)


def _scan(environ: Mapping[str, str] | None) -> Iterator[ProfileRef]:
    """Every profile file in search order, duplicates of a name included."""
    for origin, folder in search_dirs(environ):
        try:
            if not folder.is_dir():
                continue
            entries = sorted(folder.iterdir(), key=lambda entry: entry.name)
        except OSError as exc:
            logger.debug("skipping profile folder %s: %s", folder, exc)
            continue
        by_name: dict[str, Traversable] = {}
        for entry in entries:
            stem, dot, suffix = entry.name.rpartition(".")
            # `.yaml` before `.yml` when a folder has both spellings of one name.
            if dot and f".{suffix}" in SUFFIXES and stem and not stem.startswith("."):
                if entry.is_file() and (stem not in by_name or suffix == "yaml"):
                    by_name[stem] = entry
        for stem in sorted(by_name):
            yield ProfileRef(stem, origin, str(by_name[stem]), by_name[stem])
