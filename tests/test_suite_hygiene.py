"""The test suite cleans up after itself: real envs are hundreds of MB each, and a suite that
kept every session's temp dirs filled disks (6.1 GB per run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REAL_HOME

ROOT = Path(__file__).resolve().parent.parent


def test_a_passing_session_leaves_no_temp_dirs(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (project / "tests" / "test_big.py").write_text(
        "def test_writes(tmp_path):\n    (tmp_path / 'big').write_bytes(b'x' * 1_000_000)\n\n"
        "def test_session(tmp_path_factory):\n    (tmp_path_factory.mktemp('env') / 'f').write_text('x')\n"
    )
    temproot = tmp_path / "temproot"
    temproot.mkdir()
    env = dict(os.environ, PYTEST_DEBUG_TEMPROOT=str(temproot))
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout
    leftovers = [p for p in temproot.rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert leftovers == []


@pytest.fixture(scope="module")
def home_seen_by_module_fixtures() -> Path:
    return Path(os.environ["HOME"])


def test_module_fixtures_never_see_the_real_home(home_seen_by_module_fixtures: Path) -> None:
    """A module-scoped fixture that runs conda (tests/audit/test_rules.py's layouts) must not
    register its envs in the real ~/.conda/environments.txt."""
    assert home_seen_by_module_fixtures != REAL_HOME
    assert home_seen_by_module_fixtures.name.startswith("session-home")
    assert Path(os.environ["HOME"]) != home_seen_by_module_fixtures  # each test has its own again
