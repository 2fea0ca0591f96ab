"""The worker side: what runs one attempt of a task, wherever it runs.

Process groups, the long-lived job-control shells, shell batches and chunks, Python
calls, the journal of successes, the local pool and the local Dask cluster, and the
nannies that reap what a killed worker left running. Nothing here imports the engine:
a worker knows a :class:`~hpcflow.worker.calls.TaskCall`, never the graph or the driver.
"""
