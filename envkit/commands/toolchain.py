"""`envkit toolchain`: the toolchain map of an env (envkit.audit.toolchain)."""

from __future__ import annotations

from pathlib import Path

from envkit.audit.toolchain import env_toolchain
from envkit.commands import Result


def toolchain(prefix: Path) -> Result:
    return Result("toolchain", env_toolchain(prefix))
