"""What differs between two sets of packages, each `name -> version` (or "version build"): one
comparison, and one way to say a change, for a sync's difference, drift and a re-lock's changes.
PackageChange is the named form a sync and drift show."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["added", "removed", "changed"]
MARKS: dict[str, str] = {"added": "+", "removed": "-", "changed": "~"}


def differences(old: dict[str, str], new: dict[str, str]) -> list[tuple[str, Kind, str | None, str | None]]:
    """(name, kind, old, new) for each name whose value differs, in name order."""
    out: list[tuple[str, Kind, str | None, str | None]] = []
    for name in sorted(old.keys() | new.keys()):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        out.append((name, "added" if before is None else "removed" if after is None else "changed", before, after))
    return out


def change_text(kind: str, old: str | None, new: str | None) -> str:
    """What a change says after the name: the new value, the old one, or `old -> new`."""
    return (new if kind == "added" else old if kind == "removed" else f"{old} -> {new}") or ""


@dataclass(frozen=True)
class PackageChange:
    """A package a sync adds, removes or moves to another version or build."""

    name: str
    kind: Kind
    old: str | None  # version build
    new: str | None


def diff_packages(installed: dict[str, str], planned: dict[str, str]) -> tuple[PackageChange, ...]:
    """`name -> "version build"` on each side."""
    return tuple(PackageChange(*change) for change in differences(installed, planned))
