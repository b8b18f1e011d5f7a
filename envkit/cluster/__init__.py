"""envkit on a cluster: envs published as environment modules, and probes run as Slurm jobs."""
