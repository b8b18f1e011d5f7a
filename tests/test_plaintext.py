"""envkit.plaintext against rich itself: the same escapes, the same bytes off a terminal, the same
decision about what is a terminal; and the CLI off a terminal never loading rich."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
import rich.markup
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.errors import MarkupError
from rich.table import Table

from envkit.plaintext import PlainConsole, TextTable, console_options, draws_nothing, escape, rich_width, strip_markup
from envkit.render import STATUS_STYLE
from tests.test_lock import team_recipe, two_platform_channel

# text as envkit puts it in markup: names, paths, evidence, with what markup and terminals treat specially
TEXT = st.text(alphabet=st.sampled_from([*"ab /=-.é", "[", "]", "\\", "@", "#", "\t", "\r", "\x07", "\x0c", "\x1b", "\n"]), max_size=30)
STYLES = sorted({*STATUS_STYLE.values(), "bold", "dim", "cyan", "green", "red", "yellow"})


def riches(*objects: object, environ: dict[str, str] | None = None) -> str:
    """What rich's console, set up as envkit's, writes off a terminal."""
    out = io.StringIO()
    Console(file=out, _environ=environ, **console_options()).print(*objects)
    return out.getvalue()


def plain(*objects: object, environ: dict[str, str] | None = None) -> str:
    out = io.StringIO()
    PlainConsole(out, os.environ if environ is None else environ).print(*objects)
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


@given(st.lists(markup(), min_size=1, max_size=3), st.integers(8, 200))
def test_plain_console_writes_what_rich_writes_off_a_terminal(objects: list[str], columns: int) -> None:
    """Lines longer than the width included: envkit's consoles soft-wrap, so neither breaks them."""
    environ = {"COLUMNS": str(columns)}
    try:
        expected = riches(*objects, environ=environ)
    except MarkupError:  # rich's escape leaves three backslashes before a tag escaping it; rich then fails
        return
    assert plain(*objects, environ=environ) == expected


@given(st.text(alphabet=st.sampled_from([*"ab/@#=", "[", "]", "\\", "\r", "\t"]), max_size=30))
def test_any_text_rich_accepts_comes_out_the_same(text: str) -> None:
    """Not only envkit's own markup: any string rich can read (an unbalanced tag is an error there)."""
    try:
        expected = riches(text)
    except MarkupError:
        return
    assert plain(text) == expected


CELL = st.one_of(
    st.builds(escape, st.text(alphabet=st.sampled_from([*"ab-_./ 1[]\\"]), max_size=12)),
    st.builds(lambda style, text: f"[{style}]{escape(text)}[/{style}]", st.sampled_from(STYLES), st.text(alphabet="xyz[] ", max_size=8)),
    st.sampled_from(["", "é", "two\nlines", "a\tb", "\x1b[0m", "\u4e2d\u6587"]),  # what only rich lays out
)


@given(
    headers=st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=8), min_size=1, max_size=5),
    rows=st.lists(st.tuples(st.lists(CELL, max_size=5), st.sampled_from([None, "bold cyan"])), max_size=6),
    columns=st.integers(8, 120),
)
def test_tables_come_out_as_rich_lays_them_out(headers: list[str], rows: list[tuple[list[str], str | None]], columns: int) -> None:
    table = TextTable(*headers)
    for cells, style in rows:
        table.add_row(*cells[: len(headers)], style=style)
    environ = {"COLUMNS": str(columns)}
    assert plain(table, environ=environ) == riches(table, environ=environ)


def test_a_table_laid_out_by_hand() -> None:
    table = TextTable("name", "version", "role")
    table.add_row("numpy", "2.1", "")
    table.add_row("[bold]mkl[/bold]", "2024.2", "blas", style="bold cyan")
    assert table.plain_lines(80) == ["name   version  role", "numpy  2.1          ", "mkl    2024.2   blas"]
    assert table.plain_lines(19) is None  # rich would wrap it
    assert plain(table, environ={"COLUMNS": "80"}) == riches(table, environ={"COLUMNS": "80"})


def test_the_width_comes_from_a_terminal_on_stdin_as_riches_does() -> None:
    """`envkit create ... | tee log` from a 30-column terminal: stdout is a pipe, stdin is not."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 30, 0, 0))
    saved = os.dup(0)
    os.dup2(slave, 0)
    try:
        table = TextTable("name", "version", "channel")
        table.add_row("typing-extensions", "4.16.0", "conda-forge")
        assert rich_width({}) == 30 and rich_width({"COLUMNS": "100"}) == 100
        assert plain(table, environ={}) == riches(table, environ={}) != plain(table, environ={"COLUMNS": "100"})
    finally:
        os.dup2(saved, 0)
        for fd in (saved, master, slave):
            os.close(fd)


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


@pytest.mark.parametrize("command", [["lock"], ["create", "--yes", "--no-probe", "-p", "ENV"]])
def test_off_a_terminal_envkit_loads_no_rich_and_says_what_rich_would(command: list[str], tmp_path: Path) -> None:
    """`lock` (lines) and `create` (the plan: lines and a table), as CI runs them and as rich draws
    them when told the pipe is a terminal."""
    recipe = team_recipe(tmp_path / "recipes", two_platform_channel(tmp_path))
    args = [str(tmp_path / "env") if a == "ENV" else a for a in command]
    cmd = [sys.executable, "-X", "importtime", "-m", "envkit", *args, str(recipe)]
    off = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert off.returncode == 0, off.stderr
    assert "\x1b" not in off.stdout and ("wrote " in off.stdout or "helper  1.0" in off.stdout)
    assert not re.search(r"\|\s+rich(\.|$)", off.stderr, re.MULTILINE)

    shutil.rmtree(tmp_path / "env", ignore_errors=True)
    (recipe.parent / "team.lock").unlink(missing_ok=True)  # a first lock again, not a re-lock (which says what it kept)
    forced = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"FORCE_COLOR": "1"}
    drawn = subprocess.run(cmd, capture_output=True, text=True, check=False, env=forced)
    assert drawn.returncode == 0, drawn.stderr
    assert re.search(r"\|\s+rich\.console$", drawn.stderr, re.MULTILINE)  # rich drew it
    assert "\x1b[1m" in drawn.stdout and ANSI.sub("", drawn.stdout) == off.stdout
    if command == ["lock"]:  # a re-lock's lines too: what it kept, each platform's changes, what it dropped
        again = [*cmd[:-1], "--platform", "linux-64", str(recipe)]
        shutil.copy(recipe.parent / "team.lock", tmp_path / "kept.lock")
        off = subprocess.run(again, capture_output=True, text=True, check=False)
        shutil.copy(tmp_path / "kept.lock", recipe.parent / "team.lock")
        drawn = subprocess.run(again, capture_output=True, text=True, check=False, env=forced)
        assert off.returncode == 0 and drawn.returncode == 0, off.stderr + drawn.stderr
        assert "osx-arm64: dropped" in off.stdout and "kept the pins" in off.stdout
        assert "\x1b[" in drawn.stdout and ANSI.sub("", drawn.stdout) == off.stdout
