"""Bring an existing env to its recipe (or lock) in place, all or nothing.

- `in_sync` answers "nothing to do" from the record alone, with the standard library: the recipe's
  files (or the lock) hash as they did, conda-meta holds the recorded packages, pip the recorded
  wheels, and the activation scripts are what the record says. No YAML, no solver: a no-op sync
  costs about what `envkit --version` does.
- `diff` names every change: packages added, removed, changed; activation variables changed.
- `drift` names what changed since envkit installed the env.

Applying a difference (envkit.commands.sync_apply) is all or nothing, under a journal (envkit.install.journal).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.activation import SCRIPTS_FORMAT
from envkit.core.changes import PackageChange
from envkit.core.cpus import PHYSICAL_CORES, physical_cores
from envkit.core.digests import file_sha256
from envkit.core.fsutil import read_exact
from envkit.pip.repair import moved_commits, pip_wheels, recorded_pip
from envkit.prefix.condameta import stamp
from envkit.prefix.envrecord import EnvRecord, LockRef, RecipeRef
from envkit.prefix.installed import pip_dists
from envkit.prefix.record import read_record, sync_journal_path
from envkit.recipe.digest import sources_digest
from envkit.team.proofs import lock_content_digest

if TYPE_CHECKING:
    from envkit.audit.engine import Finding
    from envkit.probe.model import ProbeReport
    from envkit.recipe.model import EnvOp


@dataclass(frozen=True)
class VariableChange:
    """An activation variable a sync sets, changes or unsets."""

    name: str
    old: str | None  # a readable form of the operation, None when absent
    new: str | None


@dataclass(frozen=True)
class SyncOutcome:
    """What a sync found different, and what it did about it."""

    prefix: str
    source: str  # "recipe" or "lock"
    noop: bool
    dry_run: bool
    packages: tuple[PackageChange, ...] = ()
    variables: tuple[VariableChange, ...] = ()
    pip: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    applied: bool = False
    aborted: bool = False
    refused: bool = False
    probe: ProbeReport | None = None
    # the lock the env was made (or last synced) from, when this sync solves the recipe instead
    lock_set_aside: str | None = None
    warnings: tuple[str, ...] = ()  # the recipe's consistency warnings, as create shows them
    kernels: tuple[str, ...] = ()  # the env's Jupyter kernels given the settings it changed (envkit.prefix.kernels)
    kernels_failed: tuple[str, ...] = ()  # "PATH: why" for each left with the old ones


def describe_op(op: EnvOp) -> str:
    if op.action == "set":
        return f"= {op.value!r}"
    if op.action == "unset":
        return "unset"
    return f"{op.action} {op.separator.join(op.entries)}"


def installed_names(prefix: Path) -> set[str]:
    return {p.name for p in (prefix / "conda-meta").glob("*.json")}


def recorded_names(record: EnvRecord) -> set[str]:
    return {f"{p.name}-{p.version}-{p.build}.json" for p in record.packages or ()}


def scripts_match(prefix: Path, record: EnvRecord) -> bool:
    """The activation files hold what this envkit would write: by the digests in the record when
    they are of this envkit's scripts format (no rendering), else by rendering them again."""
    activation = record.activation
    digests = activation.sha256 if activation else None
    if activation and digests and activation.format == SCRIPTS_FORMAT:
        if sorted(digests) != sorted(activation.files or ()):
            return False
        return all(_sha256(prefix / rel) == digest for rel, digest in digests.items())
    from envkit.activation.writer import recorded_activation

    return all(read_exact(f.path) == f.text for f in recorded_activation(prefix, record).files(prefix))


def _sha256(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None


def recipe_files(recipe: RecipeRef | None) -> str | None:
    """The recipe's files since the env was made or synced, from the digest of them its record keeps
    (no recipe loaded): unchanged | changed (an edit, or a `recipes update` of its source) | missing
    (nothing to sync to); None for a record that keeps no digest."""
    if recipe is None or recipe.sources_digest is None or not recipe.chain:
        return None
    return _since(recipe.sources_digest, sources_digest(recipe.chain))


def lock_file(record: EnvRecord) -> str | None:
    """The lock the env was installed from, since: unchanged | changed (a re-lock, or a `recipes
    update` that brought the team's) | missing; None for an env not installed from a lock."""
    lock = record.lock
    if lock is None or lock.path is None or lock.digest is None:
        return None
    return _since(lock.digest, _lock_digest(Path(lock.path)))


def _lock_digest(path: Path) -> str | None:
    """The lock's digest as records keep it (its proofs left out); None where it cannot be read."""
    try:
        return lock_content_digest(path)
    except OSError:
        return None


def _since(recorded: str, now: str | None) -> str:
    """A file the record keeps a digest of, as it is now: missing | unchanged | changed."""
    return "missing" if now is None else "unchanged" if now == recorded else "changed"


def in_sync(prefix: Path, *, lock_path: Path | None = None) -> bool:
    """True only when certain: the record, the files and the env all still agree."""
    record = read_record(prefix)
    if record is None or sync_journal_path(prefix).exists():
        return False
    lock = record.lock or LockRef(None, None)
    if lock_path is not None:
        if lock.path != str(lock_path) or _lock_digest(lock_path) != lock.digest:
            return False
    elif lock.frozen:  # the env holds a lock taken as it was, maybe stale: the recipe's files say nothing of it
        return False
    # with a lock too: an edited recipe may have made the lock stale, which only the full look can tell
    if recipe_files(record.recipe) != "unchanged":
        return False
    if not packages_as_recorded(prefix, record):
        return False
    dists = pip_dists(prefix)
    return (
        pip_wheels(dists) == recorded_pip(record)
        and not moved_commits(record, dists)
        and scripts_match(prefix, record)
        and computed_values_hold(record)
    )


def computed_values_hold(record: EnvRecord) -> bool:
    """Each value worked out where the scripts were written (physical-cores) comes out the same
    here: a sync run in a job given fewer CPUs, or on another node of an env on shared storage,
    writes this one's (the full look's difference shows it)."""
    computed = record.activation.computed() if record.activation else []
    if not computed:
        return True
    here = str(physical_cores())
    return all(how == PHYSICAL_CORES and value == here for _, how, value in computed)


def packages_as_recorded(prefix: Path, record: EnvRecord) -> bool:
    """conda-meta holds the recorded packages' records, each as envkit left it (a record written
    before envkit kept their stamps: the names alone)."""
    kept = record.conda_meta
    if kept is None:
        return installed_names(prefix) == recorded_names(record)
    return set(kept) == recorded_names(record) and stamp(prefix) == kept


def diff_variables(old: tuple[EnvOp, ...], new: tuple[EnvOp, ...]) -> tuple[VariableChange, ...]:
    before = {op.name: describe_op(op) for op in old}
    after = {op.name: describe_op(op) for op in new}
    return tuple(VariableChange(n, before.get(n), after.get(n)) for n in sorted(set(before) | set(after)) if before.get(n) != after.get(n))
