"""Paths that values build stay inside the workflow.

A task's ``inputs``, ``outputs`` and ``workdir`` are templates; the values that fill
their placeholders may come from a sample sheet or a file name somebody else wrote. A
value must never lead hpcflow to a file outside the workflow: hpcflow removes a stale
output before an attempt and moves a failed attempt's outputs to quarantine, so a cell
``../../victim`` or ``/home/you/victim`` in ``outputs: ["out/{sample}.txt"]`` would
delete or move a file of yours.

The rule, for each path whose text has a placeholder (the author's literal paths are
allowed anywhere):

* after lexical normalisation (``a/../../x`` → ``../x``; an absolute value replaces what
  came before it), the path lies inside the workflow's folder, or inside the folder the
  path's own literal text names before its first placeholder (``/scratch/me/{sample}.txt``
  keeps values inside ``/scratch/me``), or inside the folder that the task's
  ``from_files`` pattern names literally (its ``path:`` values are files found there);
* a folder that a value adds to the path and that exists is not a symbolic link leading
  out of those folders (checked with :func:`os.path.realpath`, once per folder). The
  author's own links (in the literal part) are trusted, and a link as the last part of
  the path is harmless to hpcflow: it removes or moves the link, never its target.

:func:`check_paths` applies the rule to every planned instance (``validate``,
``--dry-run`` and ``run`` all plan through :func:`hpcflow.dag.graph.build_graph`);
:attr:`PathRules.removable` travels with each attempt so that the worker checks again
before it removes or moves an output (:mod:`hpcflow.worker.confine`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Protocol

from hpcflow.errors import SpecProblem
from hpcflow.spec.placeholders import Template
from hpcflow.spec.sources import literal_folder
from hpcflow.spec.yamlpos import Path

if TYPE_CHECKING:
    from hpcflow.spec.loader import LoadedWorkflow


class PlannedPaths(Protocol):
    """What :func:`check_paths` reads of a task instance (a
    :class:`hpcflow.dag.instances.TaskInstance`)."""

    @property
    def id(self) -> str: ...
    @property
    def spec_index(self) -> int: ...
    @property
    def workdir(self) -> str: ...
    @property
    def input_patterns(self) -> tuple[str, ...]: ...
    @property
    def outputs(self) -> tuple[str, ...]: ...


#: Why a path is refused: "outside" (lexically), or (a link it goes through, where it
#: leads); None: allowed.
Refusal = str | tuple[str, str] | None
#: What a folder a value added is: "missing", a link leading out (as in Refusal), or
#: None (an ordinary folder, or a link that stays inside).
Verdict = str | tuple[str, str] | None

#: Most escaping paths reported per workflow (one sample sheet can hold a million).
MAX_REPORTED = 20


def within(path: str, folder: str) -> bool:
    """Whether normalised absolute ``path`` is ``folder`` or lies below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass
class Looked:
    """What :func:`check_paths` learnt of the file system, so that it looks once."""

    #: A folder's verdict (see :data:`Verdict`), by path.
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    #: A folder's entries and those of them that are symbolic links (None: no folder).
    listings: dict[str, tuple[frozenset[str], frozenset[str]] | None] = field(default_factory=dict)

    def listing(self, folder: str) -> tuple[frozenset[str], frozenset[str]] | None:
        if folder not in self.listings:
            try:
                with os.scandir(folder) as entries:
                    found = [(e.name, e.is_symlink()) for e in entries]
            except OSError:
                self.listings[folder] = None
            else:
                names = frozenset(name for name, _ in found)
                self.listings[folder] = (names, frozenset(n for n, link in found if link))
        return self.listings[folder]


