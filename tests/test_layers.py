"""The pipeline's layers (pyproject.toml's import-linter contract): the package keeps them, and the
contract refuses a module that imports from a layer above its own, even from inside a function."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=project, capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"}
    )


def _copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    shutil.copytree(ROOT / "envkit", project / "envkit", ignore=shutil.ignore_patterns("__pycache__"))
    return project


def test_the_package_keeps_its_layers(tmp_path: Path) -> None:
    done = _lint(_copy(tmp_path))
    assert done.returncode == 0, done.stdout
    assert "1 kept, 0 broken" in done.stdout


BACK_ARROWS = [
    # a look-up deep in the pipeline reaching for the CLI from inside a function
    (
        "core/errors.py",
        "\n\ndef _render() -> None:\n    from envkit.cli import envelope  # noqa: F401\n",
        ("envkit.core is not allowed to import envkit.cli", "envkit.core.errors -> envkit.cli.envelope"),
    ),
    # a command's view or run reaching up for the parser
    (
        "commands/toolchain.py",
        "\n\nfrom envkit.cli.main import build_parser  # noqa: E402,F401\n",
        ("envkit.commands is not allowed to import envkit.cli",),
    ),
]


@pytest.mark.parametrize(("module", "appended", "said"), BACK_ARROWS)
def test_a_back_arrow_breaks_the_contract(tmp_path: Path, module: str, appended: str, said: tuple[str, ...]) -> None:
    project = _copy(tmp_path)
    source = project / "envkit" / module
    source.write_text(source.read_text() + appended)
    done = _lint(project)
    assert done.returncode == 1, done.stdout
    assert all(line in done.stdout for line in said), done.stdout
