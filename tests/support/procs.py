"""Find the processes a test started, however deep, by a marker in their environment: what must
be gone once envkit has ended (an installer child left waiting, a probe's worker)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

MARK = "ENVKIT_TEST_PROCESS_MARK"


def new_mark() -> str:
    return uuid.uuid4().hex


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def marked(mark: str) -> list[int]:
    """Live processes whose environment carries MARK=mark."""
    needle = f"{MARK}={mark}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def gone_within(pids: Callable[[], list[int]], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while pids():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def none_left(mark: str, seconds: float = 10) -> bool:
    return gone_within(lambda: marked(mark), seconds)
