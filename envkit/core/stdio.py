"""envkit's own standard streams: what a command's output does when stdout refuses it, and what
envkit does with a standard stream that was closed when it started. Set up by envkit.cli.main.run,
the one entry point that owns the process."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator

from envkit.core.errors import OutputError, one_line


def open_closed_streams() -> None:
    """A standard stream that was closed when envkit started (`envkit sync >&-`, a daemon's `0<&-`)
    is opened on /dev/null. Python leaves it None, which the first print would trip on, and its fd
    free for the next file envkit opens (a lock, a record), where a child's output would land."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):  # fd 0, 1, 2, in that order
        if getattr(sys, name) is not None:
            continue
        try:
            opened = os.open(os.devnull, os.O_RDWR)  # the lowest free fd: this one, the lower ones being open
        except OSError:
            continue
        setattr(sys, name, open(opened, mode, encoding="utf-8", errors="backslashreplace"))  # noqa: SIM115 - the process's own


class CheckedStdout(io.TextIOWrapper):
    """stdout whose refusals are envkit's to report (a closed pipe stays a BrokenPipeError: the
    reader left, as `| head` does), so that `envkit audit --json > report.json` on a full disk is
    an error, not exit 0 and a truncated report. Written text is buffered: most refusals come at
    the flush that ends the process (envkit.cli.main.hard_exit)."""

    refused: OutputError | None = None
    told = False
    plain: io.TextIOWrapper | None = None  # the stream it stands in for: dropped, it would close the buffer they share

    def _refusal(self, exc: OSError) -> OutputError:
        if self.refused is None:
            self.refused = OutputError(
                f"cannot write envkit's output to stdout: {exc.strerror or exc}",
                hint="make room where stdout goes, or send it elsewhere",
            )
        return self.refused

    @contextlib.contextmanager
    def _refusals(self) -> Iterator[None]:
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._refusal(exc) from None

    def write(self, text: str) -> int:
        with self._refusals():
            try:
                return super().write(text)
            except UnicodeEncodeError as exc:  # PYTHONIOENCODING=ascii, a Latin-1 terminal: never a lossy export
                self.refused = self.refused or OutputError(
                    f"stdout's encoding ({self.encoding}) cannot write {exc.object[exc.start : exc.end]!r}",
                    hint="set PYTHONIOENCODING=utf-8, or use a UTF-8 locale",
                )
                raise self.refused from None

    def flush(self) -> None:
        with self._refusals():
            super().flush()


def check_stdout() -> None:
    """Before anything is written (see CheckedStdout)."""
    if type(sys.stdout) is io.TextIOWrapper:
        plain = sys.stdout
        checked = CheckedStdout(
            plain.buffer,
            encoding=plain.encoding,
            errors=plain.errors,
            line_buffering=plain.line_buffering,
            write_through=plain.write_through,
        )
        checked.plain = plain
        sys.stdout = checked


def tell_refusal(refused: OutputError) -> None:
    """Once: the refusal may surface at a write and again at the final flush."""
    if isinstance(sys.stdout, CheckedStdout):
        if sys.stdout.told:
            return
        sys.stdout.told = True
    with contextlib.suppress(OSError, ValueError):
        for line in refused.lines():
            sys.stderr.write(f"envkit: error: {one_line(line)}\n")
