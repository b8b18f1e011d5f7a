"""envkit.audit.engine: auditing many envs at once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# In a fresh interpreter: the test process itself runs other threads by now (rattler's runtime).
FORKS = """
import json, os, sys, threading
from pathlib import Path
from envkit.audit.engine import audit_many

prefixes = [Path(p) for p in sys.argv[1:]]
os.cpu_count = lambda: 2  # audit_many forks only with two CPUs or more: as on our machines, on any
forks = []
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
print(json.dumps({"alone": forked, "crowded": len(forks) - forked,
                  "same": [(str(a.prefix), a.findings) for a in alone] == [(str(a.prefix), a.findings) for a in crowded]}))
"""


def _envs(root: Path, count: int) -> list[Path]:
    out = []
    for n in range(count):
        prefix = root / f"env{n}"
        (prefix / "conda-meta").mkdir(parents=True)
        (prefix / "conda-meta" / "history").write_text("")
        out.append(prefix)
    return out


def test_many_envs_fork_only_from_a_single_threaded_process(tmp_path: Path) -> None:
    """A fork copies only the forking thread, so a lock another thread holds stays held in the
    child: with a second thread alive, the envs are audited on threads instead, to the same result."""
    prefixes = _envs(tmp_path, 4)
    proc = subprocess.run([sys.executable, "-c", FORKS, *map(str, prefixes)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["alone"] > 0 and seen["crowded"] == 0 and seen["same"], seen
