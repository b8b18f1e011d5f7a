"""Sync's journal: what it lists of an env, which a rollback uses to remove what a killed install
half-linked (the sync tests cover the journal end to end: failures, Ctrl-C, kill -9)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from envkit.install.journal import copy_records, draft_path, write_journal
from envkit.prefix.condameta import records_state
from envkit.prefix.record import sync_journal_path


def walked(prefix: Path) -> set[str]:
    """Ground truth: every path under `prefix` by os.walk, links to dirs not followed."""
    out = set()
    for root, dirs, files in os.walk(prefix):
        rel = os.path.relpath(root, prefix)
        out |= {name if rel == "." else f"{rel}/{name}" for name in dirs + files}
    return out


def test_the_journal_lists_every_path_but_its_own(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    for d in ("conda-meta", "lib/python3.11/site-packages/pkg/__pycache__", "share/empty"):
        (prefix / d).mkdir(parents=True)
    (prefix / "conda-meta" / "pkg-1.0-0.json").write_text("{}")
    (prefix / "lib/python3.11/site-packages/pkg/__init__.py").write_text("")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to("/usr/bin/python3")
    (prefix / "lib" / "loop").symlink_to(prefix)  # a link to a dir that holds it: listed, not walked into
    journal = sync_journal_path(prefix)
    (journal.with_name(journal.name + ".tmp-4242") / "conda-meta").mkdir(parents=True)  # a copy a kill left
    before = walked(prefix) - {"etc/envkit/sync-journal.tmp-4242", "etc/envkit/sync-journal.tmp-4242/conda-meta"}

    write_journal(prefix, None)

    assert set((journal / "paths").read_text().splitlines()) == before
    assert sorted(p.name for p in (journal / "conda-meta").iterdir()) == ["pkg-1.0-0.json"]
    assert not journal.with_name(journal.name + f".tmp-{os.getpid()}").exists()


def test_a_scoped_journal_lists_its_folders_names_but_never_its_own(tmp_path: Path) -> None:
    """The listing of some folders (envkit.install.linkscope): each existing folder with the names it holds;
    a folder that is not there (yet) is left out, as is the journal in its own folder."""
    import json

    prefix = tmp_path / "env"
    for d in ("conda-meta", "etc/envkit", "share/tool"):
        (prefix / d).mkdir(parents=True)
    (prefix / "etc" / "envkit" / "record.json").write_text("{}")
    (prefix / "share" / "tool" / "a.txt").write_text("")
    (prefix / "share" / "link").symlink_to(prefix / "share" / "tool")

    write_journal(prefix, None, folders=("", "etc/envkit", "share/tool", "share/link", "share/new"))

    journal = sync_journal_path(prefix)
    assert not (journal / "paths").exists()
    listed = json.loads((journal / "folders.json").read_text())["folders"]
    assert listed == {"": ["conda-meta", "etc", "share"], "etc/envkit": ["record.json"], "share/tool": ["a.txt"]}


def test_a_stashed_wheel_leaves_no_folder_behind_and_comes_back_whole(tmp_path: Path) -> None:
    """What `pip uninstall` would remove is moved into the journal: the wheel's files, its listed
    modules' bytecode, and a folder left holding only bytecode no RECORD named (it would import as
    an empty namespace package); the rollback's unstash moves all of it back."""
    from envkit.install.journal import _unstash, stash
    from envkit.prefix.installed import dist_files, pip_dists

    prefix = tmp_path / "env"
    site = prefix / "lib" / "python3.11" / "site-packages"
    (site / "wheel" / "__pycache__").mkdir(parents=True)
    (site / "wheel" / "__init__.py").write_text("x = 1\n")
    (site / "wheel" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"listed")
    (site / "wheel" / "__pycache__" / "gone.cpython-311.pyc").write_bytes(b"of a module no RECORD named")
    info = site / "wheel-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wheel\nVersion: 1.0\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("wheel/__init__.py,,\nwheel-1.0.dist-info/METADATA,,\nwheel-1.0.dist-info/RECORD,,\n")
    (site / "other.py").write_text("")  # not the wheel's
    before = walked(prefix)
    write_journal(prefix, None)

    stash(prefix, dist_files(prefix, pip_dists(prefix)["wheel"]))

    assert sorted(p.name for p in site.iterdir()) == ["other.py"]
    _unstash(prefix)
    assert walked(prefix) - {p for p in walked(prefix) if p.startswith("etc")} == before
    assert (site / "wheel" / "__pycache__" / "gone.cpython-311.pyc").read_bytes() == b"of a module no RECORD named"


def test_the_journal_keeps_the_records_copied_ahead_and_copies_them_itself_otherwise(tmp_path: Path) -> None:
    """copy_records (sync's installer child, while envkit solves) fills the draft; write_journal
    then adds the rest and renames it, its copy untouched (the same files); without one it
    copies the records itself, into a draft made anew."""
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    for name in ("a-1.0-0.json", "b-2.0-0.json"):
        (prefix / "conda-meta" / name).write_text(f'{{"name": "{name}"}}')
    (prefix / "conda-meta" / "history").write_text("==> 2026-12-03 <==\n")
    journal = sync_journal_path(prefix)

    state = copy_records(prefix, draft_path(prefix))
    assert state == records_state(prefix)
    copied = {p.name: p.stat().st_ino for p in (draft_path(prefix) / "conda-meta").iterdir()}
    write_journal(prefix, None, folders=("",), records_copied=True)
    assert {p.name: p.stat().st_ino for p in (journal / "conda-meta").glob("*.json")} == copied
    assert (journal / "conda-meta" / "history").read_text() == "==> 2026-12-03 <==\n"
    assert (journal / "record.json").exists() is False and not draft_path(prefix).exists()

    shutil.rmtree(journal)
    (draft_path(prefix) / "conda-meta").mkdir(parents=True)
    (draft_path(prefix) / "conda-meta" / "gone-0.1-0.json").write_text("{}")  # a stale draft: not kept
    write_journal(prefix, None, folders=("",))
    assert sorted(p.name for p in (journal / "conda-meta").iterdir()) == ["a-1.0-0.json", "b-2.0-0.json", "history"]
    assert (journal / "conda-meta" / "a-1.0-0.json").read_text() == '{"name": "a-1.0-0.json"}'
