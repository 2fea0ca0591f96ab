"""Draw bench/RESULTS.png: wall time versus task count per tool.

Run by bench/run.py with the peers venv python (which has matplotlib):
    python plot.py RESULTS.json OUT.png
The input is a JSON list of measurements (workload, ntasks, tool, wall_s,
status). Left panel: W1 (shell fan-out), one line per tool; right panel:
W5/W6 planning (dry run) and W3 (Python calls). A timed-out run is a lower
bound: drawn as an open marker with an upward arrow.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "floor": ("black", "o"),
    "hpcflow": ("tab:blue", "s"),
    "snakemake": ("tab:red", "^"),
    "snakemake_greedy": ("tab:orange", "v"),
    "parsl_htex": ("tab:green", "D"),
    "dask": ("tab:purple", "P"),
    "hyperqueue": ("tab:brown", "X"),
}


def series(rows: list[dict], keys: set[str]) -> dict[str, list[tuple[int, float, bool]]]:
    """Per tool: (tasks, median wall, is a lower bound) for the given workloads."""
    by: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in rows:
        if r["workload"] in keys:
            by[(r["tool"], r["ntasks"])].append(r)
    out: dict[str, list[tuple[int, float, bool]]] = defaultdict(list)
    for (tool, n), rs in sorted(by.items()):
        walls = sorted(r["wall_s"] for r in rs)
        bound = any(r["status"] == "timeout" for r in rs)
        out[tool].append((n, statistics.median(walls), bound))
    return out


def draw(
    ax, data: dict[str, list[tuple[int, float, bool]]], suffix: str = "", star: bool = False
) -> None:
    """One line per tool; lower bounds get an open marker and an upward arrow."""
    for tool, pts in data.items():
        color, marker = STYLE.get(tool, ("gray", "x"))
        if star:
            marker = "*"
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        ax.plot(xs, ys, color=color, marker=marker, label=tool + suffix, linewidth=1.2)
        for x, y, bound in pts:
            if bound:
                ax.plot(
                    [x],
                    [y],
                    marker=marker,
                    markersize=11,
                    markerfacecolor="white",
                    markeredgecolor=color,
                    linestyle="none",
                )
                ax.annotate(
                    "",
                    xy=(x, y * 1.8),
                    xytext=(x, y),
                    arrowprops={"arrowstyle": "->", "color": color},
                )


def main() -> int:
    src, png = sys.argv[1], sys.argv[2]
    with open(src) as fh:
        rows = json.load(fh)
    w1 = series(rows, {"W1"})
    plan = series(rows, {"W5", "W6"})
    w3 = series(rows, {"W3"})
    panels = [p for p in (w1, plan or w3) if p]
    if not panels:
        return 1
    fig, axes = plt.subplots(1, 2 if (w1 and (plan or w3)) else 1, figsize=(12, 5), squeeze=False)
    ax_list = list(axes[0])
    if w1:
        ax = ax_list.pop(0)
        draw(ax, w1)
        ax.set_title("W1: N trivial shell tasks, 2 slots (end to end)")
        ax.set_xlabel("tasks")
        ax.set_ylabel("wall time, s")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if plan or w3:
        ax = ax_list.pop(0)
        draw(ax, plan, " (dry run, W5/W6)")
        draw(ax, w3, " (W3 Python calls)", star=True)
        ax.set_title("planning (dry run) and Python-call tasks")
        ax.set_xlabel("tasks")
        ax.set_ylabel("wall time, s")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
