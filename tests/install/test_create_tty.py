"""`envkit create` on a real terminal (a pseudo-terminal): the plan, the question, the answer."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.terminal import converse
from tests.support.tiny import tiny_channel, tiny_recipe


def test_no_means_nothing_changes(tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    code, screen = converse([sys.executable, "-m", "envkit", "create", str(recipe), "--no-probe"], b"n")
    assert code == 0, screen
    assert "Plan for tiny" in screen and "OMP_NUM_THREADS" in screen and "aborted: nothing was changed" in screen
    assert not (tmp_path / "envs" / "tiny").exists()


def test_yes_creates_with_progress(tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    code, screen = converse([sys.executable, "-m", "envkit", "create", str(recipe), "--no-probe"], b"y")
    assert code == 0, screen
    assert "created" in screen and (tmp_path / "envs" / "tiny" / "etc" / "envkit" / "record.json").exists()
