"""The README's commands work as printed: every `envkit ...` line in its shell blocks is accepted by
the real parser, and those that need neither a network nor a GPU are run for real, against the test
replica of conda-forge configured as a mirror the way the README says (`mirrors:` in config.yaml)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from envkit.cli.main import build_parser
from tests.conftest import run_envkit

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words and words[0] in ("envkit", ".venv/bin/envkit"):
                    commands.append(words[1:])
    return commands


COMMANDS = readme_commands()


def test_the_readme_shows_commands() -> None:
    assert len(COMMANDS) >= 10


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a)[:60])
def test_every_readme_command_parses(argv: list[str]) -> None:
    build_parser().parse_args(argv)


@pytest.fixture
def mirrored(isolated: Path, replica: dict[str, Path]) -> None:
    config = isolated / ".config" / "envkit" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("mirrors:\n" + "".join(f"  {name}: {path.as_uri()}\n" for name, path in replica.items()))


@pytest.mark.parametrize(
    "argv",
    [
        ["recipes", "list"],
        ["recipes", "show", "yolov8", "--resolved"],
        ["create", "yolov8-cpu", "--dry-run"],
        ["create", "yolov8", "--dry-run"],
        ["lock", "yolov8"],
        ["lock", "yolov8", "--update", "pytorch"],
        ["list"],
        ["recipes", "check"],
        ["export", "--lock", "yolov8.lock", "--platform", "linux-64", "--format", "dockerfile"],
        ["audit", "--all"],
        ["audit", "--explain", "EK001"],
        ["audit", "--explain", "RC003"],
    ],
    ids=" ".join,
)
def test_readme_commands_run(mirrored: None, argv: list[str], tmp_path: Path) -> None:
    """Run in an empty working dir: `lock` of a built-in recipe writes ./NAME.lock there, and
    `recipes check` checks a recipe repo made there of a built-in recipe and its lock (in an empty
    one it would check nothing, which is an error)."""
    assert argv in COMMANDS or argv[:2] == ["audit", "--explain"] or argv[0] == "create"
    work = tmp_path / "work"
    work.mkdir()
    if argv == ["recipes", "check"]:
        shutil.copy(ROOT / "recipes" / "yolov8-cpu.yaml", work / "yolov8-cpu.yaml")
        assert run_envkit("lock", "yolov8-cpu.yaml", cwd=work).returncode == 0
    if "--update" in argv or "--lock" in argv:  # a re-lock, or an export of the lock: the lock is there
        assert run_envkit("lock", "yolov8", cwd=work).returncode == 0
    proc = run_envkit(*argv, "--json", cwd=work)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["ok"] is True, proc.stdout + proc.stderr
    if argv[0] == "lock":
        assert (work / f"{argv[1]}.lock").is_file()
    if "--update" in argv:
        assert doc["data"]["kept"] is True and doc["data"]["updated"] == ["pytorch"]
        assert all(p["changes"] == [] for p in doc["data"]["platforms"])  # the same channels: pytorch had nowhere to move
    if argv == ["recipes", "check"]:
        assert [(r["name"], r["problems"]) for r in doc["data"]] == [("yolov8-cpu", [])]
    if argv[0] == "export":
        assert "\nFROM --platform=linux/amd64 " in doc["data"]["text"] and "conda create --yes --prefix /opt/env" in doc["data"]["text"]


def test_the_readme_counts_every_audit_rule() -> None:
    """The catalog grows; the README's count follows it (the table is docs/reference/rules.md, generated)."""
    from envkit.audit.rules import RULES

    text = (ROOT / "README.md").read_text()
    counted = re.search(r"against a catalog of (\d+) rules", text)
    assert counted and int(counted.group(1)) == len(RULES), "update the rule count in the README's opening"


def test_the_readme_is_short_and_its_exit_code_example_gives_that_code() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "141 the output's reader went away" in " ".join(text.split())
    import os
    import subprocess
    import sys

    # The reader is gone before envkit writes, as it is once `head -1` has its line; a small output
    # would otherwise fit the pipe's buffer and never meet the closed end.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        piped = subprocess.run(
            [sys.executable, "-m", "envkit", "audit", "--list-rules"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(write_end)
    assert piped.returncode == 141, (piped.returncode, piped.stderr)
    assert piped.stderr == "", piped.stderr
