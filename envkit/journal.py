"""Sync's journal: what an env was before a sync changed it, so the change is all or nothing.

The journal is a copy of conda-meta's records and envkit's record plus the list of every path the
env held, taken before anything changes and renamed into place whole. On failure or Ctrl-C the
journal's packages are installed back (from the package cache), what the interrupted install
half-linked is removed and the record restored; a sync killed outright is rolled back the same way
by the next envkit run that touches the env (envkit.transaction).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.record import partial_journals, record_path, sync_journal_path

RACY_NS = 2_000_000_000  # a directory changed this close to its listing may change again unseen (2 s: FAT's mtime tick)


@dataclass(frozen=True)
class _Listed:
    inode: int  # the directory's, taken before it was listed: another dir renamed into its place differs
    mtime_ns: int
    listed_ns: int  # when it was listed (wall clock)
    paths: tuple[str, ...]  # its entries, relative to the prefix
    subdirs: tuple[str, ...]


class TreeSnapshot:
    """Every path in an env (files, links, dirs; the journal left out), taken ahead of time and
    brought up to date cheaply. A directory's entries change only when its mtime does, so `refresh`
    stats each directory (a torch env: 2,000 of them) and lists again only those whose mtime moved
    or is too recent to trust, instead of walking 20,000 entries on sync's critical path."""

    def __init__(self, prefix: Path) -> None:
        self._prefix = str(prefix)
        self._journal = str(sync_journal_path(prefix).relative_to(prefix))
        self._dirs: dict[str, _Listed] = {}
        self._update()

    def _list(self, rel: str, inode: int, mtime_ns: int) -> _Listed | None:
        listed_ns = time.time_ns()
        try:
            with os.scandir(f"{self._prefix}/{rel}") as it:
                entries = list(it)
        except OSError:
            return None
        paths, subdirs = [], []
        for entry in entries:
            path = f"{rel}/{entry.name}" if rel else entry.name
            if path.startswith(self._journal):  # the journal and its .tmp-PID while being written
                continue
            paths.append(path)
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(path)
        return _Listed(inode, mtime_ns, listed_ns, tuple(paths), tuple(subdirs))

    def refresh(self) -> set[str]:
        """The paths the env holds now: a directory that is the same one (inode) with the same
        mtime, not racy, keeps its listing; the rest, new ones included, are listed again."""
        self._update()
        return self.paths()

    def _update(self) -> None:
        fresh: dict[str, _Listed] = {}
        stack = [""]
        while stack:
            rel = stack.pop()
            try:
                st = os.lstat(f"{self._prefix}/{rel}")
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):  # a dir turned into a link or a file: its parent lists it
                continue
            known = self._dirs.get(rel)
            if known is None or (known.inode, known.mtime_ns) != (st.st_ino, st.st_mtime_ns) or st.st_mtime_ns + RACY_NS > known.listed_ns:
                known = self._list(rel, st.st_ino, st.st_mtime_ns)
                if known is None:
                    continue
            fresh[rel] = known
            stack.extend(known.subdirs)
        self._dirs = fresh

    def paths(self) -> set[str]:
        return {path for listed in self._dirs.values() for path in listed.paths}


def write_journal(prefix: Path, tree: TreeSnapshot | None = None) -> None:
    """Copy conda-meta's records and envkit's record aside, list every path the env has (with
    `tree`: that snapshot, refreshed), then rename the copy into place: the journal exists whole or
    not at all. The list lets a rollback remove what a killed install half-linked (files no
    conda-meta record owns yet)."""
    final = sync_journal_path(prefix)
    tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "conda-meta").mkdir(parents=True)
    for path in [*(prefix / "conda-meta").glob("*.json"), prefix / "conda-meta" / "history"]:
        if path.is_file():
            shutil.copy2(path, tmp / "conda-meta" / path.name)
    if record_path(prefix).is_file():
        shutil.copy2(record_path(prefix), tmp / "record.json")
    paths = tree.refresh() if tree is not None else TreeSnapshot(prefix).paths()
    (tmp / "paths").write_text("\n".join(paths) + "\n", encoding="utf-8")  # a set: unsorted (sorting 20,000 costs 10 ms)
    os.replace(tmp, final)


def undo(prefix: Path, cache: Path) -> bool:
    """Settle a sync that did not finish: roll the env back if its journal was written (True), and
    drop a journal copy its writer left half-made (nothing was changed under that one)."""
    written = sync_journal_path(prefix).is_dir()
    if written:
        rollback(prefix, cache)
    for partial in partial_journals(prefix):
        shutil.rmtree(partial, ignore_errors=True)
    return written


def _remove_strays(prefix: Path, known: set[str]) -> None:
    """Delete what the env did not have before the sync, deepest first."""
    for rel in sorted(TreeSnapshot(prefix).paths() - known, key=lambda p: p.count("/"), reverse=True):
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

    from envkit.sync import pip_state

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
