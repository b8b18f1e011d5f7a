"""`envkit remove`: an env and its registry line, as `conda env remove` takes them away."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from envkit.commands import Result
from envkit.commands.arguments import given, json_flag, override_frozen_flag
from envkit.core.errors import UsageError
from envkit.core.fsutil import discard_lock
from envkit.install.transaction import env_lock, recover, remove_tree, settle_before_change
from envkit.prefix.envs import find_env, select_env, unregister
from envkit.prefix.leftovers import real_prefix, work_dir
from envkit.prefix.protect import must_be_an_env_alone, must_not_be_frozen
from envkit.prefix.record import read_record
from envkit.solve.condaconfig import current
from envkit.ui.terminal import UI


@dataclass(frozen=True)
class Removed:
    """An env `envkit remove` took away; `envkit` says whether envkit had made it."""

    prefix: str
    envkit: bool
    kernels: tuple[str, ...] = ()  # Jupyter kernels that still start the env's python (their kernel.json)


def add_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-n", "--name", type=given, help="env name")
    group.add_argument("-p", "--prefix", type=given, help="env prefix path")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation (required off a terminal)")
    override_frozen_flag(p, "remove")
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[Removed | None]:
    settle_before_change(args.name, args.prefix)
    prefix = select_env(args.name, args.prefix)
    must_be_removable(prefix, override_frozen=args.override_frozen)
    if not args.yes:
        if not ui.interactive:
            raise UsageError(f"removing {prefix} needs a confirmation", hint="pass --yes (or -y) off a terminal")
        if not ui.ask(f"Remove {prefix} and everything in it?"):
            return Result("remove", None, messages=("aborted: nothing was removed",))
    return remove(prefix, override_frozen=args.override_frozen)


def must_be_removable(prefix: Path, *, override_frozen: bool = False) -> None:
    """What refuses a removal, asked before the confirmation too: no question for a no."""
    must_be_an_env_alone(prefix, "remove")
    if os.environ.get("CONDA_PREFIX") and Path(os.environ["CONDA_PREFIX"]).resolve() == prefix.resolve():
        raise UsageError(f"{prefix} is the active env", hint="conda deactivate first")
    if _is_default_activation_env(prefix):
        raise UsageError(
            f"{prefix} is conda's default_activation_env (what 'conda activate' with no name activates)",
            hint="point it at another env first, as conda asks: conda config --set default_activation_env base",
        )
    must_not_be_frozen(prefix, "remove", override=override_frozen)


def _is_default_activation_env(prefix: Path) -> bool:
    """conda 26 refuses to remove the env its `default_activation_env` names (a name or a path)."""
    configured = current().default_activation_env
    if configured in ("", "base"):  # the base env: refused above, as the conda in use's root
        return False
    try:
        return find_env(configured).resolve() == prefix.resolve()
    except (UsageError, OSError):  # it names no env (any more): nothing to protect
        return False


def remove(prefix: Path, *, override_frozen: bool = False) -> Result[Removed | None]:
    """Like `conda env remove`: the env and its registry line; never a conda installation (envkit.prefix.protect),
    the active env, or (unless overridden) a frozen one. The env is first renamed aside, so an
    interruption leaves no half-deleted env that still looks like one (the next envkit run finishes
    the removal)."""
    must_be_removable(prefix, override_frozen=override_frozen)
    managed = read_record(prefix) is not None
    from envkit.prefix.kernels import env_kernels  # kernels are the user's: named, not removed (nor does conda)

    kernels = env_kernels(prefix)
    real = real_prefix(prefix)  # through a link: the env where it points, then the link (conda leaves the directory half-emptied)
    with env_lock(real) as lock:
        recover(real)
        gone = work_dir(real, "removing")
        os.rename(real, gone)
        unregister(real)
        if real != prefix:
            unregister(prefix)
            prefix.unlink()
        remove_tree(gone)
        if not gone.exists():  # nothing left to finish: the env's lock file goes with it
            discard_lock(lock)
    said = f"removed {prefix}" if real == prefix else f"removed {real} and the link {prefix} to it"
    left = tuple(
        f"Jupyter kernel '{k.name}' ({k.path}) starts the removed env's python: jupyter kernelspec remove {k.name}" for k in kernels
    )
    return Result("remove", Removed(str(prefix), managed, tuple(str(k.path) for k in kernels)), messages=(said, *left))
