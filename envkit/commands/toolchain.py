"""`envkit toolchain`: the toolchain map of an env (envkit.toolchain)."""

from __future__ import annotations

from pathlib import Path

from envkit.commands import Result
from envkit.toolchain import env_toolchain


def toolchain(prefix: Path) -> Result:
    return Result("toolchain", env_toolchain(prefix))
