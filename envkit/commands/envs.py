"""`envkit list` and `envkit remove`: the envs conda knows, with what envkit knows of them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from envkit.audit.drift import drift
from envkit.commands import Result
from envkit.core.errors import EnvkitError, UsageError
from envkit.core.fsutil import discard_lock
from envkit.install.transaction import env_lock, recover, remove_tree
from envkit.prefix.envs import all_envs, find_env, unregister
from envkit.prefix.health import health_of
from envkit.prefix.history import created_at, not_an_env
from envkit.prefix.installed import pip_dists, read_conda_meta
from envkit.prefix.leftovers import real_prefix, work_dir
from envkit.prefix.protect import frozen_env, must_be_an_env_alone, must_not_be_frozen
from envkit.prefix.record import read_record, recipe_name
from envkit.solve.condaconfig import current
from envkit.team.sync import lock_file, recipe_files


@dataclass(frozen=True)
class ListedEnv:
    """One line of `envkit list`: an env conda knows, and what envkit recorded of it."""

    prefix: str
    name: str
    envkit: bool
    recipe: str | None = None
    source: str | None = None
    commit: str | None = None
    created: str | None = None
    health: str | None = None  # healthy | warn | unhealthy | not probed (envkit.prefix.health)
    health_basis: str | None = None  # where the verdict comes from: "probe at DATE", or none yet
    drift: tuple[str, ...] = ()
    error: str | None = None
    recipe_files: str | None = None  # envkit.team.sync.recipe_files: unchanged | changed | missing
    stale_lock: str | None = None  # the lock a --frozen create or sync installed though its recipe had changed
    lock_file: str | None = None  # envkit.team.sync.lock_file: the lock it was installed from, since: unchanged | changed | missing
    frozen: str | None = None  # marked frozen (CEP 22): the marker's reason, "" where it gives none


def describe(prefix: Path) -> ListedEnv:
    marker = frozen_env(prefix)
    frozen = marker.reason if marker is not None else None
    try:
        record = read_record(prefix)
    except EnvkitError as exc:
        return ListedEnv(str(prefix), prefix.name, True, error=exc.message, frozen=frozen)
    if (why := not_an_env(prefix)) is not None:
        return ListedEnv(str(prefix), prefix.name, record is not None, error=f"not a conda env: {why}", frozen=frozen)
    if record is None:
        return ListedEnv(str(prefix), prefix.name, False, created=created_at(prefix), frozen=frozen)
    recipe = record.get("recipe") if isinstance(record.get("recipe"), dict) else {}
    assert isinstance(recipe, dict)
    health = health_of(record)
    packages, _ = read_conda_meta(prefix)
    lock = record.get("lock") if isinstance(record.get("lock"), dict) else {}
    assert isinstance(lock, dict)
    return ListedEnv(
        str(prefix),
        prefix.name,
        True,
        recipe=recipe_name(record),
        source=recipe.get("source"),
        commit=recipe.get("commit"),
        created=record.get("created"),
        health=health.state,
        health_basis=health.line(),
        drift=tuple(drift(record, packages, pip_dists(prefix))),
        recipe_files=recipe_files(recipe),
        stale_lock=str(lock["path"]) if lock.get("stale") and lock.get("path") else None,
        lock_file=lock_file(record),
        frozen=frozen,
    )


def list_envs() -> Result:
    return Result("list", [describe(p) for p in all_envs()])


@dataclass(frozen=True)
class Removed:
    """An env `envkit remove` took away; `envkit` says whether envkit had made it."""

    prefix: str
    envkit: bool
    kernels: tuple[str, ...] = ()  # Jupyter kernels that still start the env's python (their kernel.json)


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


def remove(prefix: Path, *, override_frozen: bool = False) -> Result:
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
