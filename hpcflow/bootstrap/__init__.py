"""Runs INSIDE an allocation, on every rank: ``python -m hpcflow.bootstrap RUN_DIR``.

Rank 0 starts the Dask scheduler, rank 1 the driver (the same runtime as local runs),
ranks 2.. the workers. Everything a rank needs is found from RUN_DIR.
"""
