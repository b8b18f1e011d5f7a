"""The real conda the tests check envkit against: conda's own commands on envkit's envs, and envs
made by conda the way users make them, through envkit.

tools/test.sh installs conda 26.7.1 from ../shared/conda into .conda-test and exports
ENVKIT_TEST_CONDA; a machine with its own conda can point CONDA_EXE at it instead."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Read at import, before the test isolation removes CONDA_* from the environment.
CONDA_FOR_TESTS = os.environ.get("ENVKIT_TEST_CONDA") or os.environ.get("CONDA_EXE") or ""
MISSING = (
    "no conda to test against: run bash tools/test.sh, which installs one from ../shared/conda "
    "(or set ENVKIT_TEST_CONDA, or point CONDA_EXE at an installed conda)"
)


# Other tools envkit's envs and exports meet (conda-lock, conda-pack, from PyPI): tools/test.sh
# puts them in a venv of their own and exports ENVKIT_TEST_TOOLS, its bin folder
TOOLS_FOR_TESTS = os.environ.get("ENVKIT_TEST_TOOLS") or ""


def tool_exe(name: str) -> Path:
    """`name` (conda-lock, conda-pack), to run as its users would; missing, the test fails."""
    import pytest

    found = Path(TOOLS_FOR_TESTS, name) if TOOLS_FOR_TESTS else None
    if found is None or not found.exists():
        pytest.fail(f"no {name} to test against: run bash tools/test.sh (it installs it into .test-tools)")
    return found


def conda_exe() -> Path:
    """The conda to test against. A missing one fails the test rather than skipping it: these tests
    are how envkit learns what the real client does, and a skip would pass without them."""
    import pytest

    if not CONDA_FOR_TESTS or not Path(CONDA_FOR_TESTS).exists():
        pytest.fail(MISSING)
    return Path(CONDA_FOR_TESTS)


@dataclass(frozen=True)
class Conda:
    exe: Path
    pkgs: Path

    def environ(self, **extra: str) -> dict[str, str]:
        """The test's isolated environment for conda: its own package cache, no pip added to
        every python env (the test channels have none), no network check in `conda doctor`."""
        env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
        env.update(
            CONDA_PKGS_DIRS=str(self.pkgs),
            CONDA_ADD_PIP_AS_PYTHON_DEPENDENCY="false",
            CONDA_NUMBER_CHANNEL_NOTICES="0",
            CONDA_AUTO_UPDATE_CONDA="false",
            CONDA_REPORT_ERRORS="false",
        )
        env.update(extra)
        return env

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.exe), *args], capture_output=True, text=True, timeout=timeout, env=env or self.environ(), check=False
        )

    def ok(self, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> str:
        proc = self.run(*args, env=env, timeout=timeout)
        assert proc.returncode == 0, f"conda {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        return proc.stdout

    def create(self, prefix: Path, channels: list[Path], specs: list[str], *extra: str) -> Path:
        chans = [arg for ch in channels for arg in ("-c", ch.as_uri())]
        self.ok("create", "-y", "-q", "-p", str(prefix), "--override-channels", *chans, *extra, *specs)
        return prefix
