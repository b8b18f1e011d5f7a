"""Bring an existing env to its recipe (or lock) in place, all or nothing.

- `in_sync` answers "nothing to do" from the record alone, with the standard library: the recipe's
  files (or the lock) hash as they did, conda-meta holds the recorded packages, pip the recorded
  wheels, and the activation scripts are what the record says. No YAML, no solver: a no-op sync
  costs about what `envkit --version` does.
- `diff` names every change: packages added, removed, changed; activation variables changed.
- `drift` names what changed since envkit installed the env.

Applying a difference (envkit.commands.sync_change) is all or nothing, under a journal (envkit.install.journal).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.activation import SCRIPTS_FORMAT
from envkit.core.changes import Kind, differences
from envkit.core.cpus import PHYSICAL_CORES, physical_cores
from envkit.core.digests import file_sha256
from envkit.core.fsutil import read_exact
from envkit.pip.urls import commit_shown, url_commit
from envkit.prefix.condameta import stamp
from envkit.prefix.installed import dist_files, pip_dists, requires
from envkit.prefix.record import read_record, sync_journal_path
from envkit.recipe.digest import sources_digest

if TYPE_CHECKING:
    from envkit.audit.engine import Finding
    from envkit.prefix.installed import CondaPackage, PipDist
    from envkit.probe.model import ProbeReport
    from envkit.recipe.model import EnvOp


@dataclass(frozen=True)
class PackageChange:
    """A package a sync adds, removes or moves to another version or build."""

    name: str
    kind: Kind
    old: str | None  # version build
    new: str | None


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


def pip_wheels(dists: dict[str, PipDist]) -> set[tuple[str, str]]:
    """(name, version) of what pip installed (conda's own python packages and editable installs
    left out: see PipDist.managed)."""
    return {(d.name, d.version) for d in dists.values() if d.managed}


def pip_state(prefix: Path) -> set[tuple[str, str]]:
    return pip_wheels(pip_dists(prefix))


def recorded_wheels(record: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(name, version) -> the file URL envkit installed it from ("" where unknown)."""
    return {
        (str(p.get("name")), str(p.get("version"))): str(p.get("url") or "") for p in record.get("pip_installed", []) if isinstance(p, dict)
    }


def recorded_pip(record: dict[str, Any]) -> set[tuple[str, str]]:
    return set(recorded_wheels(record))


def moved_commits(record: dict[str, Any], dists: dict[str, PipDist]) -> tuple[tuple[str, str, str, str | None], ...]:
    """(name, version, recorded URL, the commit there now; None for a wheel not from git): the
    recorded git wheels pip put at another commit since, the version the same (`pip install
    git+URL@OTHER`). A branch moves without a new version, so name and version cannot show it."""
    out = []
    for (name, version), url in sorted(recorded_wheels(record).items()):
        dist, commit = dists.get(name), url_commit(url)
        if commit and dist is not None and dist.managed and dist.version == version and dist.commit != commit:
            out.append((name, version, url, dist.commit))
    return tuple(out)


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


def diff_packages(installed: dict[str, str], planned: dict[str, str]) -> tuple[PackageChange, ...]:
    """`name -> "version build"` on each side."""
    return tuple(PackageChange(*change) for change in differences(installed, planned))


def diff_variables(old: tuple[EnvOp, ...], new: tuple[EnvOp, ...]) -> tuple[VariableChange, ...]:
    before = {op.name: describe_op(op) for op in old}
    after = {op.name: describe_op(op) for op in new}
    return tuple(VariableChange(n, before.get(n), after.get(n)) for n in sorted(set(before) | set(after)) if before.get(n) != after.get(n))


@dataclass(frozen=True)
class PipRepair:
    """What puts pip's wheels back to the ones envkit installed: a `pip install` or `pip uninstall`
    since is undone before the recipe's own pip changes are made, as conda packages are. A wheel
    pip installed over a conda package's files takes those files with it, so that package is
    linked again (the fix EK006 gives by hand)."""

    extra: tuple[tuple[str, str], ...] = ()  # (name, version): pip-installed since, or a recorded one changed
    missing: tuple[tuple[str, str, str], ...] = ()  # (name, version, url; "" where unknown): recorded, now gone or changed
    over: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (extra wheel, the conda packages whose files it overwrote)
    # (name, version): unrecorded wheels the recipe's pip list needs, kept and recorded now (an older
    # envkit's sync recorded only what pip newly installed when the list grew)
    adopt: tuple[tuple[str, str], ...] = ()
    # (name, version, recorded URL, commit there now): git wheels moved to another commit since,
    # each in `extra` (out) and in `missing` (back at the recorded commit) too
    moved: tuple[tuple[str, str, str, str | None], ...] = ()

    @property
    def needed(self) -> bool:
        return bool(self.extra or self.missing)

    @property
    def relink(self) -> tuple[str, ...]:
        """The conda packages to link again once the wheels over them are gone."""
        return tuple(sorted({conda for _, condas in self.over for conda in condas}))

    def lines(self) -> tuple[str, ...]:
        over = dict(self.over)
        back = {name for name, _, _ in self.missing}
        moved = {name: (version, url, now) for name, version, url, now in self.moved if name in back}
        return tuple(
            [
                f"- {name} {version} (pip-installed since"
                + (f"; over conda's {', '.join(over[name])}, linked again)" if over.get(name) else ")")
                for name, version in self.extra
                if name not in moved
            ]
            + [
                f"~ {name} {commit_shown(version, moved[name][2])} -> {commit_shown(version, url_commit(url))} (as envkit installed it)"
                if name in moved
                else f"+ {name} {version} (as envkit installed it)"
                for name, version, url in self.missing
            ]
            + [f"= {name} {version} (the recipe's pip list needs it; recorded now)" for name, version in self.adopt]
        )


