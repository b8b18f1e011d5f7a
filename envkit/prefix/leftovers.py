"""What an interrupted envkit left beside an env, read without changing anything.

Staging (.NAME.envkit-staging-PID), old (.NAME.envkit-old-PID) and removing directories, and a sync's
journal: `pending` says in a sentence what the next command that changes the env will settle
(envkit.install.transaction does the settling)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, cast

from envkit.prefix.record import partial_journals, sync_journal_path

Kind = Literal["staging", "old", "removing"]


LEFTOVER_RE = re.compile(r"^\.(?P<name>.+)\.envkit-(?P<kind>staging|old|removing)-(?P<pid>\d+)$")


def real_prefix(prefix: Path) -> Path:
    """The env's own directory when `prefix` is a link to it (~/envs/x -> /scratch/envs/x, common
    where home is small): its lock, leftovers and replacement are the directory's, whichever of the
    two paths a command was given, and a link is never renamed aside in its place."""
    return Path(os.path.realpath(prefix)) if prefix.is_symlink() else prefix


def work_dir(prefix: Path, kind: Kind, pid: int | None = None) -> Path:
    return prefix.with_name(f".{prefix.name}.envkit-{kind}-{pid if pid is not None else os.getpid()}")


def is_leftover(path: Path) -> bool:
    """A staging or old directory, never an env in its own right (conda and `audit --all` skip it)."""
    return LEFTOVER_RE.match(path.name) is not None


def leftovers(prefix: Path) -> list[tuple[Kind, int, Path]]:
    prefix = real_prefix(prefix)
    head = f".{prefix.name}.envkit-"  # its own name first: a name that holds another's stays apart
    try:
        with os.scandir(prefix.parent) as entries:
            names = sorted(entry.name for entry in entries if entry.name.startswith(head))
    except OSError:  # no parent folder (nothing left there), or one this user may not list
        return []
    out: list[tuple[Kind, int, Path]] = []
    for name in names:
        match = LEFTOVER_RE.match(name)
        if match and match.group("name") == prefix.name:
            out.append((cast(Kind, match.group("kind")), int(match.group("pid")), prefix.parent / name))
    return out


def pending(prefix: Path) -> str | None:
    """What an interrupted envkit left for the next change of `prefix` to settle, in a sentence for
    commands that only read (they change nothing, and say so); None where nothing is pending."""
    prefix = real_prefix(prefix)
    if sync_journal_path(prefix).is_dir():
        return f"an interrupted sync is pending on {prefix}; `envkit sync -p {prefix}` finishes undoing it"
    kinds = {kind for kind, _pid, _path in leftovers(prefix)}
    if "old" in kinds and not prefix.exists():
        return (
            f"{prefix} was moved aside by an interrupted replacement; a command that changes it "
            f"(`envkit sync -p {prefix}`, `envkit remove -p {prefix}`) puts it back first"
        )
    if kinds or partial_journals(prefix):
        return f"an interrupted envkit left work files beside {prefix}; the next command that changes it removes them"
    return None
