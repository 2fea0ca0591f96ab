"""The embedded default: a Dask LocalCluster on this machine."""
