"""Bring an existing env to its recipe (or lock) in place, all or nothing.

- `in_sync` answers "nothing to do" from the record alone, with the standard library: the recipe's
  files (or the lock) hash as they did, conda-meta holds the recorded packages, pip the recorded
  wheels, and the activation scripts are what the record says. No YAML, no solver: a no-op sync
  costs about what `envkit --version` does.
- `diff` names every change: packages added, removed, changed; activation variables changed.
- `apply` installs with rattler over the installed packages, under a journal: a copy of conda-meta
  and the record taken before anything changes. On failure or Ctrl-C the journal's packages are
  installed back (from the package cache) and the record restored; a sync killed outright is
  rolled back the same way by the next envkit run that touches the env (envkit.transaction).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from envkit.fsutil import read_exact
from envkit.installed import pip_dists
from envkit.recipe.digest import sources_digest
from envkit.record import read_record, record_path, sync_journal_path

if TYPE_CHECKING:
    from envkit.audit.engine import Finding
    from envkit.installed import CondaPackage, PipDist
    from envkit.probe.model import ProbeReport
    from envkit.recipe.model import EnvOp


@dataclass(frozen=True)
class PackageChange:
    name: str
    kind: Literal["added", "removed", "changed"]
    old: str | None  # version build
    new: str | None


@dataclass(frozen=True)
class VariableChange:
    name: str
    old: str | None  # a readable form of the operation, None when absent
    new: str | None


@dataclass(frozen=True)
class SyncOutcome:
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
    """(name, version) of what pip installed (conda's own python packages left out)."""
    return {(d.name, d.version) for d in dists.values() if d.installer == "pip"}


def pip_state(prefix: Path) -> set[tuple[str, str]]:
    return pip_wheels(pip_dists(prefix))


def recorded_pip(record: dict[str, Any]) -> set[tuple[str, str]]:
    return {(str(p["name"]), str(p["version"])) for p in record.get("pip_installed", []) if isinstance(p, dict)}


def scripts_match(prefix: Path, record: dict[str, Any]) -> bool:
    """The activation files hold what envkit wrote: by the digests in the record when this envkit
    wrote them (no rendering), else by rendering them again."""
    from envkit import __version__

    activation = record.get("activation") or {}
    digests = activation.get("sha256") if isinstance(activation, dict) else None
    if record.get("envkit_version") == __version__ and isinstance(digests, dict) and digests:
        if sorted(digests) != sorted(activation.get("files") or []):
            return False
        return all(_sha256(prefix / rel) == digest for rel, digest in digests.items())
    from envkit.activation.writer import recorded_activation

    return all(read_exact(f.path) == f.text for f in recorded_activation(prefix, record).files(prefix))


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def in_sync(prefix: Path, *, lock_path: Path | None = None) -> bool:
    """True only when certain: the record, the files and the env all still agree."""
    record = read_record(prefix)
    if record is None or sync_journal_path(prefix).exists():
        return False
    recipe = record.get("recipe") or {}
    if lock_path is not None:
        lock = record.get("lock") or {}
        if lock.get("path") != str(lock_path) or _sha256(lock_path) != lock.get("digest"):
            return False
    elif not recipe.get("sources_digest") or sources_digest(recipe.get("chain") or []) != recipe["sources_digest"]:
        return False
    return installed_names(prefix) == recorded_names(record) and pip_state(prefix) == recorded_pip(record) and scripts_match(prefix, record)


def diff_packages(installed: dict[str, str], planned: dict[str, str]) -> tuple[PackageChange, ...]:
    """`name -> "version build"` on each side."""
    out = []
    for name in sorted(set(installed) | set(planned)):
        old, new = installed.get(name), planned.get(name)
        if old == new:
            continue
        kind: Literal["added", "removed", "changed"] = "added" if old is None else "removed" if new is None else "changed"
        out.append(PackageChange(name, kind, old, new))
    return tuple(out)


def diff_variables(old: tuple[EnvOp, ...], new: tuple[EnvOp, ...]) -> tuple[VariableChange, ...]:
    before = {op.name: describe_op(op) for op in old}
    after = {op.name: describe_op(op) for op in new}
    return tuple(VariableChange(n, before.get(n), after.get(n)) for n in sorted(set(before) | set(after)) if before.get(n) != after.get(n))


def _entries(prefix: Path) -> set[str]:
    """Every path in the env (files, links, dirs), relative, the journal's own dirs left out. A
    scandir walk: a torch env has some 20,000 entries, and this runs before every sync."""
    journal = str(sync_journal_path(prefix).relative_to(prefix))
    out: set[str] = set()
    stack = [("", str(prefix))]
    while stack:
        rel, full = stack.pop()
        try:
            entries = list(os.scandir(full))
        except OSError:
            continue
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            if path.startswith(journal):  # the journal and its .tmp-PID while being written
                continue
            out.add(path)
            if entry.is_dir(follow_symlinks=False):
                stack.append((path, entry.path))
    return out


def write_journal(prefix: Path) -> None:
    """Copy conda-meta's records and envkit's record aside, list every path the env has, then
    rename the copy into place: the journal exists whole or not at all. The list lets a rollback
    remove what a killed install half-linked (files no conda-meta record owns yet)."""
    import shutil

    final = sync_journal_path(prefix)
    tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "conda-meta").mkdir(parents=True)
    for path in [*(prefix / "conda-meta").glob("*.json"), prefix / "conda-meta" / "history"]:
        if path.is_file():
            shutil.copy2(path, tmp / "conda-meta" / path.name)
    if record_path(prefix).is_file():
        shutil.copy2(record_path(prefix), tmp / "record.json")
    (tmp / "paths").write_text("".join(f"{p}\n" for p in sorted(_entries(prefix))), encoding="utf-8")
    os.replace(tmp, final)


