"""Text and plain tables off a terminal written without importing rich.

Why this exists: off a terminal rich writes the markup's text and lays a borderless table out as
padded columns; importing it to do that costs about 20 ms: with ENVKIT_PLAIN_OUTPUT=0 `envkit
create --locked` of a two-package lock, as CI runs it, takes 1.12x as long (bench/ab.py --switch
ENVKIT_PLAIN_OUTPUT=0 --what create --small, 12 rounds, faster in 10 of them). PlainConsole writes exactly
what rich writes there (tests/ui/test_console.py compares the two byte for byte) and hands anything
else (a tree, text with tabs, a table with wide characters) to rich. Nothing is wrapped, as rich
unwrapped writes it. ENVKIT_PLAIN_OUTPUT=0 turns it off: every console is rich's.
"""

from __future__ import annotations

import functools
import os
import re
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

# a markup tag as rich reads one, with the backslashes before it: [bold], [/], [@click], [#ff0000]
_TAG = re.compile(r"(\\*)\[([a-z#/@][^[]*?)]")
# what rich's Text drops from anything it holds: bell, backspace, vertical tab, form feed, CR
_DROPPED = dict.fromkeys((7, 8, 11, 12, 13))
_PRINTABLE = re.compile(r"[ -~]*")


def enabled() -> bool:
    return os.environ.get("ENVKIT_PLAIN_OUTPUT", "1") != "0"


def markup_escape(text: str) -> str:
    """rich.markup.escape without importing rich: a backslash before each `[` that would open a tag
    (and the backslashes already before it doubled)."""
    text = _TAG.sub(lambda m: f"{m.group(1)}{m.group(1)}\\[{m.group(2)}]", text)
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


def strip_markup(markup: str) -> str:
    """What rich writes for `markup` off a terminal, tabs aside: tags gone, escaped tags kept as
    text, every backslash-bracket outside a tag read as a bracket, and the control characters its
    Text refuses dropped."""
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


def table_lines(headers: tuple[str, ...], rows: list[tuple[tuple[str, ...], str | None]]) -> list[str] | None:
    """The lines rich writes for a borderless table off a terminal at an unbounded width: every
    column as wide as its widest cell, two spaces apart; None where a cell holds more than printable
    ASCII (wide characters, line breaks, escape codes), which rich measures its own way."""
    columns = len(headers)
    grid = [[strip_markup(h) for h in headers]]
    for cells, _ in rows:
        if len(cells) > columns:
            return None
        grid.append([strip_markup(c) for c in cells] + [""] * (columns - len(cells)))
    if not all(_PRINTABLE.fullmatch(text) for row in grid for text in row):
        return None
    widths = [max(len(row[i]) for row in grid) for i in range(columns)]
    if not all(widths):
        return None
    return ["  ".join(text.ljust(w) for text, w in zip(row, widths, strict=True)) for row in grid]


class PlainConsole:
    """A console for a pipe or a file; see the module's docstring."""

    def __init__(self, file: IO[str], make_rich: Any) -> None:
        self.file = file
        self._make_rich = make_rich

    def print(self, *objects: Any, soft_wrap: bool | None = None) -> None:
        from envkit.ui.console import TextTable

        if all(isinstance(o, str) and "\t" not in o for o in objects):
            self.file.write(" ".join(strip_markup(o) for o in objects) + "\n")
            return
        if len(objects) == 1 and isinstance(objects[0], TextTable):
            lines = table_lines(objects[0].headers, objects[0].rows)
            if lines is not None:
                self.file.write("".join(f"{line}\n" for line in lines))
                return
        self._rich.print(*objects, soft_wrap=soft_wrap)

    @functools.cached_property
    def _rich(self) -> Console:
        console: Console = self._make_rich()
        return console
