"""Benchmark workloads: task lists plus the input files each tool needs.

Standard library only: this module is imported by the harness (project
python) and by the child processes (project python for the floor, the
peers venv python for Parsl).

W1: N independent shell tasks ``echo i > out_i.txt``.
W2: layered DAG, ``layers`` x ``width`` tasks; task (l, j) depends on
    (l-1, j) and (l-1, (j+1) % width) and runs
    ``test -s IN1 && test -s IN2 && echo l_j > OUT`` (layer 0: just echo).
W3: N Python-function tasks ``inc(x) = x + 1``, x = 0..N-1; the driver
    checks the sum of the results.
W4: resume of a finished W1 run of N tasks: every output exists, nothing to do.
W5, W6: planning (dry run, nothing executes) of the W1 fan-out of N tasks;
    W5 is the 100k sweep, W6 the 1M sweep.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

W2_WIDTH = 20
W2_LAYERS = 50


@dataclass(frozen=True)
class Task:
    name: str
    cmd: str
    deps: tuple[int, ...]  # indices into the task list (always earlier)
    output: str
    content: str  # expected file content


@dataclass(frozen=True)
class Workload:
    key: str  # "W1" ... "W6"
    n: int  # W2: number of layers; otherwise the number of tasks
    width: int = W2_WIDTH

    @property
    def label(self) -> str:
        if self.key == "W2":
            return f"W2 {self.n}x{self.width}"
        return f"{self.key} N={self.n}"

    @property
    def ntasks(self) -> int:
        return self.n * self.width if self.key == "W2" else self.n

    @property
    def shell_key(self) -> str:
        """The shell workload whose files this one uses (W4-W6 reuse W1's fan-out)."""
        return "W2" if self.key == "W2" else "W1"

    def tasks(self) -> list[Task]:
        """The shell tasks (W1, W2; W4-W6 use W1's); W3 has none."""
        if self.key == "W2":
            return w2_tasks(self.n, self.width)
        if self.key == "W3":
            return []
        return w1_tasks(self.n)

    def describe(self) -> str:
        if self.key == "W1":
            return f"{self.n} independent shell tasks `echo i > out_i.txt`, 2 slots"
        if self.key == "W3":
            return f"{self.n} Python-function tasks `inc(x) = x + 1`, 2 slots"
        if self.key == "W4":
            return (
                f"resume of a finished W1 run of {self.n} tasks (every output exists, "
                "nothing to do); the first run is not timed"
            )
        if self.key in ("W5", "W6"):
            return f"planning a {self.n}-task sweep (W1 fan-out), dry run: nothing executes"
        return (
            f"layered DAG, {self.n} layers x {self.width} tasks = "
            f"{self.ntasks} shell tasks; (l, j) needs (l-1, j) and "
            f"(l-1, (j+1) % {self.width}); "
            "`test -s IN1 && test -s IN2 && echo l_j > OUT`, 2 slots"
        )


def w1_tasks(n: int) -> list[Task]:
    return [
        Task(
            name=f"t{i}",
            cmd=f"echo {i} > out_{i}.txt",
            deps=(),
            output=f"out_{i}.txt",
            content=f"{i}\n",
        )
        for i in range(n)
    ]


def w2_name(layer: int, j: int) -> str:
    return f"l{layer}_j{j}"


def w2_cmd(layer: int, j: int, width: int) -> str:
    me = w2_name(layer, j)
    if layer == 0:
        return f"echo {me} > {me}.txt"
    a = w2_name(layer - 1, j)
    b = w2_name(layer - 1, (j + 1) % width)
    return f"test -s {a}.txt && test -s {b}.txt && echo {me} > {me}.txt"


def w2_tasks(layers: int, width: int = W2_WIDTH) -> list[Task]:
    out: list[Task] = []
    for layer in range(layers):
        for j in range(width):
            me = w2_name(layer, j)
            if layer == 0:
                deps: tuple[int, ...] = ()
            else:
                base = (layer - 1) * width
                deps = (base + j, base + (j + 1) % width)
            out.append(
                Task(
                    name=me,
                    cmd=w2_cmd(layer, j, width),
                    deps=deps,
                    output=f"{me}.txt",
                    content=f"{me}\n",
                )
            )
    return out


def count_done(tasks: list[Task], directory: str) -> int:
    """Number of tasks whose output file exists with the expected content."""
    import os

    done = 0
    for t in tasks:
        try:
            with open(os.path.join(directory, t.output)) as fh:
                if fh.read() == t.content:
                    done += 1
        except OSError:
            pass
    return done


# --------------------------------------------------------------------------
# Input files for the tools
# --------------------------------------------------------------------------


def _q(s: str) -> str:
    # JSON strings are valid YAML double-quoted scalars; this keeps `{`, `>`,
    # `&&` and friends from being read as YAML syntax.
    return json.dumps(s)


W3_MODULE = "w3mod"
W3_SOURCE = '''"""W3 benchmark task: the cheapest useful Python call."""


def inc(x):
    return x + 1
'''


def w3_expected_sum(n: int) -> int:
    """Sum of inc(x) over x = 0..n-1."""
    return n * (n - 1) // 2 + n


def hpcflow_yaml(w: Workload) -> str:
    """hpcflow workflow file for the workload."""
    if w.key == "W3":
        return "\n".join(
            [
                "name: w3",
                "tasks:",
                "  - name: inc",
                "    foreach:",
                f"      x: {{range: [0, {w.n}]}}",
                f"    python: {W3_MODULE}:inc",
                "",
            ]
        )
    if w.shell_key == "W1":
        return "\n".join(
            [
                "name: w1",
                "tasks:",
                "  - name: t",
                "    foreach:",
                f"      i: {{range: [0, {w.n}]}}",
                f"    command: {_q('echo {i} > out_{i}.txt')}",
                f"    outputs: [{_q('out_{i}.txt')}]",
                "",
            ]
        )
    lines = ["name: w2", "tasks:"]
    for layer in range(w.n):
        for j in range(w.width):
            me = w2_name(layer, j)
            lines.append(f"  - name: {me}")
            lines.append(f"    command: {_q(w2_cmd(layer, j, w.width))}")
            lines.append(f"    outputs: [{_q(me + '.txt')}]")
            if layer > 0:
                a = w2_name(layer - 1, j)
                b = w2_name(layer - 1, (j + 1) % w.width)
                lines.append(f"    needs: [{a}, {b}]")
    lines.append("")
    return "\n".join(lines)


def snakefile(w: Workload) -> str:
    """Snakefile: one wildcard rule; files are the DAG edges."""
    if w.shell_key == "W1":
        return f"""\
N = {w.n}

wildcard_constraints:
    i=r"\\d+"

rule all:
    input: expand("out_{{i}}.txt", i=range(N))

rule t:
    output: "out_{{i}}.txt"
    shell: "echo {{wildcards.i}} > out_{{wildcards.i}}.txt"
"""
    return f"""\
LAYERS = {w.n}
WIDTH = {w.width}

wildcard_constraints:
    l=r"\\d+",
    j=r"\\d+"

def node_inputs(wc):
    l, j = int(wc.l), int(wc.j)
    if l == 0:
        return []
    return [f"l{{l - 1}}_j{{j}}.txt", f"l{{l - 1}}_j{{(j + 1) % WIDTH}}.txt"]

def node_cmd(wc):
    l, j = int(wc.l), int(wc.j)
    me = f"l{{l}}_j{{j}}"
    if l == 0:
        return f"echo {{me}} > {{me}}.txt"
    a, b = node_inputs(wc)
    return f"test -s {{a}} && test -s {{b}} && echo {{me}} > {{me}}.txt"

rule all:
    input: [f"l{{l}}_j{{j}}.txt" for l in range(LAYERS) for j in range(WIDTH)]

rule node:
    input: node_inputs
    output: "l{{l}}_j{{j}}.txt"
    params: cmd=node_cmd
    shell: "{{params.cmd}}"
"""
