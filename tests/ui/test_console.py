"""Output for a person (envkit.ui.console): off a terminal nothing is wrapped whatever the width, so
paths and URLs stay whole in CI logs; control characters from files are shown, never sent; a
reader that goes away ends envkit as a closed pipe does; and what counts as a terminal is what
rich counts."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from envkit.ui.console import draws_nothing, escape, visible
from tests.support.tiny import tiny_channel, tiny_recipe


def _envkit(*args: str, columns: int, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS=str(columns))
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, cwd=cwd, check=False)


@pytest.mark.parametrize("columns", [40, 200])
def test_rules_off_a_terminal_are_one_line_each(columns: int) -> None:
    listed = _envkit("audit", "--list-rules", columns=columns)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) >= 40 and all(line[:2] in ("EK", "RC") for line in lines), lines[:5]
    assert max(len(line) for line in lines) > columns or columns == 200  # longer than the width, and whole


@pytest.mark.parametrize("columns", [40, 200])
def test_a_plan_off_a_terminal_keeps_every_path_on_one_line(tmp_path: Path, columns: int) -> None:
    deep = tmp_path / "a-rather-long-folder-name-for-the-team" / "and-another-one-below-it" / "envs"
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    prefix = deep / "tiny-with-a-long-name"
    planned = _envkit("create", str(recipe), "-p", str(prefix), "--dry-run", columns=columns)
    assert planned.returncode == 0, planned.stderr
    assert any(str(prefix) in line for line in planned.stdout.splitlines()), planned.stdout
    assert any(tiny_channel(tmp_path).as_uri() in line for line in planned.stdout.splitlines())
    explained = _envkit("audit", "--explain", "EK001", columns=columns)
    urls = [word for word in explained.stdout.split() if word.startswith("https://")]
    assert urls and all(url.count("/") >= 3 and not url.endswith("-") for url in urls)


def test_control_characters_are_shown_and_markup_is_escaped() -> None:
    assert visible("a\x1b[2Jb\x07\tc\nd") == "a\\x1b[2Jb\\x07\tc\nd"
    out = io.StringIO()
    Console(file=out, highlight=False).print(escape("[bold]x[/bold] \x1b]0;title\x07"))
    assert out.getvalue() == "[bold]x[/bold] \\x1b]0;title\\x07\n"


def test_a_reader_that_goes_away_ends_envkit_as_a_closed_pipe_does() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "envkit", "audit", "--list-rules"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # gone before envkit has started: its first write meets a closed pipe
    assert proc.wait(timeout=60) == 141
    assert b"Traceback" not in proc.stderr.read()


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


def test_plain_output_is_what_rich_writes_off_a_terminal() -> None:
    """envkit.ui.plainout writes what rich writes unwrapped, without importing rich."""
    from envkit.ui.console import UNWRAPPED, TextTable, console_options
    from envkit.ui.plainout import PlainConsole

    table = TextTable("name", "version", "role")
    table.add_row("numpy", "2.1", "")
    table.add_row("[bold]mkl[/bold]", "2024.2", "blas", style="bold cyan")
    table.add_row(escape("a [x] \\ path/" + "y" * 150), "1", "")
    samples: list[object] = [
        "[bold]Plan[/bold] for [cyan]x[/cyan] -> /a/very/long/" + "p" * 200,
        f"[red]error[/red] {escape('[x] ' + chr(27) + '[2J evidence')}",
        table,
    ]
    for sample in samples:
        plain, rich_out = io.StringIO(), io.StringIO()
        PlainConsole(plain, None).print(sample)
        Console(file=rich_out, width=UNWRAPPED, **console_options()).print(sample)
        assert plain.getvalue() == rich_out.getvalue(), sample


def test_the_switch_gives_rich_and_the_same_text(tmp_path: Path) -> None:
    recipe = tiny_recipe(tmp_path, tiny_channel(tmp_path))
    args = ("create", str(recipe), "-p", str(tmp_path / "env"), "--dry-run")
    plain = _envkit(*args, columns=80)
    env = dict(os.environ, ENVKIT_PLAIN_OUTPUT="0")
    rich_out = subprocess.run([sys.executable, "-m", "envkit", *args], capture_output=True, text=True, env=env, check=False)
    assert plain.returncode == rich_out.returncode == 0
    assert plain.stdout == rich_out.stdout
