"""Output for a person when there is no terminal: rich's markup, written without loading rich.

Off a terminal rich draws nothing: it writes the text with its markup tags removed, and a
borderless table as padded columns. Loading it costs 35 to 85 ms here and laying out a 20-row table
another 15, more than a lock's three solves, so a command run by CI or a script (stdout a pipe or
a file) writes through `PlainConsole`, which does just that; anything it cannot lay out exactly as
rich would (a tree, a table too wide, text with tabs) goes to a real rich console, made the first
time one is needed. The renderers write the same markup to either, and tests/test_plaintext.py
checks that both give the same bytes.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

# a markup tag as rich reads one, with the backslashes before it: [bold], [/], [@click], [#ff0000]
_TAG = re.compile(r"(\\*)\[([a-z#/@][^[]*?)]")
# what rich's Text drops from anything it holds: bell, backspace, vertical tab, form feed, CR
_DROPPED = dict.fromkeys((7, 8, 11, 12, 13))
_PRINTABLE = re.compile(r"[ -~]*")


class Out(Protocol):
    """What the renderers need of a console: rich's Console and PlainConsole both have it."""

    @property
    def file(self) -> IO[str]: ...

    def print(self, *objects: Any, soft_wrap: bool | None = None) -> None: ...


def console_options() -> dict[str, Any]:
    """What every envkit console is, rich's or the plain one: no highlighting, no emoji codes, long
    lines left whole."""
    return {"highlight": False, "soft_wrap": True, "emoji": False}


def escape(text: str) -> str:
    """Text made safe to put in markup, exactly as rich.markup.escape makes it: a backslash before
    each `[` that would open a tag (and the backslashes already before it doubled)."""
    text = _TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\[{m.group(2)}]", text)
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


def strip_markup(markup: str) -> str:
    """What rich writes for `markup` off a terminal, tabs aside: tags gone, escaped tags kept as
    text, every backslash-bracket outside a tag read as a bracket (rich's own reading, even where
    no tag follows), and the control characters its Text refuses dropped."""
    if "[" not in markup:
        return markup.translate(_DROPPED)
    out: list[str] = []
    position = 0
    for match in _TAG.finditer(markup):
        backslashes, tag = match.groups()
        pairs, escaped = divmod(len(backslashes), 2)
        out += [markup[position : match.start()].replace("\\[", "["), "\\" * pairs, f"[{tag}]" if escaped else ""]
        position = match.end()
    out.append(markup[position:].replace("\\[", "["))
    return "".join(out).translate(_DROPPED)


def draws_nothing(stream: IO[str], environ: Mapping[str, str] = os.environ) -> bool:
    """Whether rich would write plain text to `stream`, decided as rich decides it (Console.is_terminal):
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


def rich_width(environ: Mapping[str, str] = os.environ) -> int | None:
    """The width rich gives a console that is no terminal (Console.size): the first of stdin,
    stdout and stderr that is a terminal, COLUMNS over that, 80 without either; None on Windows,
    where rich also weighs the console's features (tables are then left to rich)."""
    if os.name == "nt":
        return None
    width = 0
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    columns = environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    return width or 80


class TextTable:
    """A borderless table, built as rich's is (`add_row`) and drawn as rich draws it. On a
    terminal rich draws it (`__rich__`); off one PlainConsole lays it out itself where rich's layout
    is the plain one (every column as wide as its widest cell, two spaces apart, all within the
    width) and hands it to rich otherwise."""

    def __init__(self, *headers: str) -> None:
        self.headers = headers
        self.rows: list[tuple[tuple[str, ...], str | None]] = []

    def add_row(self, *cells: str, style: str | None = None) -> None:
        self.rows.append((cells, style))

    def __rich__(self) -> RichTable:
        from rich.table import Table

        table = Table(box=None, pad_edge=False)
        for header in self.headers:
            table.add_column(header, overflow="fold")  # a path too long for its column folds; "…" would lose its end
        for cells, style in self.rows:
            table.add_row(*cells, style=style)
        return table

    def plain_lines(self, width: int) -> list[str] | None:
        """The lines rich would write off a terminal `width` columns wide, or None where its layout
        is not the plain one: a table too wide (rich wraps or shrinks columns), a cell with more than
        printable ASCII (wide characters, line breaks, tabs, escape codes), more cells than columns."""
        columns = len(self.headers)
        grid = [[strip_markup(h) for h in self.headers]]
        for cells, _ in self.rows:
            if len(cells) > columns:
                return None
            grid.append([strip_markup(c) for c in cells] + [""] * (columns - len(cells)))
        if not all(_PRINTABLE.fullmatch(text) for row in grid for text in row):
            return None
        widths = [max(len(row[i]) for row in grid) for i in range(columns)]
        if sum(widths) + 2 * (columns - 1) > width or not all(widths):
            return None
        return ["  ".join(text.ljust(w) for text, w in zip(row, widths, strict=True)) for row in grid]


class PlainConsole:
    """A console for a pipe or a file: text and plain tables written as rich would write them
    there, anything else (a tree, a table too wide, text with tabs to expand) drawn by a rich
    console made on first use."""

    def __init__(self, file: IO[str], environ: Mapping[str, str] = os.environ) -> None:
        self.file = file
        self.environ = environ

    def print(self, *objects: Any, soft_wrap: bool | None = None) -> None:
        """`soft_wrap=False`: wrap at the width, as a tree must (with soft wrapping rich crops each
        of its lines at the width instead)."""
        if all(isinstance(o, str) and "\t" not in o for o in objects):
            self._people.write(" ".join(strip_markup(o) for o in objects) + "\n")
            return
        if len(objects) == 1 and isinstance(objects[0], TextTable):
            width = rich_width(self.environ)
            lines = objects[0].plain_lines(width) if width is not None else None
            if lines is not None:
                self._people.write("".join(f"{line}\n" for line in lines))
                return
        self._rich.print(*objects, soft_wrap=soft_wrap)

    @functools.cached_property
    def _people(self) -> IO[str]:
        """What print() writes through; `file` itself stays exact, for data (an export, a script)."""
        return for_people(self.file)

    @functools.cached_property
    def _rich(self) -> Console:
        from rich.console import Console

        return Console(file=self._people, _environ=self.environ, **console_options())


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


def console(stderr: bool = False) -> Out:
    """The console for output to a person on stdout (or stderr): plain where rich would draw nothing."""
    stream = sys.stderr if stderr else sys.stdout
    if draws_nothing(stream):
        return PlainConsole(stream)
    from rich.console import Console

    return Console(file=for_people(stream), **console_options())
