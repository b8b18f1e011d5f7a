"""Run envkit on a real terminal (a pseudo-terminal), answer its question, read the screen."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time
from collections.abc import Callable


def converse(
    args: list[str],
    answer: bytes,
    question: bytes = b"Proceed? [y/N]",
    timeout: float = 120,
    while_asked: Callable[[], object] | None = None,
) -> tuple[int, str]:
    """Type `answer` when `question` appears (after calling `while_asked`, when given); return the
    exit code and the screen's text."""
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
        if not answered and question in screen:
            if while_asked is not None:
                while_asked()
            os.write(master, answer + b"\r")
            answered = True
        if proc.poll() is not None and not ready:
            break
    if proc.poll() is None:
        proc.kill()
    code = proc.wait(timeout=30)
    os.close(master)
    return code, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.decode("utf-8", "replace"))
