"""`envkit sync`: bring an existing env to its recipe (or its lock) in place. Shows the difference
first; applies it all or nothing (envkit.install.journal); probes the result.

The order serves speed as much as safety. The installer child (envkit.install.inplace) is started first,
by `invoke` before the sync machinery loads (a fork, once rattler is loaded: see Installer), and waits
while this process loads the sync machinery, YAML, the recipe and the solver
(envkit.commands.sync_look and sync_apply, imported only once the lock is held). Under the env's lock, once
what a killed run left is settled, the child is asked to read the env's records; the lock is held
from then until the change is done, so that the difference shown is the one applied.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.commands import Result
from envkit.commands.arguments import env_args, json_flag, lock_args, override_frozen_flag, update_args
from envkit.core.errors import ExitCode, UsageError
from envkit.core.fsutil import owner_name
from envkit.install.inplace import Installer
from envkit.install.journal import draft_path
from envkit.install.transaction import env_lock, recover, settle_before_change
from envkit.prefix.envrecord import EnvRecord
from envkit.prefix.envs import select_env
from envkit.prefix.protect import must_not_be_frozen
from envkit.prefix.record import read_record
from envkit.recipe.sources import is_git_source_name, read_git_sources
from envkit.team.sync import SyncOutcome
from envkit.ui.console import Out, escape
from envkit.ui.terminal import UI
from envkit.ui.views import kernels_view, probe_view, sync_changes_view

if TYPE_CHECKING:
    from envkit.commands.sync_look import Look, Moving


def add_arguments(p: argparse.ArgumentParser) -> None:
    env_args(p)
    lock_args(p, "sync to")
    p.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--no-probe", action="store_true", help="skip the probe after the change")
    update_args(
        p, kept="conda's names or pip's; what else envkit installed stays where it still fits", afresh="every package and wheel may move"
    )
    override_frozen_flag(p, "sync")
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[SyncOutcome]:
    if not args.dry_run:
        settle_before_change(args.name, args.prefix)
    prefix = select_env(args.name, args.prefix)
    if (args.update or args.update_all) and (args.locked or args.lock or args.frozen):
        raise UsageError(
            "--update moves packages within the recipe, and a lock pins them",
            hint="re-lock with 'envkit lock --update NAME', then sync --locked",
        )
    if not (args.frozen or args.update or args.update_all):  # the quick answer, before YAML, the solver or rich are loaded
        from envkit.commands.sync_quick import quick

        done = quick(prefix, locked=args.locked, lock=args.lock, dry_run=args.dry_run, override_frozen=args.override_frozen)
        if done is not None:
            return done
    # the installer child waits (reading the env's records) while this process loads the rest
    with contextlib.nullcontext(None) if args.dry_run else Installer() as early:
        return sync(
            prefix,
            locked=args.locked,
            lock=args.lock,
            frozen=args.frozen,
            update=tuple(args.update),
            update_all=args.update_all,
            dry_run=args.dry_run,
            probe=not args.no_probe,
            override_frozen=args.override_frozen,
            show=None if ui.as_json else (lambda changes: sync_changes_view(ui.out, changes)),
            confirm=(lambda changes: ui.ask("Apply these changes?")) if ui.interactive and not args.yes else None,
            installer=early,
        )


def sync_view(c: Out, out: SyncOutcome) -> None:
    if out.dry_run or out.refused:  # an applied sync was shown before it started
        sync_changes_view(c, out)
    if out.applied:
        c.print(f"[green]synced[/green] {escape(out.prefix)}")
    kernels_view(c, out)
    if out.probe is not None:
        probe_view(c, out.probe)


def must_be_a_conda_env(prefix: Path) -> None:
    """conda's mark of an env first: a sync would otherwise say a prefix conda refuses is in sync."""
    from envkit.prefix.history import not_an_env

    if (why := not_an_env(prefix)) is not None:
        raise UsageError(
            f"{prefix} is not a conda env as conda sees it: {why}", hint=f"recreate it: envkit create RECIPE -p {prefix} --force"
        )


def _record_or_fail(prefix: Path) -> EnvRecord:
    must_be_a_conda_env(prefix)
    record = read_record(prefix)
    if record is None or record.only_fixed:
        fixed = " (audit --fix only added its activation settings)" if record else ""
        raise UsageError(
            f"{prefix} was not made by envkit{fixed}: there is no recipe to sync it to",
            hint=f"create it with envkit create RECIPE -p {prefix} --force",
        )
    origin = record.recipe
    if origin is None or not origin.path:
        raise UsageError(f"{prefix}: its record names no recipe file", hint="recreate it with envkit create RECIPE --force")
    made_from = Path(origin.path)
    if not made_from.exists() and not made_from.is_symlink():
        source = origin.source or "file"
        remake = f"make the env from the new one: envkit create NEW -p {prefix} --force"
        if is_git_source_name(source) and all(entry.name != source for entry in read_git_sources()):
            raise UsageError(
                f"{prefix} was made from recipe '{origin.name}' of the '{source}' recipe repo, which was removed from envkit's sources",
                hint=f"add the repo again (envkit recipes add-source URL --name {source}), or {remake}",
            )
        raise UsageError(
            f"{prefix} was made from recipe '{origin.name}' at {made_from}, which is gone"
            + (f" from the '{source}' recipe repo" if is_git_source_name(source) else ""),
            hint=f"if it was renamed or moved, {remake}",
        )
    return record


