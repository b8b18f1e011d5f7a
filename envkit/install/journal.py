"""Sync's journal: what an env was before a sync changed it, so the change is all or nothing.

The journal is a copy of conda-meta's records and envkit's record plus a listing of what the env
held, taken before anything changes and renamed into place whole. The records (7 MB in a torch
env) are copied into the draft by sync's installer child while envkit solves (copy_records), and
kept only while conda-meta is still as they were copied. The listing is of the folders the
change can add entries to (envkit.install.linkscope), each with the names it held, or where those cannot be
known beforehand, of every path in the env. On failure or Ctrl-C the journal's packages are
installed back (from the package cache), what the interrupted install half-linked is removed and
the record restored; a sync killed outright is rolled back the same way by the next envkit run that
changes the env (envkit.install.transaction). A rollback only ever removes an entry the listing shows was
not there before and that the change itself may have written (envkit.install.changescope: the journal
keeps what the change set out to link and install): a file the user added meanwhile stays.

Where a sync changes pip's wheels, the listing is of every path and the journal also keeps the
wheels the env had (PIP_BEFORE). Wheels the sync removes are not uninstalled but moved into the
journal (PIP_STASH, the env's own paths below it), so a rollback moves them back as they were,
a wheel pip-installed by hand included, with no index or download needed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

from envkit.install.changescope import CHANGE, Accounted, ChangeScope
from envkit.prefix.condameta import RecordsState, records_state
from envkit.prefix.envrecord import EnvRecord
from envkit.prefix.record import record_path, sync_journal_path, write_record

PATHS = "paths"  # the listing of every path, one a line
FOLDERS = "folders.json"  # the listing of some folders: {"folders": {folder: [name, ...]}}
PIP_BEFORE = "pip.json"  # the pip wheels the env had: [{"name", "version", "url"}], url "" where unknown
PIP_STASH = "pip-stash"  # wheels' files the sync moved out of the env, at their own paths


def _entries(prefix: Path, journal: str | None = "") -> set[str]:
    """Every path in the env (files, links, dirs), relative, the journal (and its half-made copies)
    left out. A scandir walk: a torch env has some 24,000 entries. `journal=None`: a folder of the
    env, walked whole."""
    if journal == "":
        journal = str(sync_journal_path(prefix).relative_to(prefix))
    out: set[str] = set()
    stack = [("", str(prefix))]
    while stack:
        rel, full = stack.pop()
        try:
            with os.scandir(full) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            if journal is not None and path.startswith(journal):  # the journal and its .tmp-PID while being written
                continue
            out.add(path)
            if entry.is_dir(follow_symlinks=False):
                stack.append((path, entry.path))
    return out


def _names_in(prefix: Path, folder: str) -> set[str] | None:
    """The entries of one folder of the env (None: it is not a folder), the journal left out."""
    path = prefix / folder
    if path.is_symlink() or not path.is_dir():
        return None
    journal = sync_journal_path(prefix)
    names = {entry.name for entry in os.scandir(path)}
    if path == journal.parent:
        names = {n for n in names if not n.startswith(journal.name)}
    return names


def draft_path(prefix: Path) -> Path:
    """Where this process builds the journal before renaming it into place."""
    final = sync_journal_path(prefix)
    return final.with_name(final.name + f".tmp-{os.getpid()}")


def copy_records(prefix: Path, draft: Path) -> RecordsState | None:
    """conda-meta's package records copied into a journal's draft (draft_path), times kept: the
    state they were copied in (envkit.prefix.condameta.records_state), or None where conda-meta changed
    while they were copied. Sync's installer child does this while envkit solves (a torch env's
    records are some 7 MB), and write_journal then keeps the copy if conda-meta is still in that
    state."""
    into = draft / "conda-meta"
    shutil.rmtree(draft, ignore_errors=True)
    into.mkdir(parents=True)
    state = records_state(prefix)
    for path in (prefix / "conda-meta").glob("*.json"):
        if path.is_file():
            shutil.copy2(path, into / path.name)
    return state if records_state(prefix) == state else None


def write_journal(prefix: Path, scope: ChangeScope | None, *, folders: tuple[str, ...] | None = None, records_copied: bool = False) -> None:
    """Copy conda-meta's records and envkit's record aside with the listing, then rename the copy
    into place: the journal exists whole or not at all (a copy left half-made by a kill or a full
    disk is deleted by the next run, envkit.install.transaction). The listing lets a rollback remove what a
    killed install half-linked (files no conda-meta record owns yet): of `folders` when given (the
    ones the change can add entries to, envkit.install.linkscope), else of every path. `scope`: what the
    change sets out to write, the only new entries a rollback may remove. `records_copied`: the
    draft holds conda-meta's records as they are now already (copy_records)."""
    final, tmp = sync_journal_path(prefix), draft_path(prefix)
    try:
        if not records_copied:
            copy_records(prefix, tmp)  # a draft made anew
        if scope is not None:
            (tmp / CHANGE).write_text(scope.to_json(), encoding="utf-8")
        if (history := prefix / "conda-meta" / "history").is_file():
            shutil.copy2(history, tmp / "conda-meta" / history.name)
        if record_path(prefix).is_file():
            shutil.copy2(record_path(prefix), tmp / "record.json")
        if folders is None:
            (tmp / PATHS).write_text("".join(f"{p}\n" for p in _entries(prefix)), encoding="utf-8")
            (tmp / PIP_BEFORE).write_text(json.dumps(_pip_before(prefix)), encoding="utf-8")
        else:
            listed = {folder: sorted(names) for folder in folders if (names := _names_in(prefix, folder)) is not None}
            (tmp / FOLDERS).write_text(json.dumps({"folders": listed}), encoding="utf-8")
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _pip_before(prefix: Path) -> list[dict[str, str]]:
    """The env's wheels as they are, with the URL each came from: a git wheel moved to another
    commit by hand since is rolled back to that commit, not to the recorded one."""
    from envkit.pip.repair import pip_wheels, recorded_wheels
    from envkit.prefix.installed import pip_dists
    from envkit.prefix.record import read_record

    record = read_record(prefix)
    urls = recorded_wheels(record.pip_installed if record else ())
    dists = pip_dists(prefix)
    return [
        {"name": name, "version": version, "url": dists[name].reinstall_url(urls.get((name, version), ""), version)}
        for name, version in sorted(pip_wheels(dists))
    ]


