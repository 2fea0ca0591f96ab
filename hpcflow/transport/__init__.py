"""How Dask's processes talk: the transport (tcp, tls, ucx) and the per-run credentials.

``certificates`` makes a run's private certificate authority (no Dask import);
``security`` turns a run directory into the ``Security`` object every process passes
to distributed, and says what each transport means for who can connect.
"""