def _must_be_writable(prefix: Path) -> None:
    """Before the journal: a sync changes the env in place, so one who may only read it (a team's
    env in /opt/envs) is told so, with the difference shown, and nothing is touched."""
    for where in (prefix, prefix / "conda-meta", prefix / "etc"):
        if where.is_dir() and not os.access(where, os.W_OK):
            owner = owner_name(where)
            raise UsageError(
                f"{where}: you may not write to it{f' (it belongs to {owner})' if owner else ''}, and a sync changes the env in place",
                hint="run the sync as the env's owner; --dry-run shows the difference to anyone",
            )


def sync(
    prefix: Path,
    *,
    locked: bool = False,
    lock: str | None = None,
    frozen: bool = False,
    update: tuple[str, ...] = (),
    update_all: bool = False,
    dry_run: bool = False,
    probe: bool = True,
    override_frozen: bool = False,
    show: Callable[[SyncOutcome], None] | None = None,
    confirm: Callable[[SyncOutcome], bool] | None = None,
    installer: Installer | None = None,
) -> Result[SyncOutcome]:
    """`show` sees the difference before anything changes (the CLI draws it); `confirm` may decline.
    The full look: a caller that wants the cheap no-op answer asks envkit.commands.sync_quick.quick
    first (the CLI does, before this module is loaded). `installer`: a child the caller started
    earlier still (the CLI does, before loading this module), used for the change and closed when
    it is done; the caller closes it too, for a sync that ends before (or a dry run). A sync keeps
    what envkit installed wherever the recipe allows, but for the `update` names (every one with
    `update_all`). An env marked frozen (CEP 22) is not changed unless `override_frozen`;
    a dry run only looks."""
    if not dry_run:
        must_not_be_frozen(prefix, "sync", override=override_frozen)
    record = _record_or_fail(prefix)
    if dry_run:
        from envkit.commands.sync_look import Moving, look

        moving = Moving(update, update_all)
        seen = look(prefix, record, locked=locked, lock=lock, frozen=frozen, dry_run=True, installer=None, moving=moving)
        refused = _refused(seen)
        return refused or Result("sync", seen.changes, messages=("dry run: nothing was changed",), view=sync_view)
    with env_lock(prefix):
        if recover(prefix):
            record = _record_or_fail(prefix)
        installer = installer or Installer()
        # before the sync machinery loads: the child's read, and its copy of the records for the
        # journal, run alongside
        draft = draft_path(prefix)
        installer.read(prefix, journal_draft=draft)
        try:
            with installer:
                from envkit.commands.sync_look import Moving  # with the solver: see the module's docstring

                moving = Moving(update, update_all)
                result, applied = _sync_locked(
                    prefix, record, installer, locked=locked, lock=lock, frozen=frozen, moving=moving, show=show, confirm=confirm
                )
        finally:  # the copy a sync that changed nothing did not need (a change renamed it: the journal)
            shutil.rmtree(draft, ignore_errors=True)
    if applied is None or not probe:
        return result
    # as after create, the probe runs once the env's lock is released
    from envkit.install.create import probe_and_keep
    from envkit.probe.runner import spec_for  # the probe's machinery only when it runs

    report, kept = probe_and_keep(prefix, spec_for(prefix, applied.recipe))
    messages = ((kept,) if kept else ()) + (() if report.healthy else ("synced, but the probe failed: see its checks",))
    code = ExitCode.OK if report.healthy else ExitCode.FINDINGS
    return Result("sync", replace(result.data, probe=report), int(code), messages, view=sync_view)


def _refused(seen: Look) -> Result[SyncOutcome] | None:
    blocking = [f for f in seen.changes.findings if f.severity == "error"]
    if not blocking:
        return None
    errors = tuple(f"{f.rule_id} {f.title}: {f.evidence}" for f in blocking)
    return Result(
        "sync",
        replace(seen.changes, refused=True),
        int(ExitCode.FINDINGS),
        ("the synced env would fail the audit: nothing was changed",),
        errors,
        view=sync_view,
    )


def _sync_locked(
    prefix: Path,
    record: EnvRecord,
    installer: Installer,
    *,
    locked: bool,
    lock: str | None,
    frozen: bool,
    moving: Moving,
    show: Callable[[SyncOutcome], None] | None,
    confirm: Callable[[SyncOutcome], bool] | None,
) -> tuple[Result[SyncOutcome], Look | None]:
    """The look and, unless nothing differs, the change; with the change's look when there was one."""
    from envkit.commands.sync_apply import apply, remember  # with the solver: see the module's docstring
    from envkit.commands.sync_look import look

    seen = look(prefix, record, locked=locked, lock=lock, frozen=frozen, dry_run=False, installer=installer, moving=moving)
    changes = seen.changes
    if (refused := _refused(seen)) is not None:
        return refused, None
    if not (changes.packages or changes.variables or changes.pip):
        rewritten: tuple[Path, ...] = ()
        with contextlib.suppress(PermissionError):  # one who may only read the env skips it
            rewritten = remember(prefix, record, seen)
        said = f"{prefix} already matches its {changes.source}"
        if rewritten:
            said += (
                f"; wrote {len(rewritten)} activation file(s) anew from its recorded settings (they were not as this envkit writes them): "
                + ", ".join(str(path.relative_to(prefix)) for path in rewritten)
            )
        return Result("sync", replace(changes, noop=True), messages=(said if rewritten else f"{said}: nothing to do",)), None
    if show is not None:
        show(changes)
    _must_be_writable(prefix)
    if confirm is not None and not confirm(changes):
        return Result("sync", replace(changes, aborted=True), messages=("aborted: nothing was changed",)), None
    return Result("sync", apply(prefix, record, seen, installer=installer), view=sync_view), seen
