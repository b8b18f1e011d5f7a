"""Atomic writes: the mode a file ends with (a rename keeps the temp file's, and mkstemp's is 0600)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from envkit.fsutil import atomic_write_text, umask


@pytest.fixture
def mask_027() -> Iterator[None]:
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_a_new_file_gets_what_open_gives(tmp_path: Path, mask_027: None) -> None:
    assert umask() == 0o027
    atomic_write_text(tmp_path / "new.txt", "x\n")
    with open(tmp_path / "plain.txt", "w") as handle:
        handle.write("x\n")
    assert (tmp_path / "new.txt").stat().st_mode & 0o7777 == (tmp_path / "plain.txt").stat().st_mode & 0o7777 == 0o640


def test_a_replaced_file_keeps_its_mode_and_an_explicit_one_wins(tmp_path: Path, mask_027: None) -> None:
    kept = tmp_path / "dir" / "kept.txt"
    kept.parent.mkdir()
    kept.write_text("old\n")
    kept.chmod(0o604)
    atomic_write_text(kept, "new\n")
    assert (kept.read_text(), kept.stat().st_mode & 0o7777) == ("new\n", 0o604)
    atomic_write_text(kept, "newer\n", mode=0o644)
    assert kept.stat().st_mode & 0o7777 == 0o644
    assert [p.name for p in kept.parent.iterdir()] == ["kept.txt"]  # no temp file left behind
