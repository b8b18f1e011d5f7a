"""`envkit activation show` and `envkit run`."""

from __future__ import annotations

from dataclasses import dataclass

from envkit.activation.runenv import run_in_env
from envkit.activation.shells import GENERATORS, SHELL_SUFFIX
from envkit.activation.writer import ops_from_json, render_files
from envkit.commands import Result
from envkit.envs import find_env
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


def show(env: str, shell: str) -> Result:
    prefix = find_env(env)
    suffix = SHELL_SUFFIX.get(shell, shell)
    if suffix not in GENERATORS:
        raise UsageError(f"unknown shell {shell!r}", hint="one of " + ", ".join(sorted(SHELL_SUFFIX)))
    record = read_record(prefix)
    if record is None:
        raise UsageError(
            f"{prefix} has no envkit record (conda-meta/envkit.json)",
            hint="create it with envkit, or run 'envkit audit --fix' to add settings",
        )
    ops = ops_from_json(record["activation"]["ops"])
    name = record["recipe"]["name"]
    files = render_files(prefix, name, ops, (suffix,))
    return Result("activation show", ActivationView(str(prefix), name, ops, shell, files[0].text, files[1].text))


def run(env: str, argv: list[str], capture: bool = False) -> Result:
    prefix = find_env(env)
    code, stdout, stderr = run_in_env(prefix, argv, capture=capture)
    data = {"prefix": str(prefix), "argv": argv, "returncode": code, "stdout": stdout, "stderr": stderr}
    return Result("run", data, code)
