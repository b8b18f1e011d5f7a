"""A real full filesystem for a test: a small tmpfs mounted in a private mount namespace
(`unshare -m`, as root), so the host sees nothing of it and it goes away with the process. The
test's steps run inside that namespace, as a Python script, and report back as JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

FILL = '''
def fill(folder):
    """Write until the filesystem says ENOSPC: no room is left, not even for a record."""
    import errno, os
    n = 0
    while True:
        try:
            with open(os.path.join(folder, f".filler-{n}"), "wb") as f:
                while True:
                    f.write(b"\\0" * 4096)
                    f.flush()
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            if n > 64:
                return
            n += 1
'''


def run_in_small_fs(mountpoint: Path, size_kb: int, script: str, env: dict[str, str], timeout: float = 600) -> dict[str, Any]:
    """Mount a `size_kb` tmpfs at `mountpoint`, run `script` (Python; FILL's fill() is defined; it
    prints one JSON document last) there, and return that document."""
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is not installed"
    mountpoint.mkdir(parents=True, exist_ok=True)
    driver = f"mount -t tmpfs -o size={size_kb}k tmpfs '{mountpoint}' && exec '{sys.executable}' -c \"$ENVKIT_FULLFS_SCRIPT\""
    proc = subprocess.run(
        [unshare, "-m", "sh", "-c", driver],
        env={**env, "ENVKIT_FULLFS_SCRIPT": FILL + script},
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"the full-filesystem run failed (a private mount needs root): {proc.stderr[-3000:]}"
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