@dataclass(frozen=True)
class PathRule:
    """Where the rendered paths of one path template may lie; None stands for a path
    with no placeholder (allowed anywhere)."""

    #: The folders a rendered path may lie in, lexically normalised.
    roots: tuple[str, ...]
    #: The same folders with their symbolic links resolved.
    real_roots: tuple[str, ...]
    #: The folder the literal text before the first placeholder names: the parts of a
    #: rendered path below it are the ones values made.
    anchor: str
    #: The placeholders of the path (its workdir's too).
    names: frozenset[str] = frozenset()

    @property
    def prefix(self) -> str:
        """``anchor`` with a trailing ``/``: a path that starts with it and has no other
        ``/`` after it is allowed at once (the common case, checked per instance)."""
        return self.anchor.rstrip("/") + "/"

    @classmethod
    def make(cls, template: Template, workflow_dir: str, trusted: Sequence[str]) -> PathRule:
        """The rule of an absolute path ``template`` in a workflow in ``workflow_dir``;
        ``trusted``: other folders the author named (``from_files``)."""
        anchor = os.path.normpath(os.path.dirname(template.parts[0]) or "/")
        named = dict.fromkeys((workflow_dir, anchor, *trusted))
        # (A folder inside another adds nothing.)
        roots = tuple(r for r in named if not any(o != r and within(r, o) for o in named))
        real = tuple(dict.fromkeys(os.path.realpath(r) for r in roots))
        return cls(roots, real, anchor, frozenset(template.names))

    def refusal(self, path: str, looked: Looked) -> Refusal:
        """Why normalised ``path`` may not be used (None: it may): "outside", or the link
        it goes through and where that leads; ``looked`` keeps what was learnt of the
        file system."""
        prefix = self.prefix
        if not path.startswith(prefix):  # (the anchor is one of the roots)
            return None if any(within(path, root) for root in self.roots) else "outside"
        folder = path[: path.rfind("/")]
        if len(folder) < len(prefix):
            return None  # right in the anchor
        # The folders a value added, from the anchor down: each that exists must not be a
        # link that leads out. The first is looked up in the anchor's listing (one
        # listing, not a look-up per instance), the others one by one.
        parts = folder[len(prefix) :].split("/")
        listing = looked.listing(self.anchor)
        if listing is None or parts[0] not in listing[0]:
            return None  # nothing below it exists either
        probe = os.path.join(self.anchor, parts[0])
        for k, part in enumerate(parts):
            if k:
                probe = os.path.join(probe, part)
            elif part not in listing[1]:
                continue  # an ordinary folder
            if probe not in looked.verdicts:
                looked.verdicts[probe] = self._link_verdict(probe)
            verdict = looked.verdicts[probe]
            if verdict == "missing":
                return None
            if verdict is not None:
                return verdict
        return None

    def _link_verdict(self, folder: str) -> Verdict:
        """ "missing", a link leading out (and where), or neither (None)."""
        if not os.path.lexists(folder):
            return "missing"
        if not os.path.islink(folder):
            return None
        target = os.path.realpath(folder)
        if any(within(target, root) for root in (*self.real_roots, *self.roots)):
            return None
        return (folder, target)


@dataclass(frozen=True)
class PathRules:
    """The rules of one task definition's paths."""

    workdir: PathRule | None
    inputs: tuple[PathRule | None, ...]
    outputs: tuple[PathRule | None, ...]
    #: Where the worker may remove or move this task's outputs: the folders its outputs'
    #: rules allow, and each output the author wrote out in full.
    removable: tuple[str, ...] = ()
    #: The paths to check: (where in the task, which of the instance's paths (0: the
    #: workdir, 1: an input, 2: an output), its index, the rule, the rule's prefix).
    checks: tuple[tuple[Path, int, int, PathRule, str], ...] = ()


def rules_for(
    workdir: Template,
    inputs: Sequence[Template],
    outputs: Sequence[Template],
    workflow_dir: str,
    trusted: Sequence[str],
) -> PathRules:
    """The rules of a task whose (absolute) ``workdir`` template and relative or absolute
    ``inputs`` and ``outputs`` templates are given."""

    def rule(template: Template) -> PathRule | None:
        full = _joined(workdir, template)
        return None if full.is_constant else PathRule.make(full, workflow_dir, trusted)

    output_rules = tuple(rule(t) for t in outputs)
    removable: list[str] = [workflow_dir]
    for template, found in zip(outputs, output_rules, strict=True):
        if found is None:
            removable.append(os.path.normpath(_joined(workdir, template).parts[0]))
        else:
            removable += found.roots
    workdir_rule = None if workdir.is_constant else PathRule.make(workdir, workflow_dir, trusted)
    input_rules = tuple(rule(t) for t in inputs)
    checks: list[tuple[Path, int, int, PathRule, str]] = []
    if workdir_rule is not None:
        checks.append((("workdir",), 0, 0, workdir_rule, workdir_rule.prefix))
    for kind, key, rules in ((1, "inputs", input_rules), (2, "outputs", output_rules)):
        checks += [((key, j), kind, j, r, r.prefix) for j, r in enumerate(rules) if r is not None]
    return PathRules(
        workdir_rule, input_rules, output_rules, tuple(dict.fromkeys(removable)), tuple(checks)
    )


def _joined(workdir: Template, path: Template) -> Template:
    """The template of ``path`` in ``workdir`` (an absolute path's own)."""
    if os.path.isabs(path.parts[0]):
        return path
    head = workdir.parts[-1]
    head = head if head.endswith("/") else head + "/"
    return Template((*workdir.parts[:-1], head + path.parts[0], *path.parts[1:]))


