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
from typing import TYPE_CHECKING, Any

from envkit.activation import SCRIPTS_FORMAT
from envkit.core.changes import PackageChange
from envkit.core.cpus import PHYSICAL_CORES, physical_cores
from envkit.core.digests import file_sha256
from envkit.core.fsutil import read_exact
from envkit.pip.repair import moved_commits, pip_wheels, recorded_pip
from envkit.prefix.condameta import stamp
from envkit.prefix.installed import pip_dists
from envkit.prefix.record import read_record, sync_journal_path
from envkit.recipe.digest import sources_digest

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


def recorded_names(record: dict[str, Any]) -> set[str]:
    return {f"{p['name']}-{p['version']}-{p['build']}.json" for p in record.get("packages", []) if isinstance(p, dict)}


def scripts_match(prefix: Path, record: dict[str, Any]) -> bool:
    """The activation files hold what this envkit would write: by the digests in the record when
    they are of this envkit's scripts format (no rendering), else by rendering them again."""
    activation = record.get("activation") or {}
    digests = activation.get("sha256") if isinstance(activation, dict) else None
    if isinstance(digests, dict) and digests and activation.get("format") == SCRIPTS_FORMAT:
        if sorted(digests) != sorted(activation.get("files") or []):
            return False
        return all(_sha256(prefix / rel) == digest for rel, digest in digests.items())
    from envkit.activation.writer import recorded_activation

    return all(read_exact(f.path) == f.text for f in recorded_activation(prefix, record).files(prefix))


def _sha256(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None


def recipe_files(recipe: dict[str, Any]) -> str | None:
    """The recipe's files since the env was made or synced, from the digest of them its record keeps
    (no recipe loaded): unchanged | changed (an edit, or a `recipes update` of its source) | missing
    (nothing to sync to); None for a record that keeps no digest."""
    recorded, chain = recipe.get("sources_digest"), recipe.get("chain")
    if not isinstance(recorded, str) or not isinstance(chain, list) or not chain:
        return None
    return _since(recorded, sources_digest([str(path) for path in chain]))


def lock_file(record: dict[str, Any]) -> str | None:
    """The lock the env was installed from, since: unchanged | changed (a re-lock, or a `recipes
    update` that brought the team's) | missing; None for an env not installed from a lock."""
    lock = record.get("lock") or {}
    path, recorded = lock.get("path"), lock.get("digest")
    if not isinstance(path, str) or not isinstance(recorded, str):
        return None
    return _since(recorded, _sha256(Path(path)))


def _since(recorded: str, now: str | None) -> str:
    """A file the record keeps a digest of, as it is now: missing | unchanged | changed."""
    return "missing" if now is None else "unchanged" if now == recorded else "changed"


def in_sync(prefix: Path, *, lock_path: Path | None = None) -> bool:
    """True only when certain: the record, the files and the env all still agree."""
    record = read_record(prefix)
    if record is None or sync_journal_path(prefix).exists():
        return False
    recipe = record.get("recipe") or {}
    lock = record.get("lock") or {}
    if lock_path is not None:
        if lock.get("path") != str(lock_path) or _sha256(lock_path) != lock.get("digest"):
            return False
    elif lock.get("frozen"):  # the env holds a lock taken as it was, maybe stale: the recipe's files say nothing of it
        return False
    # with a lock too: an edited recipe may have made the lock stale, which only the full look can tell
    if recipe_files(recipe) != "unchanged":
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


def computed_values_hold(record: dict[str, Any]) -> bool:
    """Each value worked out where the scripts were written (physical-cores) comes out the same
    here: a sync run in a job given fewer CPUs, or on another node of an env on shared storage,
    writes this one's (the full look's difference shows it)."""
    computed = [op for op in (record.get("activation") or {}).get("ops") or () if isinstance(op, dict) and op.get("computed")]
    if not computed:
        return True
    here = str(physical_cores())
    return all(op.get("computed") == PHYSICAL_CORES and op.get("value") == here for op in computed)


def packages_as_recorded(prefix: Path, record: dict[str, Any]) -> bool:
    """conda-meta holds the recorded packages' records, each as envkit left it (a record written
    before envkit kept their stamps: the names alone)."""
    kept = record.get("conda_meta")
    if not isinstance(kept, dict):
        return installed_names(prefix) == recorded_names(record)
    return set(kept) == recorded_names(record) and stamp(prefix) == kept


def diff_variables(old: tuple[EnvOp, ...], new: tuple[EnvOp, ...]) -> tuple[VariableChange, ...]:
    before = {op.name: describe_op(op) for op in old}
    after = {op.name: describe_op(op) for op in new}
    return tuple(VariableChange(n, before.get(n), after.get(n)) for n in sorted(set(before) | set(after)) if before.get(n) != after.get(n))
