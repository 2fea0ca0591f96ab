"""Software environments of tasks: the container, modules and Python environment a task
runs in, turned into the argv that starts it there, with what identifies them (for the
fingerprint) and what must exist before a run starts (the preflight)."""
