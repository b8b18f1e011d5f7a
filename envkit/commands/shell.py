"""`envkit shell` (a subshell with the env activated) and `envkit shell-hook` (the activation, and
its undoing, for `eval` in the user's own shell): activation where no conda is installed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from envkit.activation.hook import activation, deactivation, hook_shell
from envkit.activation.runenv import run_in_env
from envkit.commands import Result
from envkit.core.errors import CommandNotFound

INTERACTIVE = {"bash": ["-i"], "zsh": ["-i"], "dash": ["-i"], "sh": ["-i"], "fish": ["-i"], "csh": ["-i"], "tcsh": ["-i"]}


def hook(prefix: Path | None, shell: str | None, *, deactivate: bool = False) -> Result:
    """The text to eval; `prefix` is None for --deactivate (the env named in the shell's own state)."""
    family = hook_shell(shell)
    if deactivate or prefix is None:
        return Result("shell-hook", deactivation(family))
    text = activation(prefix, family)
    how = 'eval "$(envkit shell-hook --deactivate)"' if family != "csh" else 'eval "`envkit shell-hook --deactivate --shell tcsh`"'
    if family == "fish":
        how = "envkit shell-hook --deactivate --shell fish | source"
    return Result("shell-hook", text, messages=(f"{prefix} is active; leave it with: {how}",))


def shell(prefix: Path, name: str | None) -> Result:
    """The user's shell ($SHELL, or the one named), interactive, under the env's activation; its
    exit code is the command's. Leaving it leaves the env: the calling shell never changed."""
    program = name or os.environ.get("SHELL") or "bash"
    exe = shutil.which(program)
    if exe is None:
        raise CommandNotFound(f"{program}: no such shell on PATH", hint="pass --shell with one that is installed")
    code, _, _ = run_in_env(prefix, [exe, *INTERACTIVE.get(Path(exe).name, [])])
    return Result("shell", {"prefix": str(prefix), "shell": exe, "returncode": code}, code if code >= 0 else 128 - code)
