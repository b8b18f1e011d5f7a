"""`envkit activation show` and `envkit run`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envkit.activation.runenv import run_in_env
from envkit.activation.shells import GENERATORS, SHELL_SUFFIX
from envkit.activation.writer import recorded_activation
from envkit.commands import Result
from envkit.errors import UsageError
from envkit.recipe.model import EnvOp
from envkit.record import read_record


@dataclass(frozen=True)
class ActivationView:
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
    files = activation.files(prefix, (suffix,))
    view = ActivationView(str(prefix), activation.recipe_name, activation.ops, shell, files[0].text, files[1].text)
    return Result("activation show", view)


def run(prefix: Path, argv: list[str], capture: bool = False) -> Result:
    code, stdout, stderr = run_in_env(prefix, argv, capture=capture)
    data = {"prefix": str(prefix), "argv": argv, "returncode": code, "stdout": stdout, "stderr": stderr}
    return Result("run", data, code)
