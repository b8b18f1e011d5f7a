"""`envkit activation show`: the settings and the scripts of an env's activation for one shell."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from envkit.activation.shells import GENERATORS, SHELL_SUFFIX
from envkit.activation.writer import recorded_activation
from envkit.commands import Result
from envkit.commands.arguments import SHELLS, env_args, json_flag
from envkit.core.errors import UsageError
from envkit.prefix.envs import select_env
from envkit.prefix.record import read_record
from envkit.recipe.model import EnvOp
from envkit.ui.console import Out, visible
from envkit.ui.terminal import UI
from envkit.ui.views import ops_lines


@dataclass(frozen=True)
class ActivationView:
    """The activation scripts of one env for one shell, as `envkit activation` shows them."""

    prefix: str
    recipe: str
    ops: tuple[EnvOp, ...]
    shell: str
    activate: str
    deactivate: str


def add_arguments(act: argparse.ArgumentParser) -> None:
    asub = act.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = asub.add_parser("show", help="print the settings and the script for one shell")
    env_args(p)
    p.add_argument("--shell", default="bash", choices=SHELLS, metavar="SHELL", help=f"one of {', '.join(SHELLS)} (default: bash)")
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[ActivationView]:
    return show(select_env(args.name, args.prefix), args.shell)


def show(prefix: Path, shell: str) -> Result[ActivationView]:
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
    return Result("activation show", view, view=activation_view)


def activation_view(c: Out, view: ActivationView) -> None:
    c.print(f"# {view.prefix} ({view.recipe}), shell {view.shell}")
    ops_lines(c, view.ops)
    # a view: a control character a value holds is shown, not sent (the scripts themselves hold it)
    c.file.write(visible("# --- activate ---\n" + view.activate + "# --- deactivate ---\n" + view.deactivate))
