"""Build an env where a crash cannot be mistaken for one, then swap it into place.

Beside the target, on the same filesystem so that every rename is atomic:

    .NAME.envkit-staging-PID   the env being built; complete once its record is written (last)
    .NAME.envkit-old-PID       the env being replaced, between the two renames of the swap

All of it runs under the target's lock (an flock, which dies with its holder, on `.NAME.envkit-lock`
beside the env, so every user who may change a shared env takes the same one; taken away with the
env by `remove`, a create that leaves no env, or the conda plugin after conda removes or renames
the env, so nothing of envkit's stays), so a staging or old
directory found while holding the lock belongs to a run that is gone: SIGKILL by
the OOM killer or a job scheduler, a closed SSH session. `recover` settles them: a half-built env
is removed; an old env whose replacement never arrived is put back; a replacement that was
complete but not yet moved in is moved in. Each is reported (envkit.core.notices).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from envkit.core import paths
from envkit.core.digests import sha256
from envkit.core.fsutil import LockBusy, discard_lock, exclusive_lock, may_create_in
from envkit.core.notices import notify
from envkit.prefix.envs import looked_at
from envkit.prefix.leftovers import leftovers, real_prefix, work_dir
from envkit.prefix.record import partial_journals, record_path, sync_journal_path


def lock_for(prefix: Path) -> Path:
    """Beside the env: a lock in each user's own cache would let a teammate's envkit "recover" (roll
    back, delete) what another user's envkit is in the middle of. In envkit's cache only where no
    lock beside the env can be had (a directory this user may not create it in)."""
    prefix = real_prefix(prefix)
    beside = prefix.with_name(f".{prefix.name}.envkit-lock")
    # judged on the nearest directory there is (create makes the rest): the same answer before and
    # after the env's directory exists
    if os.access(beside, os.R_OK) or may_create_in(prefix.parent) is None:
        return beside
    digest = sha256(str(prefix).encode()).hexdigest()[:16]
    return paths.cache_dir() / "locks" / f"{digest}.lock"


@contextmanager
def env_lock(prefix: Path, *, wait: float = 0) -> Iterator[Path]:
    """The env's lock (lock_for), held for the block; yields the lock file, for
    envkit.core.fsutil.discard_lock where the block leaves no env."""
    with exclusive_lock(lock_for(prefix), f"env {prefix}", wait=wait) as held:
        yield held


def discard_lock_of_gone_env(prefix: Path) -> bool:
    """Take away the lock file left beside an env that another tool has since removed or renamed
    away (`conda env remove`, `conda rename`: the conda plugin's hook after them), as `envkit
    remove` takes its own. Under the lock, and only while no env and nothing of an interrupted run
    is there: a lock in use (an envkit creating an env at that path now) is left to its holder."""
    if os.path.lexists(prefix) or not os.path.lexists(lock_for(prefix)):
        return False
    try:
        with env_lock(prefix) as held:
            if os.path.lexists(prefix) or leftovers(prefix):
                return False
            discard_lock(held)
            return True
    except (LockBusy, OSError):
        return False


def remove_tree(path: Path, *, writers_may_linger: bool = False) -> None:
    """Remove `path`. rattler's linking tasks outlive a failed install() and write on: after one
    (`writers_may_linger`), sweep until the tree stays gone for 0.2 s, for 3 s at most (on a full
    disk one sweep and another 0.2 s later still left a staging directory behind). Whatever writes
    after that is swept by the next run that takes the env's lock (recover)."""
    import shutil

    deadline = time.monotonic() + 3.0
    shutil.rmtree(path, ignore_errors=True)
    while (writers_may_linger or path.exists()) and time.monotonic() < deadline:
        time.sleep(0.2)
        if not path.exists():
            return
        shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class Recovered:
    """What recovery did with an env that an interrupted envkit left half-changed."""

    prefix: Path
    action: Literal["removed", "restored", "finished", "rolled back"]
    path: Path
    kept: tuple[str, ...] = ()  # a rollback's: files added since the sync began that it did not write

    def describe(self) -> str:
        if self.action == "restored":
            return f"restored {self.prefix}: an interrupted replacement (envkit pid gone) had moved it aside to {self.path.name}"
        if self.action == "rolled back":
            kept = f"; kept {len(self.kept)} file(s) the sync did not write: {', '.join(self.kept[:5])}" if self.kept else ""
            return f"rolled {self.prefix} back to what it was before an interrupted sync{kept}"
        if self.action == "finished":
            return f"finished replacing {self.prefix}: the new env was complete in {self.path.name} when its envkit was interrupted"
        return f"removed {self.path} left by an interrupted envkit"


def recover(prefix: Path) -> list[Recovered]:
    """Settle what runs that are gone left beside (or, for a sync, inside) `prefix`. Call it holding
    the env's lock."""
    prefix = real_prefix(prefix)
    done: list[Recovered] = []
    if sync_journal_path(prefix).is_dir():
        from envkit.install.journal import rollback
        from envkit.prefix.envs import pkgs_dir

        kept = rollback(prefix, pkgs_dir())
        done.append(Recovered(prefix, "rolled back", sync_journal_path(prefix), tuple(kept)))
    for partial in partial_journals(prefix):  # a journal copy a kill left half-made: nothing changed under it
        remove_tree(partial)
        done.append(Recovered(prefix, "removed", partial))
    found = leftovers(prefix)
    stagings = {pid: path for kind, pid, path in found if kind == "staging"}
    for kind, pid, path in found:
        if kind != "old":
            continue
        if prefix.exists():  # the swap had completed; only the old copy was left to delete
            remove_tree(path)
            done.append(Recovered(prefix, "removed", path))
            continue
        staged = stagings.pop(pid, None)
        if staged is not None and _complete(staged):
            os.rename(staged, prefix)
            remove_tree(path)
            done.append(Recovered(prefix, "finished", staged))
        else:
            os.rename(path, prefix)
            done.append(Recovered(prefix, "restored", path))
    for kind, _pid, path in found:
        if kind in ("staging", "removing") and path.exists():
            remove_tree(path)
            done.append(Recovered(prefix, "removed", path))
    for item in done:
        notify(item.describe())
    return done


def _complete(staged: Path) -> bool:
    """Whether a staging env was finished: its record, create's last write, reads back whole. That
    write is not flushed (the rename into place is what makes a staging env appear), so after a
    power loss the file can be there and empty, or cut short: the env it would have replaced is
    then the one to keep."""
    try:
        return isinstance(json.loads(record_path(staged).read_bytes()), dict)
    except (OSError, ValueError):
        return False


def settle(prefix: Path) -> None:
    """For commands that change an env, before they look it up: settle what an interrupted envkit
    left, under the env's lock (an env being changed right now is left to its changer, who
    settles it itself)."""
    if not leftovers(prefix) and not sync_journal_path(prefix).is_dir() and not partial_journals(prefix):
        return
    try:
        with env_lock(prefix):
            recover(prefix)
    except LockBusy:
        return


def swap_in(staging: Path, prefix: Path) -> Path | None:
    """Move the complete staging env to `prefix`; an env already there is moved aside first and
    its new path returned (the caller deletes it once the new env is registered)."""
    old = None
    if prefix.exists():
        old = work_dir(prefix, "old")
        os.rename(prefix, old)
    try:
        os.rename(staging, prefix)
    except BaseException:
        if old is not None and not prefix.exists():
            os.rename(old, prefix)
        raise
    return old


def settle_before_change(name: str | None, prefix: str | None) -> None:
    """The first step of a command that changes an env (sync, remove, audit --fix): settle what an
    interrupted envkit left at every path its look-up will read, so the look-up finds the env as
    it was before the interruption. Look-ups themselves only read."""
    for candidate in looked_at(name, prefix):
        settle(candidate)
