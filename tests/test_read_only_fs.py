"""A read-only filesystem is said as such by every command that would write there: create, as sync
and remove say it (exit 74), not as a permission the user lacks."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.tiny import tiny_channel, tiny_recipe


def test_create_on_a_read_only_filesystem_says_so(tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    mount = tmp_path / "ro"
    mount.mkdir()
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is not installed"
    driver = (
        f"mount -t tmpfs -o ro tmpfs '{mount}' && exec '{sys.executable}' -m envkit create '{recipe}' -p '{mount}/env' --yes --no-probe"
    )
    proc = subprocess.run([unshare, "-m", "sh", "-c", driver], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 74, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith(f"envkit: error: the filesystem is read-only: cannot write {mount}; {mount}/env was not created"), (
        proc.stderr
    )
    assert proc.stderr.count("\n") == 1 and "not writable by you" not in proc.stderr
