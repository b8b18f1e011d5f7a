"""Changes to an existing env run rattler's installer in a child process.

A rattler install cancelled by Ctrl-C keeps going in the background: its linking tasks live on
tokio's workers, not in the Python future, so they go on writing files and conda-meta records after
the KeyboardInterrupt. A rollback started in the same process then reads a prefix that changes
under it (rattler's clobber registry panics on exactly that). A child process can be stopped for
certain: SIGKILL, wait, and nothing writes to the prefix any more. The child also dies with envkit
(parent-death signal), so a killed sync leaves no installer behind for the next run to race.

The records travel as a lock file (rattler's format, which keeps every field an install needs);
the job itself comes on the child's stdin, so a sync can start the child before it has solved.
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


class Installer:
    """One installer child, started before it is needed: its interpreter and rattler imports (about
    150 ms, half of a small sync) overlap the parent's solve and journal. It takes one change, then
    exits; closed unused, it is killed (it has touched nothing: it only reads its job from stdin)."""

    def __init__(self) -> None:
        self._child = subprocess.Popen(
            [sys.executable, "-m", "envkit.inplace"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONSAFEPATH": "1"},
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - a prctl and a signal disposition, no locks taken
        )

    def __enter__(self) -> Installer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._child.poll() is None:
            self._child.kill()
            self._child.wait()

    def change(self, records: list[Any], prefix: Path, cache: Path, specs: list[str]) -> None:
        """Make `prefix` hold exactly `records` (rattler unlinks, links and leaves alone as needed)."""
        with tempfile.TemporaryDirectory(prefix="envkit-change-") as tmp:
            plan = Path(tmp) / "records.lock"
            _write_records(records, plan)
            job = json.dumps({"plan": str(plan), "prefix": str(prefix), "cache": str(cache), "specs": specs})
            try:
                _, err = self._child.communicate(job + "\n")
            except BaseException:
                self.close()
                raise
        if self._child.returncode != 0:
            lines = [line for line in (err or "").splitlines() if line.strip()]
            code = self._child.returncode
            raise InstallError(lines[-1].removeprefix("envkit: error: ") if lines else f"changing {prefix} failed (exit {code})")


def change_env(records: list[Any], prefix: Path, cache: Path, specs: list[str]) -> None:
    """One change with a child started for it (a rollback: nothing to overlap)."""
    with Installer() as installer:
        installer.change(records, prefix, cache, specs)


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


def _serve() -> int:
    """Load what an install needs, then wait for the job (none: the parent closed it unused)."""
    import rattler  # noqa: F401 - loaded now, while the parent solves

    from envkit import backend, condameta  # noqa: F401

    line = sys.stdin.readline()
    if not line.strip():
        return 0
    job = json.loads(line)
    return _child(Path(job["plan"]), Path(job["prefix"]), Path(job["cache"]), list(job["specs"]))


if __name__ == "__main__":
    code = _serve()
    sys.stderr.flush()
    os._exit(code)  # past rattler's runtime teardown (see envkit.cli.hard_exit)
