"""Python functions that the python-tasks workflow calls; keyword arguments are the task's
parameters and the return value is recorded as JSON in the task's result.json."""

from __future__ import annotations

import json
from pathlib import Path


def square(x: int) -> dict[str, int]:
    """Square one number and also write it to a file the next step reads."""
    Path("results").mkdir(exist_ok=True)
    Path(f"results/square-{x}.json").write_text(json.dumps({"x": x, "square": x * x}))
    print(f"squared {x}")
    return {"x": x, "square": x * x}


def total(pattern: str) -> int:
    """Sum the squares written by the `square` tasks."""
    values = [json.loads(p.read_text())["square"] for p in sorted(Path().glob(pattern))]
    Path("results/total.txt").write_text(f"{sum(values)}\n")
    return sum(values)