def _remove_strays(prefix: Path, known: set[str]) -> None:
    """Delete what the env did not have before the sync, deepest first."""
    for rel in sorted(_entries(prefix) - known, key=lambda p: p.count("/"), reverse=True):
        path = prefix / rel
        if path.is_dir() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.rmdir()  # only once empty: a dir that still holds known paths stays
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def rollback(prefix: Path, cache: Path) -> None:
    """Install the journal's packages back over whatever the env holds now, restore envkit's record
    and activation scripts, and drop the journal. The journal's conda-meta files are the originals:
    they are copied back as they were, so the env's records end byte for byte as before."""
    import shutil

    import rattler

    from envkit.activation.writer import recorded_activation, remove_stale, write_files
    from envkit.inplace import change_env
    from envkit.record import write_record

    journal = sync_journal_path(prefix)
    saved_meta = sorted((journal / "conda-meta").glob("*.json"))
    change_env([rattler.PrefixRecord.from_path(p) for p in saved_meta], prefix, cache, [])
    for path in [*saved_meta, journal / "conda-meta" / "history"]:
        if path.is_file():
            shutil.copy2(path, prefix / "conda-meta" / path.name)
    listed = journal / "paths"
    if listed.is_file():
        _remove_strays(prefix, set(listed.read_text(encoding="utf-8").splitlines()))
    saved = journal / "record.json"
    if saved.is_file():
        record = json.loads(saved.read_text(encoding="utf-8"))
        _restore_pip(prefix, record)
        files = recorded_activation(prefix, record).files(prefix)
        write_files(files)
        remove_stale(prefix, files)
        write_record(prefix, record)
    shutil.rmtree(journal, ignore_errors=True)


def _restore_pip(prefix: Path, record: dict[str, Any]) -> None:
    """pip wheels back to the recorded ones: drop what the sync added, reinstall what it removed
    or changed, by the exact URLs (and hashes) the record keeps."""
    import subprocess

    wanted = {(str(p["name"]), str(p["version"])): str(p.get("url") or "") for p in record.get("pip_installed", []) if isinstance(p, dict)}
    have = pip_state(prefix)
    python = str(prefix / "bin" / "python")
    extra = sorted({name for name, version in have if (name, version) not in wanted})
    if extra:
        subprocess.run([python, "-m", "pip", "uninstall", "--yes", *extra], capture_output=True, check=False, timeout=600)
    missing = [url for key, url in sorted(wanted.items()) if key not in have and url]
    if missing:
        subprocess.run(
            [python, "-m", "pip", "install", "--no-deps", "--no-input", *missing], capture_output=True, check=False, timeout=3600
        )


def drift(record: dict[str, Any], packages: dict[str, CondaPackage], pip: dict[str, PipDist]) -> list[str]:
    """What changed since envkit installed the env (conda install, pip install, a removal), one line
    each, from conda-meta's packages and the env's pip dists."""
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
    return lines
