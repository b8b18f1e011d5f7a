"""`envkit activation show` and `envkit run`."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from envkit.activation.runenv import run_in_env
from envkit.activation.shells import GENERATORS, SHELL_SUFFIX
from envkit.activation.writer import recorded_activation
from envkit.commands import Result
from envkit.core.errors import UsageError
from envkit.prefix.record import read_record
from envkit.recipe.model import EnvOp


@dataclass(frozen=True)
class ActivationView:
    """The activation scripts of one env for one shell, as `envkit activation` shows them."""

    prefix: str
    recipe: str
    ops: tuple[EnvOp, ...]
    shell: str
    activate: str
    deactivate: str


def show(prefix: Path, shell: str) -> Result:
    suffix = SHELL_SUFFIX.get(shell, shell)
    if suffix not in GENERATORS:
        raise UsageError(f"unknown shell {shell!r}", hint="one of " + ", ".join(sorted(SHELL_SUFFIX)))
    record = read_record(prefix)
    if record is None:
        raise UsageError(
            f"{prefix} has no envkit record (etc/envkit/record.json)",
            hint="create it with envkit, or run 'envkit audit --fix' to add settings",
        )
    activation = recorded_activation(prefix, record)
    files = activation.files(prefix, (suffix,), startup=False)
    if not files:  # values carried alone (EK037): conda's own activation sets them, envkit writes no script
        carried = ", ".join(f"{name}={value}" for name, value in activation.carried)
        raise UsageError(
            f"{prefix} has no envkit activation scripts: conda's activation sets what envkit's startup files carry ({carried})",
            hint="they come from conda's env vars or another activate.d script; envkit run -p PREFIX -- env shows them",
        )
    view = ActivationView(str(prefix), activation.recipe_name, activation.ops, shell, files[0].text, files[1].text)
    return Result("activation show", view)


def run(prefix: Path, argv: list[str], capture: bool = False) -> Result:
    """The command's exit code; one that a signal ended gives 128 + its number, as shells show it."""
    code, stdout, stderr = run_in_env(prefix, argv, capture=capture)
    signum = -code if code < 0 else None
    exit_code = 128 + signum if signum else code
    data = {
        "prefix": str(prefix),
        "argv": argv,
        "returncode": exit_code,
        "signal": _signal_name(signum) if signum else None,
        "stdout": stdout,
        "stderr": stderr,
    }
    return Result("run", data, exit_code, end_signal=signum)


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:  # a real-time signal, say: no name
        return f"signal {signum}"
