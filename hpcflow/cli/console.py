"""Rich rendering: live progress per task name, summary tables, failure reports."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from hpcflow.api import TaskState
from hpcflow.api.units import format_elapsed

if TYPE_CHECKING:
    from hpcflow.store.paths import RunPaths
    from hpcflow.store.statedb import TaskRow

#: The states after which a task does not change any more (in this run).
FINAL_STATES = frozenset(state for state in TaskState if state.final)


def counts_table(
    counts: dict[str, dict[str, int]],
    order: Iterable[str],
    *,
    title: str | None = None,
    eta: str | None = None,
) -> Table:
    """One row per task name: done/running/pending/failed... and a bar."""
    table = Table(title=title, title_justify="left", expand=False, box=None, pad_edge=False)
    table.add_column("task", style="bold")
    table.add_column("done", justify="right", style="green")
    table.add_column("cached", justify="right", style="cyan")
    table.add_column("run", justify="right", style="yellow")
    table.add_column("wait", justify="right")
    table.add_column("fail", justify="right", style="red")
    table.add_column("skip", justify="right", style="magenta")
    table.add_column("", width=16)
    table.add_column("total", justify="right")
    for name in order:
        c = counts.get(name, {})
        total = sum(c.values())
        finished = sum(c.get(s, 0) for s in FINAL_STATES)
        table.add_row(
            name,
            str(c.get(TaskState.SUCCEEDED, 0)),
            str(c.get(TaskState.CACHED, 0)),
            str(c.get(TaskState.RUNNING, 0)),
            str(c.get(TaskState.PENDING, 0)),
            str(c.get(TaskState.FAILED, 0) + c.get(TaskState.CANCELLED, 0)),
            str(c.get(TaskState.SKIPPED, 0)),
            ProgressBar(total=max(total, 1), completed=finished, width=16),
            str(total),
        )
    if eta:
        table.caption = eta
    return table


class LiveProgress:
    """Observer for the driver that redraws a table a few times a second."""

    def __init__(self, console: Console, order: list[str]) -> None:
        self.console = console
        self.order = order
        self._live: Live | None = None
        self._started = time.monotonic()
        self._history: deque[tuple[float, int]] = deque(maxlen=50)
        self._last: dict[str, dict[str, int]] = {}

    def __enter__(self) -> LiveProgress:
        self._live = Live(console=self.console, refresh_per_second=4, transient=True)
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, counts: dict[str, dict[str, int]]) -> None:
        self._last = counts
        if self._live is None:
            return
        total = sum(sum(c.values()) for c in counts.values())
        done = sum(c.get(s, 0) for c in counts.values() for s in FINAL_STATES)
        now = time.monotonic()
        self._history.append((now, done))
        eta = _eta(self._history, total - done)
        elapsed = now - self._started
        caption = f"{done}/{total} tasks · {format_elapsed(elapsed)} elapsed" + (
            f" · ETA {eta}" if eta else ""
        )
        self._live.update(counts_table(counts, self.order, eta=caption))


def _eta(history: deque[tuple[float, int]], left: int) -> str | None:
    if len(history) < 2 or left <= 0:
        return None
    (t0, d0), (t1, d1) = history[0], history[-1]
    if d1 <= d0 or t1 <= t0:
        return None
    seconds = left / ((d1 - d0) / (t1 - t0))
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.0f}m"


def failures(
    console: Console, paths: RunPaths, rows: list[TaskRow], limit: int = 10, run: str = ""
) -> None:
    """Print :func:`failures_renderable`."""
    console.print(failures_renderable(paths, rows, limit, run))


def failures_renderable(
    paths: RunPaths, rows: list[TaskRow], limit: int = 10, run: str = ""
) -> Group:
    """Task id, exit code, message, where its stderr is and the last lines of it, of
    failed tasks in run ``run`` (its id; default: its folder's name). Where is its
    ``.err`` file, or with per-worker logs the ``hpcflow logs`` command that prints it
    and the worker's file that holds it."""
    from hpcflow.api.logs import log_index, stderr_place, stderr_tail

    parts: list[Text] = []
    index = log_index(paths)
    for row in rows[:limit]:
        where = stderr_place(paths, run or paths.run_dir.name, row, index)
        code = "-" if row.exit_code is None else str(row.exit_code)
        parts.append(
            Text.assemble(
                ("✗ ", "red"), (row.id, "bold"), f"  exit {code}  attempts {row.attempts}"
            )
        )
        if row.message:
            parts.append(Text(f"    {row.message}"))
        if where.command is None:
            parts.append(Text(f"    log: {where.path}", style="dim"))
        else:  # per-worker logs: no such file; the command, then the worker's file
            parts.append(Text(f"    log: {where.command}", style="dim"))
            for file in where.files:
                parts.append(Text(f"         in {file}", style="dim"))
        for line in stderr_tail(paths, row, index=index):
            parts.append(Text(f"    │ {line}", style="dim"))
    if len(rows) > limit:
        parts.append(Text(f"  … and {len(rows) - limit} more (hpcflow status --json)"))
    return Group(*parts)


def tilde(path: str) -> str:
    """``path`` with the home folder as ``~``."""
    home = str(Path.home())
    if home != "/" and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home) :]
    return path


