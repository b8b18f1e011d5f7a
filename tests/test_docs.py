"""The docs stay true: the reference pages are what the code generates now, every rule has its own
anchor and `--explain` prints it, every command the docs show is one the parser takes, and no
page tells the story of past work."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envkit.cli.main import build_parser
from tests.conftest import run_envkit

ROOT = Path(__file__).resolve().parent.parent


def _reference() -> Any:
    """tools/reference.py, the generator (a script, not a package)."""
    spec = importlib.util.spec_from_file_location("reference", ROOT / "tools" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _reference()


@pytest.mark.parametrize("page", sorted(reference.PAGES))
def test_the_reference_page_is_what_the_code_generates(page: str) -> None:
    written = (ROOT / "docs" / "reference" / page).read_text(encoding="utf-8")
    assert written == reference.render()[page], f"docs/reference/{page} is stale: run python tools/reference.py"


def test_every_rule_has_its_anchor_and_explain_prints_it() -> None:
    from envkit.audit.recipe_rules import RULES as RECIPE_RULES
    from envkit.audit.rules import RULES

    page = (ROOT / "docs" / "reference" / "rules.md").read_text(encoding="utf-8")
    for rule_id, slug in [(r.id, r.slug) for r in RULES] + [(r.id, r.slug) for r in RECIPE_RULES]:
        assert f"## {rule_id} {slug} {{#{rule_id.lower()}}}" in page, rule_id
    explained = run_envkit("audit", "--explain", "EK040")
    assert "docs/reference/rules.md#ek040" in explained.stdout


def _shown_commands() -> list[tuple[str, list[str]]]:
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            for line in block.splitlines():
                for part in line.split("&&"):
                    words = shlex.split(part.split("#", 1)[0]) if "#" in part else shlex.split(part)
                    if words and words[0] in ("envkit", ".venv/bin/envkit"):
                        out.append((str(path.relative_to(ROOT)), words[1:]))
    return out


SHOWN = _shown_commands()


def test_the_docs_show_commands() -> None:
    assert len(SHOWN) >= 20


@pytest.mark.parametrize(("where", "argv"), SHOWN, ids=[f"{w}: {' '.join(a)[:50]}" for w, a in SHOWN])
def test_every_command_the_docs_show_parses(where: str, argv: list[str]) -> None:
    build_parser().parse_args(argv)


def test_no_page_tells_the_story_of_past_work() -> None:
    pattern = r"stop's|th stop|this stop"
    proc = subprocess.run(
        ["grep", "-rniE", pattern, "README.md", "docs", "bench", "envkit"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.stdout == "", proc.stdout


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    assert mkdocs.exists(), "mkdocs is a dev dependency: pip install -e .[dev]"
    proc = subprocess.run(
        [str(mkdocs), "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "reference" / "rules" / "index.html").is_file()
