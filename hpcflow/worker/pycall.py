"""``python -m hpcflow.worker.pycall FUNC KWARGS_JSON RESULT_PATH VALUES VALUE_OUT``: one
Python task in its own process (used when the task has a timeout or its own working
directory). VALUES and VALUE_OUT are what the call receives and where its value goes
(:mod:`hpcflow.worker.values`)."""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    from hpcflow.worker.execute import call_python
    from hpcflow.worker.values import decode_values

    spec, kwargs_json, result_path, values, value_out = argv
    call_python(
        spec, json.loads(kwargs_json), decode_values(values), result_path, value_out, os.getcwd()
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
