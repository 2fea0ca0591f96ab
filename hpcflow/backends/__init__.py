"""HOW an allocation is obtained: local (this machine), slurm, pbs."""
