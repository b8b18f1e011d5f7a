"""`envkit list`: the envs conda knows, with what envkit knows of them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from envkit.audit.drift import drift
from envkit.commands import Result
from envkit.commands.arguments import json_flag
from envkit.core.errors import EnvkitError
from envkit.prefix.envrecord import FIX_SOURCE, RecipeRef
from envkit.prefix.envs import all_envs
from envkit.prefix.health import health_of
from envkit.prefix.history import created_at, not_an_env
from envkit.prefix.installed import pip_dists, read_conda_meta
from envkit.prefix.protect import frozen_env
from envkit.prefix.record import read_record
from envkit.team.sync import lock_file, recipe_files
from envkit.ui.console import Out, TextTable, escape
from envkit.ui.terminal import UI


@dataclass(frozen=True)
class ListedEnv:
    """One line of `envkit list`: an env conda knows, and what envkit recorded of it."""

    prefix: str
    name: str
    envkit: bool
    recipe: str | None = None
    source: str | None = None
    commit: str | None = None
    created: str | None = None
    health: str | None = None  # healthy | warn | unhealthy | not probed (envkit.prefix.health)
    health_basis: str | None = None  # where the verdict comes from: "probe at DATE", or none yet
    drift: tuple[str, ...] = ()
    error: str | None = None
    recipe_files: str | None = None  # envkit.team.sync.recipe_files: unchanged | changed | missing
    stale_lock: str | None = None  # the lock a --frozen create or sync installed though its recipe had changed
    lock_file: str | None = None  # envkit.team.sync.lock_file: the lock it was installed from, since: unchanged | changed | missing
    frozen: str | None = None  # marked frozen (CEP 22): the marker's reason, "" where it gives none


def add_arguments(p: argparse.ArgumentParser) -> None:
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[list[ListedEnv]]:
    return list_envs()


def describe(prefix: Path) -> ListedEnv:
    marker = frozen_env(prefix)
    frozen = marker.reason if marker is not None else None
    try:
        record = read_record(prefix)
    except EnvkitError as exc:
        return ListedEnv(str(prefix), prefix.name, True, error=exc.message, frozen=frozen)
    if (why := not_an_env(prefix)) is not None:
        return ListedEnv(str(prefix), prefix.name, record is not None, error=f"not a conda env: {why}", frozen=frozen)
    if record is None:
        return ListedEnv(str(prefix), prefix.name, False, created=created_at(prefix), frozen=frozen)
    recipe = record.recipe or RecipeRef()
    health = health_of(record)
    packages, _ = read_conda_meta(prefix)
    lock = record.lock
    return ListedEnv(
        str(prefix),
        prefix.name,
        True,
        recipe=record.recipe_name,
        source=recipe.source,
        commit=recipe.commit,
        created=record.created,
        health=health.state,
        health_basis=health.line(),
        drift=tuple(drift(record, packages, pip_dists(prefix))),
        recipe_files=recipe_files(record.recipe),
        stale_lock=lock.path if lock and lock.stale and lock.path else None,
        lock_file=lock_file(record),
        frozen=frozen,
    )


def list_envs() -> Result[list[ListedEnv]]:
    return Result("list", [describe(p) for p in all_envs()], view=list_view)


def _recipe_cell(r: ListedEnv) -> str:
    if not r.envkit:
        return "(not envkit)"
    if r.recipe is None and r.source == FIX_SOURCE:
        return "(audit --fix)"  # activation settings envkit added to an env it did not make
    files = {"changed": " (changed since)", "missing": " (its file is gone)"}
    locks = {"changed": " (its lock changed since)", "missing": " (its lock is gone)"}
    said = files.get(r.recipe_files or "") or locks.get(r.lock_file or "") or (" (from a stale lock)" if r.stale_lock else "")
    return escape((r.recipe or "") + said)


# radon cc 25: one note per state an env can be in (drift, frozen, stale lock, changed recipe); the view has no logic to move out
def list_view(c: Out, rows: list[ListedEnv]) -> None:
    if not rows:
        c.print("no envs found")
        return
    table = TextTable("env", "recipe", "commit", "created", "health", "drift")
    for r in rows:
        drift = f"{len(r.drift)} change(s)" if r.drift else ("" if r.envkit else "-")
        table.add_row(
            escape(r.prefix),
            _recipe_cell(r),
            (r.commit or "")[:10],
            (r.created or "")[:10],
            r.health or r.error or "",
            drift,
        )
    c.print(table)
    for r in rows:
        if r.health in ("warn", "unhealthy") and r.health_basis:
            c.print(f"  {escape(r.name)}: {escape(r.health_basis)} (envkit probe -n {escape(r.name)} shows each check)")
    for r in rows:
        for line in r.drift:
            c.print(f"  {escape(r.name)}: {escape(line)}")
    if any(r.recipe_files == "changed" for r in rows):
        c.print("an edited recipe (or a `recipes update` of its source): `envkit sync --dry-run -n NAME` shows what it changes")
    if any(r.lock_file == "changed" and r.recipe_files != "changed" for r in rows):
        c.print("a lock changed since the env was installed from it (a re-lock, or a `recipes update`): `envkit sync --locked -n NAME`")
    for r in rows:
        if r.frozen is not None:
            why = f": {escape(r.frozen)}" if r.frozen else ""
            c.print(f"{escape(r.name)} is frozen (conda-meta/frozen){why}; sync, remove and audit --fix leave it alone (--override-frozen)")
    for r in rows:
        if r.stale_lock and r.recipe_files != "changed":
            c.print(
                f"{escape(r.name)} holds {escape(r.stale_lock)} as it was (--frozen), older than its recipe: "
                f"lock its recipe again (`envkit lock`), then `envkit sync -n {escape(r.name)} --locked`"
            )
