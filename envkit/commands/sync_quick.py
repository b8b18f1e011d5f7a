"""The no-op answer of `envkit sync`, without YAML, the solver or rich (envkit.team.sync.in_sync)."""

from __future__ import annotations

from pathlib import Path

from envkit.commands import Result
from envkit.core import paths
from envkit.prefix.envrecord import EnvRecord
from envkit.prefix.protect import must_not_be_frozen
from envkit.prefix.record import read_record
from envkit.team.sync import SyncOutcome, in_sync, lock_file


def recorded_lock(record: EnvRecord, lock: str | None) -> Path | None:
    """The lock a locked sync uses: the one given, else the one the env was made from, else where
    `envkit lock` puts it for the env's recipe."""
    if lock:
        return Path(lock).expanduser().absolute()
    if record.lock is not None and record.lock.path is not None:
        return Path(record.lock.path)
    recipe = record.recipe
    if recipe is None or recipe.name is None or recipe.path is None:
        return None
    return paths.lock_beside(recipe.name, str(recipe.source), recipe.path)


def quick(
    prefix: Path, *, locked: bool, lock: str | None, dry_run: bool = False, override_frozen: bool = False
) -> Result[SyncOutcome] | None:
    """The no-op answer without YAML or the solver, or None when a full look is needed. A frozen
    env (CEP 22) is refused first unless `override_frozen`, as conda install does whether or not
    anything would change; a dry run only looks."""
    if not dry_run:
        must_not_be_frozen(prefix, "sync", override=override_frozen)
    from envkit.prefix.history import not_an_env

    if not_an_env(prefix) is not None:
        return None  # the full look says why (envkit.commands.sync.must_be_a_conda_env)
    record = read_record(prefix)
    if record is None:
        return None
    lock_path = recorded_lock(record, lock) if (locked or lock) else None
    if (locked or lock) and lock_path is None:
        return None
    if not in_sync(prefix, lock_path=lock_path):
        return None
    source = "lock" if lock_path else "recipe"
    what = f"its lock {lock_path}" if lock_path else f"recipe '{record.recipe.name if record.recipe else None}'"
    said = [f"{prefix} is in sync with {what}: nothing to do"]
    if lock_path is None and lock_file(record) == "changed":  # the recipe's sync is not the lock's
        said.append(
            f"the lock it was installed from ({record.lock.path if record.lock else None}) changed since: 'envkit sync --locked' installs it"
        )
    return Result("sync", SyncOutcome(str(prefix), source, noop=True, dry_run=False), messages=tuple(said))