def pip_repair(prefix: Path, record: dict[str, Any], named: Callable[[], set[str]] | None = None) -> PipRepair:
    """From the env's dists and the record's `pip_installed`: recorded wheels come back from their
    exact URLs (hash included), or by name and version where the record kept no URL. `named`: the
    names the recipe's pip list gives (asked only when a wheel is unrecorded); an unrecorded wheel
    they need, by name or as a dependency, is the recipe's, not one pip-installed since."""
    wanted = recorded_wheels(record)
    recorded = {name for name, _ in wanted}
    dists = pip_dists(prefix)
    unrecorded = sorted((d.name, d.version) for d in dists.values() if d.managed and (d.name, d.version) not in wanted)
    needed = needed_wheels(prefix, dists, named()) if named and any(name not in recorded for name, _ in unrecorded) else set()
    adopt = [(name, version) for name, version in unrecorded if name not in recorded and name in needed]
    extra = [entry for entry in unrecorded if entry not in adopt]
    have = pip_wheels(dists)
    moved = moved_commits(record, dists)
    missing = [(name, version, url) for (name, version), url in sorted(wanted.items()) if (name, version) not in have]
    return PipRepair(
        extra=tuple(extra + [(name, version) for name, version, _, _ in moved]),
        missing=tuple(sorted(missing + [(name, version, url) for name, version, url, _ in moved])),
        over=_over_conda(prefix, [dists[name] for name, _ in extra]) if extra else (),
        adopt=tuple(adopt),
        moved=moved,
    )


def needed_wheels(prefix: Path, dists: dict[str, PipDist], named: set[str]) -> set[str]:
    """`named` and what their wheels require, transitively, among the env's pip-installed wheels."""
    seen: set[str] = set()
    todo = list(named)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in dists and dists[name].managed:
            todo.extend(requires(prefix, dists[name]))
    return seen


def _over_conda(prefix: Path, wheels: list[PipDist]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each wheel with the conda packages that list any of its files (conda-meta read once)."""
    import json

    owned = []
    for meta in (prefix / "conda-meta").glob("*.json"):
        try:
            data = json.loads(meta.read_bytes())
        except (OSError, ValueError):
            continue  # a record nobody can read is refused before this (sync) or named by EK022 (audit)
        files = data.get("files") if isinstance(data, dict) else None
        if isinstance(files, list) and isinstance(data.get("name"), str):
            owned.append((data["name"], set(files)))
    out = []
    for wheel in wheels:
        paths = set(dist_files(prefix, wheel))
        if owners := tuple(sorted(name for name, files in owned if not paths.isdisjoint(files))):
            out.append((wheel.name, owners))
    return tuple(out)


def drift(record: dict[str, Any], packages: dict[str, CondaPackage], pip: dict[str, PipDist]) -> list[str]:
    """What changed since envkit installed the env (conda install, pip install, a removal), one line
    each, from conda-meta's packages and the env's pip dists. An env envkit only fixed (audit --fix)
    has no package list to drift from."""
    if not isinstance(record.get("packages"), list):
        return []
    recorded = {str(p["name"]): f"{p['version']} {p['build']}" for p in record.get("packages", []) if isinstance(p, dict)}
    installed = {name: f"{p.version} {p.build}" for name, p in packages.items()}
    pip_installed = pip_wheels(pip)
    lines = []
    for change in diff_packages(recorded, installed):
        if change.kind == "added":
            lines.append(f"+ {change.name} {change.new} (added since envkit installed the env)")
        elif change.kind == "removed":
            lines.append(f"- {change.name} {change.old} (removed since)")
        else:
            lines.append(f"~ {change.name} {change.old} -> {change.new} (changed since)")
    for name, version in sorted(pip_installed - recorded_pip(record)):
        lines.append(f"+ pip {name} {version} (pip-installed since)")
    for name, version in sorted(recorded_pip(record) - pip_installed):
        lines.append(f"- pip {name} {version} (removed or changed since)")
    for name, version, url, now in moved_commits(record, pip):
        lines.append(f"~ pip {name} {commit_shown(version, url_commit(url))} -> {commit_shown(version, now)} (changed since)")
    return lines