def trusted_folders(foreach: object, workflow_dir: str) -> tuple[str, ...]:
    """The folder a task's ``from_files`` pattern names literally (its ``path:`` values
    are files found there), if any."""
    if not isinstance(foreach, dict):
        return ()
    source = foreach.get("from_files")
    pattern = source.get("glob") if isinstance(source, dict) else source
    if not isinstance(pattern, str):
        return ()
    return (os.path.normpath(os.path.join(workflow_dir, literal_folder(pattern))),)


def check_paths(
    loaded: LoadedWorkflow,
    rules: Sequence[PathRules | None],
    instances: Sequence[PlannedPaths],
    problems: list[SpecProblem],
) -> None:
    """Add a problem (with the file:line of the path in the workflow) for each instance
    path that a value leads out of where :class:`PathRule` allows; ``rules``: each task
    definition's."""
    needed: dict[int, list[tuple[Path, int, int, PathRule, str]]] = {}
    for spec_index, task_rules in enumerate(rules):
        harmless = _harmless(loaded, spec_index)
        checks = [
            c for c in (task_rules.checks if task_rules else ()) if not c[3].names <= harmless
        ]
        if checks:
            needed[spec_index] = checks
    if not needed:
        return  # (the common case: no path has a placeholder a text value fills in)
    looked = Looked()
    found = 0
    # An instance's task definition's instances come together: checked a group at a time.
    for spec_index, group in itertools.groupby(instances, attrgetter("spec_index")):
        if spec_index not in needed:
            continue
        members = list(group)
        for where, kind, j, rule, prefix in needed[spec_index]:
            if kind == 0:
                paths = [inst.workdir for inst in members]
            else:
                paths = [
                    (inst.input_patterns if kind == 1 else inst.outputs)[j] for inst in members
                ]
            cut = len(prefix)
            # A file right in the folder its literal text names is fine at once.
            for k in [k for k, p in enumerate(paths) if not p.startswith(prefix) or "/" in p[cut:]]:
                why = rule.refusal(paths[k], looked)
                if why is None:
                    continue
                found += 1
                if found <= MAX_REPORTED:
                    problems.append(_problem(loaded, members[k], where, paths[k], rule, why))
    if found > MAX_REPORTED:
        problems.append(
            SpecProblem(
                loaded.positions.file,
                None,
                None,
                "",
                f"... and {found - MAX_REPORTED:,} more paths that values lead outside",
            )
        )


def _harmless(loaded: LoadedWorkflow, spec_index: int) -> frozenset[str]:
    """The parameters of a task whose every value is a number or true/false: their text
    (digits, ``-``, ``.``, ``e``, ``true``) never holds a ``/`` nor makes ``..``, so a
    path they alone fill in needs no check (a range's sweep, the common large case)."""
    task = loaded.workflow.tasks[spec_index]
    sweep = loaded.sweeps.get(task.name)
    values: dict[str, Sequence[object]] = {k: (v,) for k, v in task.params.items()}
    for group in sweep.groups if sweep is not None else ():
        values.update((axis.name, axis.values) for axis in group)
    return frozenset(
        name
        for name, given in values.items()
        if isinstance(given, range) or all(type(v) in (int, float, bool) for v in given)
    )


def _position(loaded: LoadedWorkflow, spec_index: int, where: Path) -> Path:
    """Where the path's text is in the workflow (a workdir may be the defaults')."""
    task = loaded.workflow.tasks[spec_index]
    if where != ("workdir",):
        return ("tasks", spec_index, *where)
    if task.workdir is not None:
        return ("tasks", spec_index, "workdir")
    if loaded.workflow.defaults.workdir is not None:
        return ("defaults", "workdir")
    return ("workdir",)


def _problem(
    loaded: LoadedWorkflow,
    inst: PlannedPaths,
    where: Path,
    path: str,
    rule: PathRule,
    why: str | tuple[str, str],
) -> SpecProblem:
    at = _position(loaded, inst.spec_index, where)
    what, instance = {"inputs": "input", "outputs": "output"}.get(str(where[0]), "workdir"), inst.id
    allowed = " or ".join(rule.roots)
    if isinstance(why, str):
        message = f"a value leads {what} of {instance} out of the workflow: {path}"
    else:
        link, target = why
        message = (
            f"a value leads {what} of {instance} through the symbolic link {link}, "
            f"to {target} outside the workflow"
        )
    hint = (
        f"a value may not take a path outside {allowed}: check the value (a sample sheet "
        "cell or sweep value with '..' or '/'), or write the folder into the path "
        'literally, e.g. outputs: ["/scratch/me/{sample}.txt"] keeps values inside '
        "/scratch/me"
    )
    return loaded.positions.problem(at, message, hint=hint)
