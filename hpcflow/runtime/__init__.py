"""The driver: runs a task graph on a Dask cluster, with retries, timeouts and resume."""
