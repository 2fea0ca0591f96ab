"""``python -m hpcflow.worker.pycall FUNC KWARGS_JSON RESULT_PATH``: one Python task in its
own process (used when the task has a timeout or its own working directory)."""

from __future__ import annotations

import json
import os
import sys

from hpcflow.store.atomic import write_text_atomic


def main(argv: list[str]) -> int:
    from hpcflow.worker.execute import resolve_callable

    spec, kwargs_json, result_path = argv
    func = resolve_callable(spec, os.getcwd())
    result = func(**json.loads(kwargs_json))
    # Atomic: the driver, or a reader on another node, never sees a half-written result.
    write_text_atomic(result_path, json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
