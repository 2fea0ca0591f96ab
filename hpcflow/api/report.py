"""A run's report: one self-contained HTML page with its DAG, timeline, tasks and costs
(``hpcflow report``, :meth:`hpcflow.api.Run.report`)."""

from __future__ import annotations

from pathlib import Path

from hpcflow.report.data import collect
from hpcflow.report.html import render
from hpcflow.store.atomic import write_text_atomic
from hpcflow.store.paths import RunPaths


def write_report(paths: RunPaths, output: Path | None = None) -> Path:
    """Write the report of the run at ``paths`` to ``output`` (default:
    ``RUN_DIR/report.html``), whole or not at all; returns where it is."""
    page = render(collect(paths))
    target = output or paths.report
    write_text_atomic(target, page)
    return target
