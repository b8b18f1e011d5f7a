"""Stop a process and everything below it. envkit's runner uses it from outside the env, the probe
from inside.

A process group is not enough: torchrun starts each rank with start_new_session=True, so ranks
leave their parent's group, and an orphaned rank keeps the pipes open and the CPU busy. The tree is
found through /proc parent links, frozen (SIGSTOP) until no new child appears, then killed, so a
process cannot start something new between the look and the kill.
"""

from __future__ import annotations

import contextlib
import os
import signal


def children_map() -> dict[int, list[int]]:
    below: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return below
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        below.setdefault(ppid, []).append(int(entry))
    return below


def descendants(pid: int) -> list[int]:
    """Every live process below pid, parents before children."""
    below = children_map()
    found: list[int] = []
    queue = list(below.get(pid, []))
    while queue:
        child = queue.pop(0)
        if child not in found:
            found.append(child)
            queue.extend(below.get(child, []))
    return found


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


def kill_tree(pid: int, include_root: bool = True) -> None:
    """SIGKILL pid (unless include_root is false) and all of its descendants."""
    frozen: list[int] = []
    for _ in range(20):  # freeze until the tree stops growing
        tree = ([pid] if include_root else []) + descendants(pid)
        new = [p for p in tree if p not in frozen]
        if not new:
            break
        for victim in new:
            _signal(victim, signal.SIGSTOP)
        frozen.extend(new)
    for victim in frozen:
        _signal(victim, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
