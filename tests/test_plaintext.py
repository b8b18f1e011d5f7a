"""envkit.plaintext against rich itself: the same escapes, the same bytes off a terminal, the same
decision about what is a terminal; and the CLI off a terminal never loading rich."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
import rich.markup
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.errors import MarkupError
from rich.table import Table

from envkit.plaintext import PlainConsole, console_options, draws_nothing, escape, strip_markup
from envkit.render import STATUS_STYLE
from tests.test_lock import team_recipe, two_platform_channel

# text as envkit puts it in markup: names, paths, evidence, with what markup and terminals treat specially
TEXT = st.text(alphabet=st.sampled_from([*"ab /=-.é", "[", "]", "\\", "@", "#", "\t", "\r", "\x07", "\x0c", "\x1b", "\n"]), max_size=30)
STYLES = sorted({*STATUS_STYLE.values(), "bold", "dim", "cyan", "green", "red", "yellow"})


def riches(*objects: object) -> str:
    """What rich's console, set up as envkit's, writes off a terminal."""
    out = io.StringIO()
    Console(file=out, **console_options()).print(*objects)
    return out.getvalue()


def plain(*objects: object) -> str:
    out = io.StringIO()
    PlainConsole(out).print(*objects)
    return out.getvalue()


@st.composite
def markup(draw: st.DrawFn) -> str:
    """Well-formed markup as envkit's renderers write it: escaped text inside (nested) style tags,
    closed by name or by [/]. Text that follows text is escaped as one piece (two escaped pieces
    side by side can make a tag: "a[" and "b]")."""
    pieces: list[str] = []
    open_tags: list[str] = []
    text = ""
    for _ in range(draw(st.integers(0, 8))):
        move = draw(st.sampled_from(["text", "open", "close"]))
        if move == "text" or (move == "close" and not open_tags):
            text += draw(TEXT)
            continue
        pieces.append(escape(text))
        text = ""
        if move == "open":
            open_tags.append(draw(st.sampled_from(STYLES)))
            pieces.append(f"[{open_tags[-1]}]")
        else:
            style = open_tags.pop()
            pieces.append(draw(st.sampled_from([f"[/{style}]", "[/]"])))
    return "".join([*pieces, escape(text)]) + "".join(f"[/{style}]" for style in reversed(open_tags))


@given(TEXT)
def test_escape_is_the_same_as_riches(text: str) -> None:
    assert escape(text) == rich.markup.escape(text)


@given(st.lists(markup(), min_size=1, max_size=3))
def test_plain_console_writes_what_rich_writes_off_a_terminal(objects: list[str]) -> None:
    try:
        expected = riches(*objects)
    except MarkupError:  # rich's escape leaves three backslashes before a tag escaping it; rich then fails
        return
    assert plain(*objects) == expected


@given(st.text(alphabet=st.sampled_from([*"ab/@#=", "[", "]", "\\", "\r", "\t"]), max_size=30))
def test_any_text_rich_accepts_comes_out_the_same(text: str) -> None:
    """Not only envkit's own markup: any string rich can read (an unbalanced tag is an error there)."""
    try:
        expected = riches(text)
    except MarkupError:
        return
    assert plain(text) == expected


def test_known_lines_and_what_needs_rich() -> None:
    evidence = "[x] \\ y"
    assert strip_markup(f"[bold red]error[/] EK001 {escape(evidence)}") == "error EK001 [x] \\ y"
    table = Table("name", "version", box=None, pad_edge=False)
    table.add_row("numpy", "2.1")
    assert plain(table) == riches(table) != ""
    assert plain("a\tb") == riches("a\tb") == "a       b\n"


def _pty_stream() -> io.TextIOWrapper:
    master, slave = pty.openpty()
    os.close(master)
    return open(slave, "w", encoding="utf-8")


@pytest.mark.parametrize("on_pty", [False, True])
@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"FORCE_COLOR": "1"},
        {"FORCE_COLOR": ""},
        {"FORCE_COLOR": "0"},
        {"TTY_COMPATIBLE": "1"},
        {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"},
    ],
)
def test_draws_nothing_exactly_where_rich_sees_no_terminal(on_pty: bool, environ: dict[str, str], tmp_path: Path) -> None:
    stream = _pty_stream() if on_pty else open(tmp_path / "out.txt", "w", encoding="utf-8")  # noqa: SIM115
    with stream:
        assert draws_nothing(stream, environ) == (not Console(file=stream, _environ=environ).is_terminal)


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_lock_off_a_terminal_loads_no_rich_and_says_what_rich_would(tmp_path: Path) -> None:
    recipe = team_recipe(tmp_path / "recipes", two_platform_channel(tmp_path))
    cmd = [sys.executable, "-X", "importtime", "-m", "envkit", "lock", str(recipe)]
    off = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert off.returncode == 0, off.stderr
    assert "wrote " in off.stdout and "\x1b" not in off.stdout
    assert not re.search(r"\|\s+rich(\.|$)", off.stderr, re.MULTILINE)

    forced = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"FORCE_COLOR": "1"}
    drawn = subprocess.run(cmd, capture_output=True, text=True, check=False, env=forced)
    assert drawn.returncode == 0, drawn.stderr
    assert re.search(r"\|\s+rich\.console$", drawn.stderr, re.MULTILINE)  # rich drew it
    assert "\x1b[1m" in drawn.stdout and ANSI.sub("", drawn.stdout) == off.stdout
