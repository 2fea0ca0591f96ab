"""hpcflow: one workflow.yaml, run on a laptop's Dask cluster or inside HPC allocations."""

__version__ = "0.1.0"
