"""``python -m hpcflow.worker.pycall``: one Python task in its own process (used when the
task has a timeout or its own working directory). Its call comes in on standard input
(:func:`hpcflow.worker.values.encode_call`): the function, its parameters, the values it
receives and where its results go."""

from __future__ import annotations

import os
import sys


def main(call_bytes: bytes) -> int:
    from hpcflow.worker.execute import call_python
    from hpcflow.worker.values import decode_call

    call_python(decode_call(call_bytes), os.getcwd())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.stdin.buffer.read()))
