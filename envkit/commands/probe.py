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
from envkit.commands.arguments import env_args, given, json_flag
from envkit.core.errors import ExitCode, UsageError
from envkit.install.create import probe_and_keep
from envkit.prefix.envs import select_env
from envkit.probe.model import ProbeReport
from envkit.ui.terminal import UI
from envkit.ui.views import probe_view


def add_arguments(p: argparse.ArgumentParser) -> None:
    env_args(p)
    json_flag(p)
    p.add_argument(
        "--attest",
        action="store_true",
        help="keep the verdict in the lock the env was made from, as a proof for this kind of machine (the env must be the lock's slice)",
    )
    p.add_argument("--lock", type=given, metavar="FILE", help="with --attest: the lock to attest (default: the one the env was made from)")
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

    if args.lock and not args.attest:
        raise UsageError("--lock names the lock to attest: give --attest too")
    return probe(select_env(args.name, args.prefix), args.slurm, submitted, attest=args.attest, lock=args.lock)


def probe(
    prefix: Path,
    slurm: Sequence[str] | None = None,
    on_submitted: Callable[[str], None] | None = None,
    *,
    attest: bool = False,
    lock: str | None = None,
) -> Result[ProbeReport]:
    attesting = None
    if attest:  # refused before a probe runs (or a job waits in a queue) for nothing
        from envkit.prefix.record import read_record
        from envkit.team.attest import lock_to_attest

        attesting = lock_to_attest(prefix, read_record(prefix), lock)
    elsewhere = None
    if slurm is not None:
        from envkit.cluster.slurm import checked_sbatch_args, probe_on_slurm
        from envkit.probe.runner import env_python

        env_python(prefix)  # an env with no python is said here, before a job waits in a queue for it
        elsewhere = partial(probe_on_slurm, sbatch_args=checked_sbatch_args(slurm), on_submitted=on_submitted)
    report, kept = probe_and_keep(prefix, elsewhere=elsewhere)
    code = ExitCode.OK if report.healthy else ExitCode.FINDINGS
    messages: tuple[str, ...] = (kept,) if kept else ()
    if attesting is not None:
        from envkit.team.attest import attest as keep_proof
        from envkit.team.attest import proof_of

        proof = proof_of(report, attesting)
        keep_proof(proof, attesting.path)
        messages += (f"attested in {attesting.path}: {proof.line()}",)
    return Result("probe", report, int(code), messages, view=probe_view)
