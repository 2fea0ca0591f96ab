"""Render :class:`ReportData` as one HTML file with inline SVG, CSS and script.

Everything the page needs is inside it (clusters are often offline); every run-supplied
string is escaped by Jinja's autoescaping, and the only script sorts the table.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from importlib import resources

import jinja2

from hpcflow._version import __version__
from hpcflow.report.data import ReportData
from hpcflow.report.layout import dag_layers, pack_lanes
from hpcflow.store import statedb as st

#: More than this and the page gets slow: the table and timeline show the first ones.
MAX_ROWS = 5000

BOX_W, BOX_H, GAP_X, GAP_Y = 180, 46, 70, 18
TIMELINE_W, LANE_H, LABEL_W = 1000, 12, 150

STATE_COLOURS: dict[str, str] = {
    st.SUCCEEDED: "#2e9d57",
    st.CACHED: "#8fc9a3",
    st.FAILED: "#d0443e",
    st.RUNNING: "#3b7dd8",
    st.PENDING: "#b7bcc4",
    st.SKIPPED: "#e49a3c",
    st.CANCELLED: "#e49a3c",
    st.INTERRUPTED: "#8a6fd1",  # an attempt its checkpoint signal stopped
}


@dataclass(frozen=True)
class Box:
    name: str
    label: str
    detail: str
    x: float
    y: float
    colour: str


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    colour: str
    title: str


def render(data: ReportData, now: float | None = None) -> str:
    """The report page for ``data``."""
    now = time.time() if now is None else now
    env = jinja2.Environment(
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )
    text = resources.files("hpcflow.report").joinpath("templates/report.html.j2").read_text()
    template = env.from_string(text)
    boxes, edges, dag_w, dag_h = _dag(data)
    bars, rows, hosts, span, tl_h = _timeline(data, now)
    ticks = [
        (LABEL_W + TIMELINE_W * i / 4, _duration(span * i / 4) if span else "") for i in range(5)
    ]
    by_name = {d.name: d for d in data.definitions}
    table = sorted(data.tasks, key=lambda t: (t.state != st.FAILED, t.idx))[:MAX_ROWS]
    return template.render(
        data=data,
        version=__version__,
        generated=_when(now),
        started=_when(data.started),
        ended=_when(data.ended),
        elapsed=_duration((data.ended or now) - data.started) if data.started else "?",
        boxes=boxes,
        edges=edges,
        dag_w=dag_w,
        dag_h=dag_h,
        bars=bars,
        lanes=rows,
        hosts=hosts,
        span=_duration(span),
        ticks=ticks,
        timeline_h=tl_h,
        timeline_w=TIMELINE_W,
        label_w=LABEL_W,
        lane_h=LANE_H,
        table=table,
        truncated=len(data.tasks) > MAX_ROWS,
        shown_attempts=min(len(data.attempts), MAX_ROWS),
        gpus={name: d.gpus for name, d in by_name.items()},
        colours=STATE_COLOURS,
        fmt_duration=_duration,
        fmt_bytes=_bytes,
        fmt_when=_when,
    )


def _dag(data: ReportData) -> tuple[list[Box], list[str], float, float]:
    names = [d.name for d in data.definitions]
    layer = dag_layers(names, data.edges)
    slot: dict[int, int] = {}
    boxes: dict[str, Box] = {}
    for d in data.definitions:
        column = layer[d.name]
        row = slot.get(column, 0)
        slot[column] = row + 1
        states = d.states
        colour = STATE_COLOURS[_dominant(states)]
        done = states.get(st.SUCCEEDED, 0) + states.get(st.CACHED, 0)
        boxes[d.name] = Box(
            name=d.name,
            label=d.name if len(d.name) <= 22 else d.name[:21] + "…",
            detail=f"{done}/{d.instances} done"
            + (f", {states[st.FAILED]} failed" if states.get(st.FAILED) else ""),
            x=10 + column * (BOX_W + GAP_X),
            y=10 + row * (BOX_H + GAP_Y),
            colour=colour,
        )
    paths = []
    for a, b in sorted(data.edges):
        if a in boxes and b in boxes:
            s, t = boxes[a], boxes[b]
            x1, y1 = s.x + BOX_W, s.y + BOX_H / 2
            x2, y2 = t.x, t.y + BOX_H / 2
            mid = (x1 + x2) / 2
            paths.append(
                f"M{x1:.0f},{y1:.0f} C{mid:.0f},{y1:.0f} {mid:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"
            )
    width = 20 + (max(layer.values(), default=0) + 1) * (BOX_W + GAP_X) - GAP_X
    height = 20 + max(slot.values(), default=1) * (BOX_H + GAP_Y) - GAP_Y
    return list(boxes.values()), paths, width, height


def _dominant(states: dict[str, int]) -> str:
    for state in (st.FAILED, st.RUNNING, st.PENDING, st.SKIPPED, st.CANCELLED):
        if states.get(state):
            return state
    return st.SUCCEEDED if states.get(st.SUCCEEDED) else st.CACHED


def _timeline(
    data: ReportData, now: float
) -> tuple[list[Bar], list[tuple[str, float]], int, float, float]:
    """Bars per host (packed into lanes), grouped by pool in a run with several, then
    one row per allocation."""
    by_idx = {t.idx: t for t in data.tasks}
    spans = [
        (a, a.started, a.ended if a.ended is not None else now)
        for a in data.attempts[:MAX_ROWS]
        if a.started is not None
    ]
    alloc_spans = [(al, al.submitted, al.updated or now) for al in data.allocations]
    starts = [s for _, s, _ in spans] + [s for _, s, _ in alloc_spans]
    ends = [e for _, _, e in spans] + [e for _, _, e in alloc_spans]
    if not starts:
        return [], [], 0, 0.0, 0.0
    t0, t1 = min(starts), max(ends)
    scale = TIMELINE_W / max(t1 - t0, 1e-6)
    bars: list[Bar] = []
    labels: list[tuple[str, float]] = []
    y = 0.0

    def lane_of(a: st.AttemptRecord) -> tuple[str, str]:
        task = by_idx.get(a.task_idx)
        return (data.pools.get(task.name, "") if task else "", a.host or "?")

    hosts = sorted({lane_of(a) for a, _, _ in spans})
    for pool, host in hosts:
        mine = [(a, s, e) for a, s, e in spans if lane_of(a) == (pool, host)]
        lanes = pack_lanes([(s, e) for _, s, e in mine])
        labels.append((f"{pool} · {host}" if pool else host, y))
        for (a, s, e), lane in zip(mine, lanes, strict=True):
            task = by_idx.get(a.task_idx)
            name = task.id if task else str(a.task_idx)
            bars.append(
                Bar(
                    LABEL_W + (s - t0) * scale,
                    y + lane * LANE_H,
                    max(1.0, (e - s) * scale),
                    STATE_COLOURS.get(a.state, "#888"),
                    f"{name} (attempt {a.attempt}) {a.state} · {_duration(e - s)} on {host}",
                )
            )
        y += (max(lanes, default=0) + 1) * LANE_H + 8
    for al, s, e in alloc_spans:
        pool = f" · {al.pool}" if al.pool else ""
        labels.append((f"allocation {al.native_id}{pool}", y))
        bars.append(
            Bar(
                LABEL_W + (s - t0) * scale,
                y,
                max(1.0, (e - s) * scale),
                "#7a6fd0",
                f"allocation {al.native_id} ({al.backend}{', pool ' + al.pool if al.pool else ''}) "
                f"{al.native_state or al.state}: "
                f"submitted {_when(s)}, last seen {_when(e)}",
            )
        )
        y += LANE_H + 8
    return bars, labels, len(hosts), t1 - t0, y


def _when(stamp: float | None) -> str:
    if not stamp:
        return "?"
    return datetime.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _bytes(value: int | None) -> str:
    if not value:
        return ""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"
