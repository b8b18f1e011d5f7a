"""Changes to an existing env run rattler's installer in a child process.

A rattler install cancelled by Ctrl-C keeps going in the background: its linking tasks live on
tokio's workers, not in the Python future, so they go on writing files and conda-meta records after
the KeyboardInterrupt. A rollback started in the same process then reads a prefix that changes
under it (rattler's clobber registry panics on exactly that). A child process can be stopped for
certain: SIGKILL, wait, and nothing writes to the prefix any more. The child also dies with envkit
(parent-death signal), so a killed sync leaves no installer behind for the next run to race.

The records travel as a lock file (rattler's format, which keeps every field an install needs).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from envkit.errors import InstallError

ENVIRONMENT = "default"


def _die_with_parent() -> None:
    """Before exec in the child: SIGKILL when envkit dies, and Ctrl-C is envkit's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _write_records(records: list[Any], path: Path) -> None:
    import rattler
    from rattler.lock import LockPlatform

    platform = LockPlatform(str(rattler.Subdir.current()))
    lock = rattler.LockFile([platform])
    for record in records:
        lock.add_conda_package(ENVIRONMENT, platform, record)
    lock.to_path(path)


def change_env(records: list[Any], prefix: Path, cache: Path, specs: list[str]) -> None:
    """Make `prefix` hold exactly `records` (rattler unlinks, links and leaves alone as needed)."""
    with tempfile.TemporaryDirectory(prefix="envkit-change-") as tmp:
        plan = Path(tmp) / "records.lock"
        _write_records(records, plan)
        cmd = [sys.executable, "-m", "envkit.inplace", str(plan), str(prefix), str(cache), json.dumps(specs)]
        child = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONSAFEPATH": "1"},
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - a prctl and a signal disposition, no locks taken
        )
        try:
            _, err = child.communicate()
        except BaseException:
            child.kill()
            child.wait()
            raise
    if child.returncode != 0:
        lines = [line for line in (err or "").splitlines() if line.strip()]
        raise InstallError(lines[-1].removeprefix("envkit: error: ") if lines else f"changing {prefix} failed (exit {child.returncode})")


def _child(plan: Path, prefix: Path, cache: Path, specs: list[str]) -> int:
    import rattler

    from envkit import backend, condameta
    from envkit.errors import EnvkitError

    lock = rattler.LockFile.from_path(plan)
    env = lock.environment(ENVIRONMENT)
    records = [r for recs in (env.conda_repodata_records().values() if env else []) for r in recs]
    installed = []
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            installed.append(rattler.PrefixRecord.from_path(path))
        except Exception:  # noqa: S112 - a record a killed install left half-written: not installed
            continue
    try:
        backend.reinstall(records, prefix, cache, installed=installed, specs=specs)
    except EnvkitError as exc:
        print(f"envkit: error: {exc.message}", file=sys.stderr)
        return 1
    condameta.as_conda_writes(prefix)
    return 0


if __name__ == "__main__":
    code = _child(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4]))
    sys.stderr.flush()
    os._exit(code)  # past rattler's runtime teardown (see envkit.cli.hard_exit)
