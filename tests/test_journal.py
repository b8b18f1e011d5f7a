"""Sync's journal: what it lists of an env, which a rollback uses to remove what a killed install
half-linked (the sync tests cover the journal end to end: failures, Ctrl-C, kill -9)."""

from __future__ import annotations

import os
from pathlib import Path

from envkit.journal import write_journal
from envkit.record import sync_journal_path


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

    write_journal(prefix)

    assert set((journal / "paths").read_text().splitlines()) == before
    assert sorted(p.name for p in (journal / "conda-meta").iterdir()) == ["pkg-1.0-0.json"]
    assert not journal.with_name(journal.name + f".tmp-{os.getpid()}").exists()


def test_a_scoped_journal_lists_its_folders_names_but_never_its_own(tmp_path: Path) -> None:
    """The listing of some folders (envkit.linkscope): each existing folder with the names it holds;
    a folder that is not there (yet) is left out, as is the journal in its own folder."""
    import json

    prefix = tmp_path / "env"
    for d in ("conda-meta", "etc/envkit", "share/tool"):
        (prefix / d).mkdir(parents=True)
    (prefix / "etc" / "envkit" / "record.json").write_text("{}")
    (prefix / "share" / "tool" / "a.txt").write_text("")
    (prefix / "share" / "link").symlink_to(prefix / "share" / "tool")

    write_journal(prefix, folders=("", "etc/envkit", "share/tool", "share/link", "share/new"))

    journal = sync_journal_path(prefix)
    assert not (journal / "paths").exists()
    listed = json.loads((journal / "folders.json").read_text())["folders"]
    assert listed == {"": ["conda-meta", "etc", "share"], "etc/envkit": ["record.json"], "share/tool": ["a.txt"]}
