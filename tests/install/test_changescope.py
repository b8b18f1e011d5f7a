"""What a rollback may remove (envkit.install.changescope.Accounted): what the change wrote, and
rattler's own symlink probe; never a user's file that merely looks like it."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from envkit.install.changescope import Accounted


def test_rattlers_symlink_probe_left_by_a_killed_install_is_the_changes(tmp_path: Path) -> None:
    """rattler makes `symtest_<uuid4>` -> ./ at the prefix's top to see whether links work, and
    removes it at once; an installer killed in between leaves it for the rollback to take."""
    probe = tmp_path / f"symtest_{uuid.uuid4()}"
    os.symlink("./", probe)
    accounted = Accounted(tmp_path, tmp_path / "cache", None)
    assert probe.name in accounted


def test_a_users_file_with_that_name_is_not(tmp_path: Path) -> None:
    name = f"symtest_{uuid.uuid4()}"
    (tmp_path / name).write_text("mine\n")  # a file, not rattler's link to ./
    (tmp_path / "symtest_notes").symlink_to("./")  # no uuid4: not rattler's
    os.symlink("elsewhere", tmp_path / f"symtest_{uuid.uuid4()}")
    accounted = Accounted(tmp_path, tmp_path / "cache", None)
    assert all(entry.name not in accounted for entry in tmp_path.iterdir())
