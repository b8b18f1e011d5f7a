"""`envkit shell`: a subshell with the env activated, where no conda is installed; leaving it
leaves the env."""

from __future__ import annotations

import argparse
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from envkit.activation.runenv import run_in_env
from envkit.commands import Result
from envkit.commands.arguments import env_args, given
from envkit.core.errors import CommandNotFound
from envkit.prefix.envs import select_env
from envkit.ui.terminal import UI

INTERACTIVE = {"bash": ["-i"], "zsh": ["-i"], "dash": ["-i"], "sh": ["-i"], "fish": ["-i"], "csh": ["-i"], "tcsh": ["-i"]}


@dataclass(frozen=True)
class ShellExit:
    prefix: str
    shell: str
    returncode: int


def add_arguments(p: argparse.ArgumentParser) -> None:
    env_args(p)
    p.add_argument("--shell", type=given, metavar="SHELL", help="the shell to start (default: $SHELL)")


def invoke(args: argparse.Namespace, ui: UI) -> Result[ShellExit]:
    return shell(select_env(args.name, args.prefix), args.shell)


def shell(prefix: Path, name: str | None) -> Result[ShellExit]:
    """The user's shell ($SHELL, or the one named), interactive, under the env's activation; its
    exit code is the command's. Leaving it leaves the env: the calling shell never changed."""
    program = name or os.environ.get("SHELL") or "bash"
    exe = shutil.which(program)
    if exe is None:
        raise CommandNotFound(f"{program}: no such shell on PATH", hint="pass --shell with one that is installed")
    code, _, _ = run_in_env(prefix, [exe, *INTERACTIVE.get(Path(exe).name, [])])
    return Result("shell", ShellExit(str(prefix), exe, code), code if code >= 0 else 128 - code)