def short_path(path: str, width: int) -> str:
    """``path`` for a column ``width`` wide: the home folder as ``~``, and when still
    longer, its middle left out: its first folder, ``…``, then as much of its end (the
    file name and the folders above it) as fits; only the end where even that is too long.
    """
    path = tilde(path)
    if len(path) <= width:
        return path
    parts = path.split("/")
    head = "/".join(parts[: 2 if parts[0] == "" else 1]) + "/"  # "/scratch/", "~/"
    end = width - len(head) - 1
    if len(parts) > 2 and end > len(parts[-1]):  # the file name and its slash at least
        return head + "…" + path[len(path) - end :]
    return "…" + path[len(path) - max(0, width - 1) :]


def fit_columns(
    width: int,
    natural: list[int],
    minimum: list[int],
    *,
    shrink: tuple[int, ...] = (),
    drop: tuple[int, ...] = (),
) -> list[int | None]:
    """The widths of a table's columns in a terminal ``width`` wide (None: left out).

    Each column has its ``natural`` width (its widest cell or heading) unless the table
    is then too wide: the columns in ``shrink`` narrow, in that order, down to their
    ``minimum`` (a path loses its middle, a description wraps), and where that is not
    enough the columns in ``drop`` are left out, in that order, before shrinking again.
    No column narrows further: a table that still cannot fit is as wide as its columns
    need (:func:`fitted_table`; the terminal wraps its lines, no id is cut).
    """
    for left_out in range(len(drop) + 1):
        widths: list[int | None] = [
            None if k in drop[:left_out] else w for k, w in enumerate(natural)
        ]
        for k in shrink:
            over = table_width(widths) - width
            current = widths[k]
            if over > 0 and current is not None:
                widths[k] = max(minimum[k], current - over)
        if table_width(widths) <= width:
            break
    return widths


def table_width(widths: list[int | None]) -> int:
    """How wide a table of columns so wide is (None: left out); they are two apart."""
    shown = [w for w in widths if w is not None]
    return sum(shown) + 2 * (len(shown) - 1)


def fitted_table(
    widths: list[int | None], heads: tuple[str, ...], wrap: tuple[str, ...] = ()
) -> Table:
    """A borderless table of the columns :func:`fit_columns` kept, each its width; the
    columns named in ``wrap`` wrap their text, the others never do. Print it with
    ``crop=False``: it is as wide as its columns, even where the terminal is narrower."""
    table = Table(box=None, pad_edge=False, width=table_width(widths))
    for head, w in zip(heads, widths, strict=True):
        if w is not None:
            table.add_column(head, width=w, no_wrap=head not in wrap, overflow="fold")
    return table
