"""envkit.audit.engine: auditing many envs at once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from envkit.audit.engine import audit_many


def _envs(root: Path, count: int) -> list[Path]:
    out = []
    for n in range(count):
        prefix = root / f"env{n}"
        (prefix / "conda-meta").mkdir(parents=True)
        (prefix / "conda-meta" / "history").write_text("")
        out.append(prefix)
    return out


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one CPU: audit_many never forks")
def test_many_envs_fork_only_from_a_single_threaded_process(tmp_path: Path) -> None:
    """A fork copies only the forking thread, so a lock another thread holds stays held in the
    child: with a second thread alive, the envs are audited on threads instead."""
    prefixes = _envs(tmp_path, 4)
    forks: list[int] = []
    os.register_at_fork(before=lambda: forks.append(1))

    alone = audit_many(prefixes)
    forked = len(forks)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        crowded = audit_many(prefixes)
    finally:
        stop.set()
        other.join()
    assert forked > 0 and len(forks) == forked  # no fork while the other thread ran
    assert [a.prefix for a in crowded] == [a.prefix for a in alone] == prefixes
    assert [a.findings for a in crowded] == [a.findings for a in alone]
