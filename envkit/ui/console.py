"""The console envkit writes to a person through: rich's, which draws on a terminal and writes
plain text off one. Off a terminal nothing is wrapped, whatever COLUMNS says: a line is as long as
its text, so paths, URLs and file names stay whole for grep and copy-paste in CI logs."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

UNWRAPPED = 1_000_000  # the width a console that is no terminal lays out at: wider than any line it writes
# C0 controls but tab and newline, DEL, and C1 controls: shown as Python writes them
_SHOWN_CONTROLS = {code: repr(chr(code))[1:-1] for code in (*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}


class Out(Protocol):
    """What the renderers need of a console (rich's Console has it)."""

    @property
    def file(self) -> IO[str]: ...

    def print(self, *objects: Any, soft_wrap: bool | None = None) -> None: ...


def console_options() -> dict[str, Any]:
    """What every envkit console is: no highlighting, no emoji codes, long lines left whole."""
    return {"highlight": False, "soft_wrap": True, "emoji": False}


def visible(text: str) -> str:
    """`text` with every control character but newline and tab shown as Python writes it (ESC as
    \\x1b), never sent: text from a recipe must not clear a reviewer's screen or hide text."""
    return text.translate(_SHOWN_CONTROLS)


def escape(text: str) -> str:
    """Text from a file or a user made safe to put in markup: its control characters shown
    (visible) and every `[` that would open a tag escaped, as rich.markup.escape does."""
    from envkit.ui.plainout import markup_escape

    return markup_escape(visible(text))


class TextTable:
    """A borderless table, built row by row and drawn by rich; off a terminal no column is wider
    than its widest cell, and no cell is folded."""

    def __init__(self, *headers: str) -> None:
        self.headers = headers
        self.rows: list[tuple[tuple[str, ...], str | None]] = []

    def add_row(self, *cells: str, style: str | None = None) -> None:
        self.rows.append((cells, style))

    def __rich__(self) -> RichTable:
        from rich.table import Table

        table = Table(box=None, pad_edge=False)
        for header in self.headers:
            table.add_column(header, overflow="fold")  # on a terminal a path too long for its column folds; "…" would lose its end
        for cells, style in self.rows:
            table.add_row(*cells, style=style)
        return table


def draws_nothing(stream: IO[str], environ: Mapping[str, str] = os.environ) -> bool:
    """Whether rich writes plain text to `stream`, decided as rich decides it (Console.is_terminal):
    TTY_COMPATIBLE=0 or 1 says so outright, a set FORCE_COLOR forces a terminal unless empty
    (https://force-color.org/), and otherwise it is a terminal or not."""
    tty_compatible = environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "0"
    if environ.get("FORCE_COLOR") is not None:
        return environ["FORCE_COLOR"] == ""
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream: rich calls both no terminal
        return True


class Lenient:
    """A stream for text meant for a person: what its encoding cannot write (an env named café on
    a stdout set to ASCII) is written as a backslash escape. Data written to stdout (an export, a
    script, JSON) goes to the stream itself, where such a character is an error, never a lossy copy."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        encoding = getattr(self.stream, "encoding", None) or "utf-8"
        return self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, flush, encoding: the stream's own
        return getattr(self.stream, name)


def for_people(stream: IO[str]) -> IO[str]:
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower().replace("-", "").replace("_", "")
    return stream if encoding == "utf8" else Lenient(stream)  # type: ignore[return-value]


def data_stream(out: Out) -> IO[str]:
    """Where a renderer writes data (an export, a script) on a console: the stream itself, where a
    character its encoding cannot write is an error, never the lenient copy text for people gets."""
    stream = out.file
    return stream.stream if isinstance(stream, Lenient) else stream


def console(stderr: bool = False) -> Out:
    """The console for output to a person on stdout (or stderr): rich's, unwrapped off a terminal,
    where text and plain tables go through envkit.ui.plainout without importing rich."""
    stream = sys.stderr if stderr else sys.stdout
    if not draws_nothing(stream):
        return rich_console(stream, None)
    from envkit.ui import plainout

    if not plainout.enabled():
        return rich_console(stream, UNWRAPPED)
    return plainout.PlainConsole(for_people(stream), lambda: rich_console(stream, UNWRAPPED))


def rich_console(stream: IO[str], width: int | None) -> Console:
    """rich's console on `stream`. A reader that goes away (`| head`) ends envkit as a closed pipe
    does (exit 141), not through rich's own exit with 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(file=for_people(stream), width=width, **console_options())
