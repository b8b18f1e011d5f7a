"""`envkit create` on a real terminal (a pseudo-terminal): the plan, the question, the answer."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.support.tiny import tiny_channel, tiny_recipe


def converse(args: list[str], answer: bytes, timeout: float = 120) -> tuple[int, str]:
    """Run under a pty; type `answer` when the question appears; return exit code and screen text."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        args, stdin=slave, stdout=slave, stderr=slave, env=dict(os.environ, TERM="xterm", COLUMNS="200"), close_fds=True
    )
    os.close(slave)
    screen = b""
    answered = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
        if not answered and b"Proceed? [y/N]" in screen:
            os.write(master, answer + b"\r")
            answered = True
        if proc.poll() is not None and not ready:
            break
    if proc.poll() is None:
        proc.kill()
    code = proc.wait(timeout=30)
    os.close(master)
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode("utf-8", "replace"))


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
