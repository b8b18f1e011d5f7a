"""Sync's journal: the listing of an env's files that a rollback uses to remove what a killed
install half-linked. It is taken while the installer child waits and refreshed when the job comes,
so the refresh must see every change in between (the sync tests cover the journal end to end)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envkit.journal import RACY_NS, TreeSnapshot
from envkit.record import sync_journal_path


def walked(prefix: Path) -> set[str]:
    """Ground truth: every path under `prefix` by os.walk, symlinks to dirs not followed."""
    out = set()
    for root, dirs, files in os.walk(prefix):
        rel = os.path.relpath(root, prefix)
        out |= {name if rel == "." else f"{rel}/{name}" for name in dirs + files}
    return out


def age(prefix: Path, seconds: float) -> None:
    """Every directory's mtime `seconds` in the past: listed then, they are not racy."""
    then = time.time_ns() - int(seconds * 1e9)
    for root, _dirs, _files in os.walk(prefix):
        os.utime(root, ns=(then, then), follow_symlinks=False)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["file", "dir", "remove", "rename", "link", "replace", "dir-to-link"]),
        st.sampled_from(["a", "b", "a/c", "a/d", "b/e", "a/c/f", "g"]),
        st.sampled_from(["a", "b", "a/c", "h", "a/c/i"]),
    ),
    max_size=8,
)


def mutate(root: Path, op: str, path: str, other: str) -> None:
    target, dest = root / path, root / other
    if not target.parent.is_dir():
        return
    if op == "file" and not target.exists():
        target.write_text("x")
    elif op == "dir" and not target.exists():
        target.mkdir()
    elif op == "remove" and (target.exists() or target.is_symlink()):
        shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
    elif op == "rename" and target.exists() and not dest.exists() and dest.parent.is_dir() and not str(dest).startswith(str(target) + "/"):
        target.rename(dest)
    elif op == "link" and not target.exists() and not target.is_symlink():
        target.symlink_to(root / "a" if (root / "a").is_dir() else root)
    elif op == "replace" and target.is_file() and not target.is_symlink():
        target.unlink()
        target.mkdir()
    elif op == "dir-to-link" and target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
        target.symlink_to(root)  # a link to a dir that holds it: a walk that followed it would loop


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, racy=st.booleans())
def test_a_refreshed_listing_is_the_env_as_it_is(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str, str]], racy: bool
) -> None:
    """Whatever changed between the listing and the refresh (files and dirs added, removed,
    renamed, a file turned into a dir, links), in directories listed long ago or just now."""
    prefix = tmp_path_factory.mktemp("tree")
    for d in ("a/c", "b", "etc/envkit"):
        (prefix / d).mkdir(parents=True)
    for f in ("a/x", "a/c/y", "b/z", "top"):
        (prefix / f).write_text("x")
    if not racy:
        age(prefix, 3600)
    tree = TreeSnapshot(prefix)
    assert tree.paths() == walked(prefix)
    for op in ops:
        mutate(prefix, *op)
    assert tree.refresh() == walked(prefix)


def test_a_directory_changed_in_the_tick_it_was_listed_in_is_listed_again(tmp_path: Path) -> None:
    """A change that leaves the directory's mtime as it was (same clock tick, or a coarse file
    system): trusted only for directories that changed well before they were listed."""
    (tmp_path / "d").mkdir()
    then = time.time_ns() - RACY_NS // 2  # recent: racy
    os.utime(tmp_path / "d", ns=(then, then))
    tree = TreeSnapshot(tmp_path)
    (tmp_path / "d" / "new").write_text("x")
    os.utime(tmp_path / "d", ns=(then, then))  # the mtime did not move
    assert "d/new" in tree.refresh()


def test_a_directory_whose_mtime_did_not_move_keeps_its_listing(tmp_path: Path) -> None:
    """What makes a refresh cheap (a stat per directory, not a walk): an old directory with an
    unchanged mtime is not listed again, so a file slipped in behind an mtime reset goes unseen."""
    (tmp_path / "d").mkdir()
    age(tmp_path, 3600)
    then = (tmp_path / "d").stat().st_mtime_ns
    tree = TreeSnapshot(tmp_path)
    (tmp_path / "d" / "new").write_text("x")
    os.utime(tmp_path / "d", ns=(then, then))
    assert "d/new" not in tree.refresh()
    assert "d/new" in TreeSnapshot(tmp_path).paths()


def test_a_directory_replaced_by_another_with_the_same_mtime_is_listed_again(tmp_path: Path) -> None:
    """`rm -r d; mv e d`, both old and with equal mtimes: the same path, another directory."""
    for d in ("d", "e"):
        (tmp_path / d).mkdir()
        (tmp_path / d / f"in-{d}").write_text("x")
    age(tmp_path, 3600)  # d and e: the same old mtime
    tree = TreeSnapshot(tmp_path)
    shutil.rmtree(tmp_path / "d")
    (tmp_path / "e").rename(tmp_path / "d")  # d's mtime is still the old one: only the inode tells
    assert tree.refresh() == walked(tmp_path)


def test_a_directory_turned_into_a_link_is_not_followed(tmp_path: Path) -> None:
    """Even where the parent's listing is trusted (its mtime put back), a link where a listed
    directory was is not walked into: the journal lists the env's own paths, not a link's target."""
    root = tmp_path / "env"
    (root / "d" / "inner").mkdir(parents=True)
    (root / "other").mkdir()
    age(root, 3600)
    then = root.stat().st_mtime_ns
    tree = TreeSnapshot(root)
    shutil.rmtree(root / "d")
    (root / "d").symlink_to(root)
    os.utime(root, ns=(then, then))
    assert tree.refresh() == walked(root) == {"d", "other"}


def test_the_journal_and_its_half_made_copies_are_not_listed(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    journal = sync_journal_path(prefix)
    (journal / "conda-meta").mkdir(parents=True)
    journal.with_name(journal.name + ".tmp-123").mkdir()
    (prefix / "keep").write_text("x")
    assert TreeSnapshot(prefix).paths() == {"etc", "etc/envkit", "keep"}
