"""One error root, caught once in the CLI; each subclass carries its documented exit code."""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    USAGE = 2
    SOLVE = 3
    INSTALL = 4
    INTERNAL = 70  # a bug in envkit (sysexits' EX_SOFTWARE): the traceback is printed
    FILESYSTEM = 74  # the filesystem refused a write: full, over quota, read-only (sysexits' EX_IOERR)
    NOT_EXECUTABLE = 126  # envkit run: as shells and conda run report it
    NOT_FOUND = 127  # envkit run: as shells and conda run report it
    INTERRUPTED = 130
    OUTPUT_CLOSED = 141  # the reader of envkit's output went away (`| head`): 128 + SIGPIPE, as shells report it


# what each exit code means, for `envkit --help` and docs/reference/exit-codes.md
EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success; the audit found nothing at the --fail-on severity (error by default)",
    ExitCode.FINDINGS: "audit findings at the --fail-on severity (for create, sync and lock: in the plan, so nothing was written), "
    "a probe that failed, or recipes check found a problem",
    ExitCode.USAGE: "usage or invalid input: a bad flag, an invalid recipe, lock or config file, an unknown env or rule, "
    "a prefix that is not a conda env, an env that is locked, frozen or in the way; one line says what and how to fix it",
    ExitCode.SOLVE: "the solve failed: unsatisfiable specs or an unreachable channel",
    ExitCode.INSTALL: "the install failed (a corrupt archive, a link error); nothing is left behind",
    ExitCode.INTERNAL: "a bug in envkit: the traceback is printed",
    ExitCode.FILESYSTEM: "the filesystem refused a write: no space, a used-up quota, a read-only filesystem; nothing is half-written",
    ExitCode.NOT_EXECUTABLE: "envkit run: the command is not executable",
    ExitCode.NOT_FOUND: "envkit run: no such command",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C, SIGTERM, SIGHUP); nothing is left behind",
    ExitCode.OUTPUT_CLOSED: "the reader of envkit's output went away (`envkit audit --list-rules | head -1`)",
}


class EnvkitError(Exception):
    """A user-facing failure: the message says what went wrong, where, and how to fix it."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def lines(self) -> list[str]:
        """For people: the message's lines, the hint on the last one."""
        lines = self.message.splitlines() or [self.message]
        if self.hint:
            lines[-1] += f" ({self.hint})"
        return lines

    def plain_lines(self) -> list[str]:
        """For JSON: the message alone; the hint has its own field."""
        return self.message.splitlines() or [self.message]


class UsageError(EnvkitError):
    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class Location:
    """Where a value came from, so every complaint can point at a file:line:col."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a recipe, at the line and key where it is."""

    location: Location | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        field = f"{self.path}: " if self.path else ""
        return one_line(f"{where}{field}{self.message}")


def one_line(text: str) -> str:
    """Problems quote user text; control characters in it must not split the line."""
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text)


class RecipeError(EnvkitError):
    """One or more problems in recipe files; each problem is one line."""

    exit_code = ExitCode.USAGE

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]

    def plain_lines(self) -> list[str]:
        return self.lines()


class SourceError(EnvkitError):
    exit_code = ExitCode.USAGE


class SolveError(EnvkitError):
    exit_code = ExitCode.SOLVE

    def __init__(self, message: str, *, hint: str | None = None, platform: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.platform = platform  # the one that failed, when several platforms were solved together


class ChannelError(SolveError):
    """The solver could not read a channel (unreachable, not a channel): distinct from unsatisfiable."""


class InstallError(EnvkitError):
    exit_code = ExitCode.INSTALL


class FilesystemError(EnvkitError):
    """A write the filesystem refused for want of room or of write access to the whole filesystem:
    nothing in envkit is wrong, and nothing was left half-written (writes are atomic)."""

    exit_code = ExitCode.FILESYSTEM


# errno -> what the filesystem said, and what to do
_REFUSALS = {
    errno.ENOSPC: ("no space left on the device", "free space there (df -h), or work elsewhere (-p PATH, -o FILE)"),
    errno.EDQUOT: ("the disk quota is used up", "free some of your files there, or work elsewhere (-p PATH, -o FILE)"),
    errno.EROFS: ("the filesystem is read-only", "work elsewhere (-p PATH, -o FILE)"),
}


def os_errno(text: str) -> int | None:
    """The errno that ends a Rust I/O error's text, as rattler words them ("No space left on device
    (os error 28)"): its exceptions are no OSError, so the text is all there is to go by."""
    found = re.search(r"\(os error (\d+)\)", text)
    return int(found.group(1)) if found else None


def filesystem_refusal(code: int) -> tuple[str, str] | None:
    """(what the filesystem said, what to do) for an errno that is a refusal of this kind."""
    return _REFUSALS.get(code)


def filesystem_error(exc: OSError, outcome: str = "") -> FilesystemError | None:
    """One line for a write the filesystem refused (None for other OSErrors: they are not this);
    `outcome` says what became of the work, e.g. "PREFIX was not changed"."""
    said = _REFUSALS.get(exc.errno or 0)
    if said is None:
        return None
    where = exc.filename2 or exc.filename  # a copy's destination, else the file written
    message = f"{said[0]}: cannot write {where}" if where else said[0]
    return FilesystemError(message + (f"; {outcome}" if outcome else ""), hint=said[1])


def in_the_way(exc: OSError, outcome: str = "") -> UsageError | None:
    """One line for a write stopped by something already at its path or on the way to it: a file
    where envkit makes a folder (an `activate.d` that is a file), a folder where it writes a file.
    The env is not as envkit left it, and only its owner knows what that thing is: envkit moves
    nothing aside itself. None for other OSErrors."""
    where = exc.filename2 or exc.filename
    if not isinstance(where, str) or exc.errno not in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        return None
    if exc.errno == errno.EISDIR:
        said = f"{where} is a folder where envkit writes a file"
    else:  # ENOTDIR names the file written; EEXIST the folder mkdir found a file at
        blocker = where if exc.errno == errno.EEXIST else next((p for p in _ancestors(where) if os.path.lexists(p)), "")
        if not blocker or os.path.isdir(blocker) or not os.path.lexists(blocker):
            return None
        said = f"{blocker} is a file where envkit needs a folder" + (f" (on the way to {where})" if blocker != where else "")
    return UsageError(said + (f"; {outcome}" if outcome else ""), hint="move it aside, then run the command again")


def os_refusal(exc: OSError, outcome: str = "") -> EnvkitError | None:
    """One line for an OSError that is the filesystem's or the env's doing, not envkit's: a full
    disk, a quota, a read-only filesystem (exit 74), or something in the way (exit 2); None for
    the rest, which are bugs."""
    return filesystem_error(exc, outcome) or in_the_way(exc, outcome)


def _ancestors(path: str) -> list[str]:
    out = []
    while (parent := os.path.dirname(path)) != path:
        out.append(parent)
        path = parent
    return out


class OutputError(EnvkitError):
    """envkit's own output could not be written to stdout (a full disk under `> report.json`, an fd
    open only for reading): the command's result did not reach its reader."""

    exit_code = ExitCode.FILESYSTEM


class Interrupted(EnvkitError):
    exit_code = ExitCode.INTERRUPTED


class ProbeError(EnvkitError):
    """The probe could not run at all (as opposed to running and reporting failures)."""

    exit_code = ExitCode.FINDINGS


class CommandNotFound(EnvkitError):
    exit_code = ExitCode.NOT_FOUND


class CommandNotExecutable(EnvkitError):
    exit_code = ExitCode.NOT_EXECUTABLE
