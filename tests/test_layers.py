"""The pipeline's layers (pyproject.toml's import-linter contract): the package keeps them, and the
contract refuses a module that imports from a layer above its own, even from inside a function."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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


def test_a_back_arrow_inside_a_function_breaks_the_contract(tmp_path: Path) -> None:
    project = _copy(tmp_path)
    errors = project / "envkit" / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _render() -> None:\n    from envkit.cli import envelope  # noqa: F401\n")
    done = _lint(project)
    assert done.returncode == 1, done.stdout
    assert "envkit.core is not allowed to import envkit.cli" in done.stdout
    assert "envkit.core.errors -> envkit.cli.envelope" in done.stdout


def test_a_command_importing_the_cli_breaks_the_contract(tmp_path: Path) -> None:
    """Commands sit below the CLI: a view or a run that reached up for the parser would be refused."""
    project = _copy(tmp_path)
    toolchain = project / "envkit" / "commands" / "toolchain.py"
    toolchain.write_text(toolchain.read_text() + "\n\nfrom envkit.cli.main import build_parser  # noqa: E402,F401\n")
    done = _lint(project)
    assert done.returncode == 1, done.stdout
    assert "envkit.commands is not allowed to import envkit.cli" in done.stdout
