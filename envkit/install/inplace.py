"""Changes to an existing env run rattler's installer in a child process.

A rattler install cancelled by Ctrl-C keeps going in the background: its linking tasks live on
tokio's workers, not in the Python future, so they go on writing files and conda-meta records after
the KeyboardInterrupt. A rollback started in the same process then reads a prefix that changes
under it (rattler's clobber registry panics on exactly that). A child process can be stopped for
certain: SIGKILL, wait, and nothing writes to the prefix any more. The child also dies with envkit
(parent-death signal), so a killed sync leaves no installer behind for the next run to race.

The records travel as a lock file (rattler's format, which keeps every field an install needs);
the job itself comes on the child's stdin, so a sync can start the child before it has solved, and
even before it has taken the env's lock. Asked to (a line on its stdin, once the lock is held), the
child reads the env's installed records while it waits (they are what its install needs, and the
parent's difference and journal are taken from them: one read of conda-meta, not two), and
announces them on its stdout as one JSON line.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from envkit.core.errors import ExitCode, FilesystemError, InstallError
from envkit.core.fsutil import scratch_dir
from envkit.prefix.condameta import RecordsState, records_state

ENVIRONMENT = "default"
SCRATCH_PREFIX = "envkit-change-"  # the job's records: see envkit.core.fsutil.scratch_dir


def _die_with_parent() -> None:
    """In the child: SIGKILL when envkit dies, and Ctrl-C is envkit's to handle. ctypes is loaded
    here, in the forked child (single-threaded), not on envkit's own path; a spawned child's
    preexec_fn finds it loaded already (_spawn), as nothing may be imported between fork and exec."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _single_threaded() -> bool:
    """Only this process's own thread runs (Python's and the native ones: tokio's, rayon's), so a
    fork copies a process whose locks no other thread holds."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class _Forked:
    """A forked child as much of subprocess.Popen as Installer uses."""

    def __init__(self, pid: int, stdin: IO[str], stdout: IO[str]) -> None:
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def _fork() -> _Forked:
    """The child as a fork of this process, rattler already loaded: no interpreter to start and no
    imports to repeat (about 150 ms of CPU on a machine where the parent's solve wants it too).
    Safe while this process is single-threaded: rattler starts its runtime's threads on its first
    async call, which each side then makes for itself."""
    import rattler  # noqa: F401 - loaded once, for both sides

    from envkit.prefix import condameta  # noqa: F401

    to_child, from_parent = os.pipe()
    to_parent, from_child = os.pipe()
    parent = os.getpid()
    for stream in (sys.stdout, sys.stderr):  # else the child's copy of a buffer is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid == 0:  # the child: it never returns from here
        code = 70
        try:
            gc.freeze()  # the cyclic collector leaves what the parent made alone (no finalizer of its runs here)
            _die_with_parent()
            for sig in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            if os.getppid() != parent:  # envkit died before the death signal was armed
                os._exit(code)
            # stdin from the parent, stdout and stderr to it; above 2 first, for an envkit started
            # with a standard fd closed (os.pipe may have returned it)
            job_in, said_out = (fcntl.fcntl(fd, fcntl.F_DUPFD, 3) for fd in (to_child, from_child))
            for fd in (from_parent, to_parent, to_child, from_child):  # the parent's ends too: held
                os.close(fd)  # here, their closing there would not end this child's stdin
            os.dup2(job_in, 0)
            os.dup2(said_out, 1)
            os.dup2(said_out, 2)
            os.close(job_in)
            os.close(said_out)
            # the parent's stream objects stay referenced: one that owns its fd (envkit.cli.main opens
            # /dev/null for a stream closed at start) would close it when dropped, and it is now a pipe
            inherited = (sys.stdin, sys.stdout, sys.stderr)  # noqa: F841
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - fds this process owns until _exit
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            code = _serve()
        except BaseException:  # told on the pipe, as a spawned child's traceback would be
            with contextlib.suppress(Exception):
                import traceback

                traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    os.close(to_child)
    os.close(from_child)
    return _Forked(pid, open(from_parent, "w", encoding="utf-8"), open(to_parent, encoding="utf-8"))


def _spawn() -> subprocess.Popen[str]:
    """The child as a new interpreter: where a fork is not safe (native threads already run, as in
    a rollback after a failed install) or not there."""
    import ctypes  # noqa: F401 - for _die_with_parent, which runs between fork and exec

    return subprocess.Popen(
        [sys.executable, "-m", "envkit.install.inplace"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
        preexec_fn=_die_with_parent,  # noqa: PLW1509 - a prctl and a signal disposition, no locks taken
    )


def _write_records(records: list[Any], path: Path) -> None:
    import rattler
    from rattler.lock import LockPlatform

    platform = LockPlatform(str(rattler.Subdir.current()))
    lock = rattler.LockFile([platform])
    for record in records:
        lock.add_conda_package(ENVIRONMENT, platform, record)
    lock.to_path(path)


_ENDING: list[_Forked] = []  # children that made their change, not yet reaped (Installer.close)


def _reap_ended() -> None:
    for child in list(_ENDING):
        try:
            ended = child.poll() is not None
        except ChildProcessError:  # reaped by another (SIGCHLD ignored): ended all the same
            ended = True
        if ended:
            _ENDING.remove(child)


class Installer:
    """One installer child, started before it is needed: its reading of the env's installed records
    (30-40 ms for a torch env) overlaps the parent's imports and solve. Forked where that is safe
    (rattler is loaded once, for both); else a new interpreter, whose start and imports (about
    150 ms) overlap them too. It takes one change, says when it is made, then exits; closed
    unused, it is killed (it has changed nothing: it only reads). Its stdout and stderr are one
    pipe: announcements are JSON lines, anything else is what it says of a failure."""

    def __init__(self, prefix: Path | None = None) -> None:
        """With `prefix`, the child also reads that env's installed records while it waits (see
        read: a caller that starts the child before it holds the env's lock asks later)."""
        _reap_ended()
        self.forked = hasattr(os, "fork") and sys.platform.startswith("linux") and _single_threaded()
        self._child: _Forked | subprocess.Popen[str] = _fork() if self.forked else _spawn()
        self._expected: set[str] = set()
        self._heard: dict[str, dict[str, Any]] = {}
        self._said: list[str] = []
        if prefix is not None:
            self.read(prefix)

    def read(self, prefix: Path, *, journal_draft: Path | None = None) -> None:
        """Have the waiting child read `prefix`'s installed records now (see installed); the
        caller holds the env's lock, so the read still holds when the change comes. With
        `journal_draft`, the child then copies the records into that sync journal's draft too
        (envkit.install.journal.copy_records; see records_copied)."""
        request = {"read": str(prefix)} | ({"journal_draft": str(journal_draft)} if journal_draft else {})
        try:
            if self._child.stdin:
                self._child.stdin.write(json.dumps(request) + "\n")
                self._child.stdin.flush()
        except OSError:  # the child is gone: installed() says so, and the change fails in one line
            return
        self._expected.add("installed")
        if journal_draft:
            self._expected.add("copied")

    def records_copied(self, prefix: Path) -> bool:
        """Whether the journal's draft holds `prefix`'s records as they are now: the child copied
        them all, and conda-meta is still as it was then (a tool that ignores envkit's lock, such
        as conda, may have changed it since). False: the journal copies them itself."""
        heard = self._hear("copied")
        return heard is not None and heard.get("state") == [list(entry) for entry in records_state(prefix)]

    def _listen(self, line: str) -> None:
        try:
            message = json.loads(line)
            self._heard[str(message["kind"])] = message
        except (ValueError, TypeError, KeyError):
            self._said.append(line)

    def _hear(self, kind: str) -> dict[str, Any] | None:
        """The child's announcement of `kind`, waited for; None when it will not come (not asked
        for, or the child is gone)."""
        while kind in self._expected and kind not in self._heard:
            line = self._child.stdout.readline() if self._child.stdout else ""
            if not line:
                self._expected.clear()  # the child is gone: nothing more will come
                break
            self._listen(line)
        return self._heard.get(kind)

    def _complete_read(self) -> dict[str, Any] | None:
        """The child's read of the installed records, when it could read every one."""
        heard = self._hear("installed")
        return heard if heard is not None and heard.get("complete") else None

    def installed(self) -> dict[str, str] | None:
        """name -> "version build" of every package record the env holds, as the child read them;
        None when it could not read them all (the caller reads conda-meta itself, to say which)."""
        read = self._complete_read()
        return None if read is None else {str(name): str(what) for name, what in read["packages"].items()}

    def installed_sha256(self) -> dict[str, str | None] | None:
        """name -> the sha256 (hex) of the archive each installed package came from, where its
        record has one; None when the child could not read every record."""
        read = self._complete_read()
        return None if read is None else {str(name): None if sha is None else str(sha) for name, sha in read["sha256"].items()}

    def __enter__(self) -> Installer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stopped for certain: killed unless it has made its change, and reaped, but for a forked
        child that has made it. That one is past its last write and on its way out, and its exit
        unmaps its copy of envkit's memory (4-8 ms in a sync of a torch env): nothing waits for
        it, not even the env's lock; the next Installer reaps it, or init once envkit has ended."""
        if self._child.poll() is None:
            if "done" in self._heard and isinstance(self._child, _Forked):
                if self._child not in _ENDING:  # closed twice (the CLI's with, and sync's)
                    _ENDING.append(self._child)
            else:
                if "done" not in self._heard:
                    self._child.kill()
                self._child.wait()
        for pipe in (self._child.stdin, self._child.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()

    def _finish(self, job: str) -> int:
        """Send the job, take everything the child says until it says the change is made (0) or
        exits (its exit code)."""
        with contextlib.suppress(OSError):  # a child gone already: its exit code tells
            if self._child.stdin:
                self._child.stdin.write(job + "\n")
                self._child.stdin.close()
        for line in self._child.stdout or ():
            self._listen(line)
            if "done" in self._heard:
                return 0
        return self._child.wait()

    def change(self, records: list[Any], prefix: Path, cache: Path, specs: list[str], relink: tuple[str, ...] = ()) -> None:
        """Make `prefix` hold exactly `records` (rattler unlinks, links and leaves alone as needed;
        `relink`: installed packages to link again all the same)."""
        scratch = scratch_dir(SCRATCH_PREFIX)
        try:
            plan = scratch / "records.lock"
            _write_records(records, plan)
            job = json.dumps({"plan": str(plan), "prefix": str(prefix), "cache": str(cache), "specs": specs, "relink": list(relink)})
            try:
                code = self._finish(job)
            except BaseException:  # Ctrl-C while it installs: stopped for certain before the rollback
                self.close()
                raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if code != 0:
            lines = [line.rstrip("\n") for line in self._said if line.strip()]
            said = [line.removeprefix("envkit: error: ") for line in lines if line.startswith("envkit: error: ")]
            hints = [line.removeprefix("envkit: hint: ") for line in lines if line.startswith("envkit: hint: ")]
            message = said[-1] if said else lines[-1] if lines else f"changing {prefix} failed (exit {code})"
            kind = FilesystemError if code == ExitCode.FILESYSTEM else InstallError
            raise kind(message, hint=hints[-1] if hints else None)


def change_env(records: list[Any], prefix: Path, cache: Path, specs: list[str]) -> None:
    """One change with a child started for it (a rollback: nothing to overlap)."""
    with Installer() as installer:
        installer.change(records, prefix, cache, specs)


def _read_installed(prefix: Path) -> tuple[RecordsState, list[Any]]:
    import rattler

    state = records_state(prefix)  # before reading: a change during the read shows as a mismatch
    installed = []
    for path in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            installed.append(rattler.PrefixRecord.from_path(path))
        except Exception:  # noqa: S112 - a record a killed install left half-written: not installed
            continue
    return state, installed


def _installed_now(prefix: Path, early: tuple[Path, RecordsState, list[Any]] | None) -> list[Any]:
    """The early read while conda-meta is as it was then, else a fresh one."""
    if early is not None and early[0] == prefix and early[1] == records_state(prefix):
        return early[2]
    return _read_installed(prefix)[1]


def _child(
    plan: Path,
    prefix: Path,
    cache: Path,
    specs: list[str],
    early: tuple[Path, RecordsState, list[Any]] | None = None,
    *,
    relink: tuple[str, ...] = (),
    http: Any | None = None,
) -> int:
    """`early`: the installed records read while waiting, used when the env has not changed since;
    `http`: the client made while waiting."""
    import rattler

    from envkit.core.errors import EnvkitError
    from envkit.prefix import condameta
    from envkit.solve import backend

    lock = rattler.LockFile.from_path(plan)
    env = lock.environment(ENVIRONMENT)
    records = [r for recs in (env.conda_repodata_records().values() if env else []) for r in recs]
    before = set(records_state(prefix))
    try:
        backend.reinstall(records, prefix, cache, installed=_installed_now(prefix, early), specs=specs, relink=relink, http=http)
    except EnvkitError as exc:  # its kind travels as the exit code (see Installer.change)
        print(f"envkit: error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"envkit: hint: {exc.hint}", file=sys.stderr)
        return int(exc.exit_code)
    # only the records this change wrote (new or rewritten: name, mtime, size or inode moved)
    condameta.as_conda_writes(prefix, {entry[0] for entry in set(records_state(prefix)) - before}, condameta.archives_of(records))
    return 0


def _announce(kind: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"kind": kind, **fields}) + "\n")
    sys.stdout.flush()


def _serve() -> int:
    """Load what an install needs, then wait for the job (none: the parent closed it unused); a
    request to read an env's installed records (and copy them for a journal) may come first. Once
    the change is made (every file linked, every record written), it says so before it exits: a
    forked child's exit unmaps a copy of the parent's memory, ms the parent need not wait for (see
    Installer.close)."""
    import rattler  # noqa: F401 - loaded now, while the parent solves

    from envkit.prefix import condameta  # noqa: F401
    from envkit.solve import backend

    early = None
    line = sys.stdin.readline()
    if line.strip() and "read" in (request := json.loads(line)):
        prefix = Path(request["read"])
        state, installed = _read_installed(prefix)
        early = (prefix, state, installed)
        packages = {r.name.normalized: f"{r.version} {r.build}" for r in installed}
        sha256 = {r.name.normalized: None if r.sha256 is None else bytes(r.sha256).hex() for r in installed}
        # complete: every *.json was a record rattler could read (else the parent says which is not)
        _announce("installed", packages=packages, sha256=sha256, complete=len(installed) == len(state) == len(packages))
    if early is not None and request.get("journal_draft"):  # first: the parent needs it before the job
        from envkit.install.journal import copy_records

        try:
            copied = copy_records(early[0], Path(request["journal_draft"]))
        except OSError:  # a full disk: the parent's own copy says so, in its words
            copied = None
        _announce("copied", state=copied)
    http = backend.client()  # while the parent solves: not on the way from the job to the install
    if early is not None:
        line = sys.stdin.readline()
    if not line.strip():
        return 0
    job = json.loads(line)
    code = _child(
        Path(job["plan"]),
        Path(job["prefix"]),
        Path(job["cache"]),
        list(job["specs"]),
        early,
        relink=tuple(job.get("relink", ())),
        http=http,
    )
    if code == 0:
        _announce("done")
    return code


if __name__ == "__main__":
    from envkit.core import ownprocess

    ownprocess.claim()
    code = _serve()
    sys.stderr.flush()
    os._exit(code)  # past rattler's runtime teardown (see envkit.cli.main.hard_exit)
