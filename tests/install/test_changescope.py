"""What a rollback may remove (envkit.install.changescope.Accounted): what the change wrote, and
rattler's own symlink and reflink probes; never a user's file that merely looks like it."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from envkit.install.changescope import Accounted
from envkit.install.journal import remove_accounted


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


def test_rattlers_reflink_probe_left_by_a_killed_install_goes_with_the_rollback(tmp_path: Path) -> None:
    """rattler makes `.refprobe-XXXXXX/` at the prefix's top, writes `src` and reflinks it to
    `dst`; killed in between (src still empty, or whole), the folder is the change's to remove."""
    prefix = tmp_path / "env"
    probe = prefix / ".refprobe-DvhB0I"
    probe.mkdir(parents=True)
    (probe / "src").write_bytes(b"")
    half = prefix / ".refprobe-a1B2c3"
    half.mkdir()
    (half / "src").write_bytes(b"reflink probe")
    (half / "dst").write_bytes(b"reflink probe")
    new = {probe.name, f"{probe.name}/src", half.name, f"{half.name}/src", f"{half.name}/dst"}
    kept = remove_accounted(prefix, new, Accounted(prefix, tmp_path / "cache", None))
    assert kept == [] and list(prefix.iterdir()) == []


def test_a_users_files_in_a_folder_of_that_name_stay(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    probe = prefix / ".refprobe-Zz9Yy8"
    probe.mkdir(parents=True)
    (probe / "src").write_text("my notes, longer than the probe's bytes\n")
    (probe / "dst").write_text("probe")  # not a start of the probe's bytes
    (probe / "other").write_bytes(b"")  # not a name the probe writes
    (prefix / ".refprobe-toolong1").mkdir()
    (prefix / ".refprobe-toolong1" / "src").write_bytes(b"")  # seven characters: not tempfile's
    new = {str(p.relative_to(prefix)) for p in prefix.rglob("*")}
    kept = remove_accounted(prefix, new, Accounted(prefix, tmp_path / "cache", None))
    assert kept == sorted([".refprobe-Zz9Yy8/src", ".refprobe-Zz9Yy8/dst", ".refprobe-Zz9Yy8/other", ".refprobe-toolong1/src"])
