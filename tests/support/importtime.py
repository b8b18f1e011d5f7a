"""What a run of envkit loaded, read from the lines PYTHONPROFILEIMPORTTIME writes to stderr: the
tests that hold a command to the modules it uses read them the same way."""

from __future__ import annotations

import os


def profiled() -> dict[str, str]:
    """This environment, with the run's imports listed on its stderr."""
    return {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}


def imported(stderr: str) -> set[str]:
    """The modules a run tried to load (a refused try, as asyncio's at `ssl`, is listed too)."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:") and "|" in line}