def stash(prefix: Path, paths: tuple[str, ...]) -> None:
    """Move `paths` (relative to the prefix: a wheel's files, envkit.prefix.installed.dist_files) into the
    journal, then drop the folders that leaves empty, as `pip uninstall` would. A kill halfway
    leaves each file in one place or the other (or, across filesystems, a copy in the journal
    too), and the rollback moves back what was moved."""
    root = sync_journal_path(prefix) / PIP_STASH
    parents: set[str] = set()
    for rel in paths:
        source, target = prefix / rel, root / rel
        if not os.path.lexists(source):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)  # a rename, or a copy where lib/ is a link to another filesystem
        parents.update(str(parent) for parent in Path(rel).parents if str(parent) != ".")
    for rel in sorted(parents, key=lambda p: p.count("/"), reverse=True):
        folder = prefix / rel
        with contextlib.suppress(OSError):
            if folder.is_dir() and not folder.is_symlink():
                leftover = os.listdir(folder)
                if leftover == ["__pycache__"]:  # bytecode of files no RECORD listed: the folder would import as an empty package
                    cache, kept = folder / "__pycache__", root / rel / "__pycache__"
                    kept.mkdir(parents=True, exist_ok=True)
                    for name in os.listdir(cache):
                        shutil.move(cache / name, kept / name)
                    cache.rmdir()
                folder.rmdir()


def _unstash(prefix: Path) -> None:
    """Move the stashed files back to their places (over whatever a relinked package put there)."""
    root = sync_journal_path(prefix) / PIP_STASH
    if not root.is_dir():
        return
    for here, dirs, files in os.walk(root):
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(here, d)))]:
            stashed = Path(here) / name
            target = prefix / stashed.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif os.path.lexists(target):
                target.unlink()
            shutil.move(stashed, target)


