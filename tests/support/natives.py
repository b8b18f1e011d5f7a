"""Real native libraries of this machine, for the tests that load them or copy them into an env."""

from __future__ import annotations

import subprocess

import pytest


def system_library(soname: str) -> str:
    """The path ldconfig gives for `soname`; the test fails where it is not installed."""
    proc = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True)
    found = [line.rsplit("=> ", 1)[1] for line in proc.stdout.splitlines() if line.strip().startswith(f"{soname} ")]
    if not found:
        pytest.fail(f"{soname} is not installed (tools/test.sh installs Debian's libomp5-14; libgomp1 comes with gcc)")
    return found[0]
