"""`envkit probe`: run the probe in any conda env (envkit-made or not) and, for an envkit env,
record its health: the record says what the last probe found, and where it ran. With `--slurm`
the probe runs as a Slurm batch job on the nodes the sbatch options ask for
(envkit.cluster.slurm)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from envkit.commands import Result
from envkit.core.errors import ExitCode
from envkit.install.create import probe_and_keep


def probe(prefix: Path, slurm: Sequence[str] | None = None, on_submitted: Callable[[str], None] | None = None) -> Result:
    elsewhere = None
    if slurm is not None:
        from envkit.cluster.slurm import checked_sbatch_args, probe_on_slurm
        from envkit.probe.runner import env_python

        env_python(prefix)  # an env with no python is said here, before a job waits in a queue for it
        elsewhere = partial(probe_on_slurm, sbatch_args=checked_sbatch_args(slurm), on_submitted=on_submitted)
    report, kept = probe_and_keep(prefix, elsewhere=elsewhere)
    return Result("probe", report, int(ExitCode.OK if report.healthy else ExitCode.FINDINGS), (kept,) if kept else ())
