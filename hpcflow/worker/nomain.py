"""Worker processes that do not run the parent's main script first.

A process started by multiprocessing's ``spawn`` or ``forkserver`` method runs the
parent's ``__main__`` script again (as ``__mp_main__``) before it does anything, so that
functions defined there can be unpickled. hpcflow's Python workers never receive such a
function: a task names its function by module (:func:`hpcflow.worker.execute.resolve_callable`).
And a script that drives hpcflow from its top level, as a notebook does (``wf.run()``
with no ``if __name__ == "__main__":``), would run its whole workflow again in every
worker. So the pool's workers are started with the main script hidden from
multiprocessing for the moment it takes to start one.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.context import ForkServerContext, ForkServerProcess

#: One start at a time hides and restores the main module's attributes.
_HIDING = threading.Lock()
#: What multiprocessing finds the main script by (a file, or a module run with -m).
_FINDS_MAIN = ("__file__", "__spec__")


class _WorkerProcess(ForkServerProcess):
    def start(self) -> None:
        with main_script_hidden():
            super().start()


class _WorkerContext(ForkServerContext):
    Process = _WorkerProcess  # type: ignore[assignment]


def worker_context(preload: Sequence[str]) -> ForkServerContext:
    """A forkserver context (its server imports ``preload`` once) whose processes do
    not run the parent's main script."""
    context = _WorkerContext()
    context.set_forkserver_preload(list(preload))
    return context


@contextmanager
def main_script_hidden() -> Iterator[None]:
    """While inside, ``__main__`` has neither a file nor a module spec: a process
    started now (spawn, forkserver) does not run it."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    with _HIDING:
        saved = {key: main.__dict__[key] for key in _FINDS_MAIN if key in main.__dict__}
        main.__dict__.pop("__file__", None)
        if "__spec__" in saved:
            main.__spec__ = None
        try:
            yield
        finally:
            main.__dict__.update(saved)