def _remove_new_entries(prefix: Path, folders: dict[str, list[str]], accounted: Accounted) -> list[str]:
    """Delete each entry of a listed folder that it did not hold before the sync and that the change
    accounts for; inside a new folder, the same for each of its entries. Returns what was kept."""
    new: set[str] = set()
    for folder, before in folders.items():
        now = _names_in(prefix, folder)
        for name in (now or set()) - set(before):
            rel = f"{folder}/{name}" if folder else name
            new.add(rel)
            if (prefix / rel).is_dir() and not (prefix / rel).is_symlink():
                new.update(f"{rel}/{inner}" for inner in _entries(prefix / rel, journal=None))
    return remove_accounted(prefix, new, accounted)


def remove_accounted(prefix: Path, new: set[str], accounted: Accounted) -> list[str]:
    """Delete, deepest first, the new entries the change accounts for, and the new folders that
    leaves empty. Returns the new files kept (a user's), for the rollback to name."""
    kept = []
    for rel in sorted(new, key=lambda p: (p.count("/"), p), reverse=True):
        path = prefix / rel
        if path.is_dir() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.rmdir()  # only once empty: a folder that holds a kept file stays
        elif rel in accounted:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        elif os.path.lexists(path):
            kept.append(rel)
    return sorted(kept)


def rollback(prefix: Path, cache: Path) -> list[str]:
    """Install the journal's packages back over whatever the env holds now, restore envkit's record
    and activation scripts, and drop the journal. The journal's conda-meta files are the originals:
    they are copied back as they were, so the env's records end byte for byte as before. Returns
    the new files it kept because the change did not write them (relative to the prefix)."""
    import rattler

    from envkit.activation.writer import recorded_activation, remove_stale, write_files
    from envkit.install.inplace import change_env

    journal = sync_journal_path(prefix)
    saved_meta = sorted((journal / "conda-meta").glob("*.json"))
    change_env([rattler.PrefixRecord.from_path(p) for p in saved_meta], prefix, cache, [])
    for path in [*saved_meta, journal / "conda-meta" / "history"]:
        if path.is_file():
            shutil.copy2(path, prefix / "conda-meta" / path.name)
    scoped, listed = journal / FOLDERS, journal / PATHS
    accounted = Accounted(prefix, cache, ChangeScope.read(journal))
    kept: list[str] = []
    if scoped.is_file():
        kept = _remove_new_entries(prefix, json.loads(scoped.read_text(encoding="utf-8"))["folders"], accounted)
    elif listed.is_file():
        kept = remove_accounted(prefix, _entries(prefix) - set(listed.read_text(encoding="utf-8").splitlines()), accounted)
    _unstash(prefix)
    saved = journal / "record.json"
    if saved.is_file():
        record = EnvRecord.from_json(json.loads(saved.read_text(encoding="utf-8")))
        if (journal / PIP_BEFORE).is_file():
            before = json.loads((journal / PIP_BEFORE).read_text(encoding="utf-8"))
            _restore_pip(prefix, EnvRecord.from_json({"pip_installed": before}))
        elif listed.is_file():  # a journal an older envkit wrote, which kept no pip list: the recorded wheels
            _restore_pip(prefix, record)
        files = recorded_activation(prefix, record).files(prefix)
        write_files(files)
        remove_stale(prefix, files)
        write_record(prefix, record)
    shutil.rmtree(journal, ignore_errors=True)
    return kept


def _restore_pip(prefix: Path, wanted: EnvRecord) -> None:
    """pip wheels back to `wanted.pip_installed` (envkit.team.sync.pip_repair): drop what the sync
    added, reinstall what it removed or changed and the stash did not bring back, by the exact URLs
    (and hashes) kept, or the same files by hash from this machine's pip settings. A rollback goes
    on when pip cannot: the conda side and the record are still put back."""
    from envkit.core.errors import EnvkitError
    from envkit.pip.install import pip_put_back
    from envkit.pip.repair import pip_repair

    repair = pip_repair(prefix, wanted)
    with contextlib.suppress(EnvkitError):
        # only what the record names by URL: a rollback takes from an index no file it cannot name by hash
        pip_put_back(prefix, replace(repair, missing=tuple(m for m in repair.missing if m[2])))
