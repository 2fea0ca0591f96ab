"""How the driver hands a round of chunks to its engine: in one call.

With Dask, every ``Client.submit`` is a graph update of its own at the scheduler, and the
scheduler unpickles a task's arguments and pickles them again for the worker. At many
nodes the scheduler's CPU is what limits tiny tasks (bench/pilot.py, section
``pilot-scale``), so a round of chunks goes as one ``Client.map`` (one graph update), and
each chunk's calls as one pickled ``bytes`` that the scheduler passes on untouched
(:func:`hpcflow.worker.chunk.pack_chunk`).

The pool engine (:class:`hpcflow.worker.pool.PoolClient`) has no scheduler and nothing to
pickle: it takes the calls as they are (its own ``submit_chunks``).
"""

from __future__ import annotations

from typing import Any

from hpcflow.worker.calls import TaskCall
from hpcflow.worker.chunk import pack_chunk, run_packed_chunk


def submit_chunks(
    client: Any, chunks: list[list[TaskCall]], keys: list[str], resources: dict[str, float]
) -> list[Any]:
    """Submit each of ``chunks`` as the engine task named by the same place in ``keys``,
    all asking for ``resources``; their futures, in the same order."""
    native = getattr(client, "submit_chunks", None)
    if native is not None:
        return list(native(chunks, keys=keys, resources=resources))
    if len(chunks) == 1:
        return [
            client.submit(
                run_packed_chunk,
                pack_chunk(chunks[0]),
                key=keys[0],
                resources=resources,
                pure=False,
            )
        ]
    return list(
        client.map(
            run_packed_chunk,
            [pack_chunk(calls) for calls in chunks],
            key=keys,
            resources=resources,
            pure=False,
        )
    )
