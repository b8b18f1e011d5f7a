"""A package a solve chose, as the plan shows it and the env's record keeps it: this module loads
no solver, so the record is read without rattler (a no-op sync)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlannedPackage:
    """A package the solve chose, with the toolchain role the plan shows for it."""

    name: str
    version: str
    build: str
    channel: str
    subdir: str
    url: str
    sha256: str | None
    role: str | None
    depends: tuple[str, ...] = ()
