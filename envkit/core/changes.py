"""What differs between two sets of packages, each `name -> version` (or "version build"): one
comparison, and one way to say a change, for a sync's difference, drift and a re-lock's changes.
Plain tuples: the lock path loads this without the sync's models."""

from __future__ import annotations

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
