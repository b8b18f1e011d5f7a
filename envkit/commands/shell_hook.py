"""`envkit shell-hook`: the activation, and its undoing, for `eval` in the user's own shell, where
no conda is installed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from envkit.activation.hook import activation, deactivation, hook_shell
from envkit.commands import Result
from envkit.commands.arguments import env_args, given
from envkit.core.errors import UsageError, one_line
from envkit.prefix.envs import select_env
from envkit.ui.terminal import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    env_args(p)
    p.add_argument("--shell", type=given, metavar="SHELL", help="bash, zsh, dash, sh, fish, csh or tcsh (default: $SHELL)")
    p.add_argument("--deactivate", action="store_true", help="print what undoes the activation this shell evaluated")


def invoke(args: argparse.Namespace, ui: UI) -> Result[str]:
    """The text to eval on stdout as it is; what envkit says on stderr, where eval does not take it."""
    if args.deactivate:
        if args.name or args.prefix:
            raise UsageError("--deactivate undoes the env this shell activated: give no -n or -p with it")
        result = hook(None, args.shell, deactivate=True)
    else:
        result = hook(select_env(args.name, args.prefix), args.shell)
    sys.stdout.write(result.data)
    for message in result.messages:
        sys.stderr.write(f"envkit: {one_line(message)}\n")
    return Result(result.command, result.data, result.exit_code)


def hook(prefix: Path | None, shell: str | None, *, deactivate: bool = False) -> Result[str]:
    """The text to eval; `prefix` is None for --deactivate (the env named in the shell's own state)."""
    family = hook_shell(shell)
    if deactivate or prefix is None:
        return Result("shell-hook", deactivation(family))
    text = activation(prefix, family)
    how = 'eval "$(envkit shell-hook --deactivate)"' if family != "csh" else 'eval "`envkit shell-hook --deactivate --shell tcsh`"'
    if family == "fish":
        how = "envkit shell-hook --deactivate --shell fish | source"
    return Result("shell-hook", text, messages=(f"{prefix} is active; leave it with: {how}",))
