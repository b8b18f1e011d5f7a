"""`envkit probe`: run the probe in any conda env (envkit-made or not) and, for an envkit env,
record its health: the record says what the last probe found, and where it ran. With `--slurm`
the probe runs as a Slurm batch job on the nodes the sbatch options ask for
(envkit.cluster.slurm)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from envkit.commands import Result
from envkit.commands.arguments import env_args, json_flag
from envkit.core.errors import ExitCode
from envkit.install.create import probe_and_keep
from envkit.prefix.envs import select_env
from envkit.probe.model import ProbeReport
from envkit.ui.terminal import UI
from envkit.ui.views import probe_view


def add_arguments(p: argparse.ArgumentParser) -> None:
    env_args(p)
    json_flag(p)
    p.add_argument(
        "--slurm",
        nargs=argparse.REMAINDER,
        metavar="SBATCH_ARG",
        help="run the probe as a Slurm batch job and wait for it; what follows goes to sbatch (e.g. --slurm -p gpu --gres=gpu:2)",
    )


def invoke(args: argparse.Namespace, ui: UI) -> Result[ProbeReport]:
    def submitted(job: str) -> None:
        sys.stderr.write(f"submitted Slurm job {job}; waiting for it to end (Ctrl-C cancels it)\n")
        sys.stderr.flush()

    return probe(select_env(args.name, args.prefix), args.slurm, submitted)


def probe(prefix: Path, slurm: Sequence[str] | None = None, on_submitted: Callable[[str], None] | None = None) -> Result[ProbeReport]:
    elsewhere = None
    if slurm is not None:
        from envkit.cluster.slurm import checked_sbatch_args, probe_on_slurm
        from envkit.probe.runner import env_python

        env_python(prefix)  # an env with no python is said here, before a job waits in a queue for it
        elsewhere = partial(probe_on_slurm, sbatch_args=checked_sbatch_args(slurm), on_submitted=on_submitted)
    report, kept = probe_and_keep(prefix, elsewhere=elsewhere)
    code = ExitCode.OK if report.healthy else ExitCode.FINDINGS
    return Result("probe", report, int(code), (kept,) if kept else (), view=probe_view)
