"""`envkit run`: a command under an env's activation, as `conda run` runs it; envkit exits with
its code, or ends by the signal that ended it."""

from __future__ import annotations

import argparse
import signal
from dataclasses import dataclass
from pathlib import Path

from envkit.activation.runenv import run_in_env
from envkit.commands import Result
from envkit.commands.arguments import env_args, json_flag
from envkit.prefix.envs import select_env
from envkit.ui.terminal import UI


@dataclass(frozen=True)
class RunOutcome:
    """What ran and how it ended; stdout and stderr are kept only under --json (else they went to the terminal)."""

    prefix: str
    argv: tuple[str, ...]
    returncode: int
    signal: str | None
    stdout: str | None
    stderr: str | None


def add_arguments(p: argparse.ArgumentParser) -> None:
    env_args(p)
    json_flag(p)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command and its arguments")


def invoke(args: argparse.Namespace, ui: UI) -> Result[RunOutcome]:
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return run(select_env(args.name, args.prefix), argv, capture=ui.as_json)


def run(prefix: Path, argv: list[str], capture: bool = False) -> Result[RunOutcome]:
    """The command's exit code; one that a signal ended gives 128 + its number, as shells show it."""
    code, stdout, stderr = run_in_env(prefix, argv, capture=capture)
    signum = -code if code < 0 else None
    exit_code = 128 + signum if signum else code
    data = RunOutcome(str(prefix), tuple(argv), exit_code, _signal_name(signum) if signum else None, stdout, stderr)
    return Result("run", data, exit_code, end_signal=signum)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:  # a real-time signal, say: no name
        return f"signal {signum}"
