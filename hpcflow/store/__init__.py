"""The run directory: every path, the state database, atomic writes, locks and the memo."""
