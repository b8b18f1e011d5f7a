"""`envkit sync`: bring an existing env to its recipe (or its lock) in place. Shows the difference
first; applies it all or nothing (envkit.journal); probes the result."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from envkit import envs
from envkit.activation.writer import RecordedActivation, activation_json, recorded_activation, remove_stale, write_files
from envkit.audit.engine import audit_plan
from envkit.commands import Result
from envkit.commands.create import CreateRequest, plan_from_lock, recipe_provenance
from envkit.commands.sync_quick import recorded_lock
from envkit.create import pip_install, update_record_probe, verify_archives
from envkit.errors import EnvkitError, ExitCode, InstallError, Interrupted, UsageError
from envkit.history import Linked, append_block, block
from envkit.inplace import Installer
from envkit.installed import read_conda_meta
from envkit.journal import rollback, write_journal
from envkit.recipe.compile import compile_recipe
from envkit.recipe.consistency import require_consistent
from envkit.recipe.loader import load_recorded
from envkit.recipe.sources import is_git_source_name
from envkit.record import read_record, sync_journal_path, write_record
from envkit.solve import Plan, solve_recipe
from envkit.sync import SyncOutcome, diff_packages, diff_variables
from envkit.transaction import env_lock, recover


def _record_or_fail(prefix: Path) -> dict[str, Any]:
    record = read_record(prefix)
    if record is None:
        raise UsageError(
            f"{prefix} was not made by envkit: there is no recipe to sync it to",
            hint="create it with envkit create RECIPE -p PREFIX --force",
        )
    return record


def _must_be_writable(prefix: Path) -> None:
    """Before the journal: a sync changes the env in place, so one who may only read it (a team's
    env in /opt/envs) is told so, with the difference shown, and nothing is touched."""
    for where in (prefix, prefix / "conda-meta", prefix / "etc"):
        if where.is_dir() and not os.access(where, os.W_OK):
            owner = _owner(where)
            raise UsageError(
                f"{where}: you may not write to it{f' (it belongs to {owner})' if owner else ''}, and a sync changes the env in place",
                hint="run the sync as the env's owner; --dry-run shows the difference to anyone",
            )


def _owner(path: Path) -> str | None:
    try:
        import pwd

        return pwd.getpwuid(path.stat().st_uid).pw_name
    except (ImportError, KeyError, OSError):
        return None


def _installed(prefix: Path) -> dict[str, str]:
    packages, unreadable = read_conda_meta(prefix)
    if unreadable:
        bad = unreadable[0]
        if bad.denied:
            raise UsageError(
                f"{prefix}: you may not read {bad.path}", hint="see 'envkit audit --explain EK030'; the env's owner can fix it"
            )
        raise UsageError(f"{prefix}: {bad.path} is not a readable package record", hint="see 'envkit audit' (EK022)")
    return {name: f"{p.version} {p.build}" for name, p in packages.items()}


def sync(
    prefix: Path,
    *,
    locked: bool = False,
    lock: str | None = None,
    frozen: bool = False,
    dry_run: bool = False,
    probe: bool = True,
    show: Callable[[SyncOutcome], None] | None = None,
    confirm: Callable[[SyncOutcome], bool] | None = None,
) -> Result:
    """`show` sees the difference before anything changes (the CLI draws it); `confirm` may decline.
    The full look: a caller that wants the cheap no-op answer asks envkit.commands.sync_quick.quick
    first (the CLI does, before this module and its imports are loaded)."""
    record = _record_or_fail(prefix)
    origin = record.get("recipe") or {}
    if not isinstance(origin, dict) or not origin.get("path"):
        raise UsageError(f"{prefix}: its record names no recipe file", hint="recreate it with envkit create RECIPE --force")
    made_from = Path(str(origin["path"]))
    if not made_from.exists() and not made_from.is_symlink():
        source = str(origin.get("source") or "file")
        raise UsageError(
            f"{prefix} was made from recipe '{origin.get('name')}' at {made_from}, which is gone"
            + (f" from the '{source}' recipe repo" if is_git_source_name(source) else ""),
            hint=f"if it was renamed or moved, make the env from the new one: envkit create NEW -p {prefix} --force",
        )
    installer = None if dry_run else Installer(prefix)  # its start-up overlaps the solve and journal below
    try:
        recipe = load_recorded(str(origin.get("source") or "file"), str(origin["path"]))
        recipe_findings = require_consistent(recipe)
        compiled = compile_recipe(recipe)
        warnings = tuple(f"{f.rule.id}: {f.message}" for f in recipe_findings)
        lock_path = recorded_lock(record, lock) if (locked or lock or frozen) else None
        lock_info: dict[str, Any] | None = None
        if lock_path is not None:
            request = CreateRequest(str(origin["path"]), prefix=str(prefix), locked=True, lock=str(lock_path), frozen=frozen)
            outcome, lock_info = plan_from_lock(request, recipe, compiled, prefix, warnings)
        else:
            # the channels the env was made from, mirrors included
            recorded = {
                str(c["name"]): str(c["url"]) for c in record.get("channels", []) if isinstance(c, dict) and c.get("name") != c.get("url")
            }
            outcome = solve_recipe(compiled, prefix, extra_channels=[], override_channels=False, mirrors=recorded, warnings=warnings)
        plan = outcome.plan
        installed = _installed(prefix)
        planned = {p.name: f"{p.version} {p.build}" for p in plan.packages}
        old_ops = recorded_activation(prefix, record).ops
        changes = SyncOutcome(
            str(prefix),
            "lock" if lock_path else "recipe",
            noop=False,
            dry_run=dry_run,
            packages=diff_packages(installed, planned),
            variables=diff_variables(old_ops, plan.activation),
            pip=_pip_change(record, plan),
            findings=tuple(audit_plan(plan, recipe.force)),
        )
        blocking = [f for f in changes.findings if f.severity == "error"]
        if blocking:
            errors = tuple(f"{f.rule_id} {f.title}: {f.evidence}" for f in blocking)
            return Result(
                "sync",
                replace(changes, refused=True),
                int(ExitCode.FINDINGS),
                ("the synced env would fail the audit: nothing was changed",),
                errors,
            )
        provenance = {"recipe": recipe_provenance(recipe, compiled), "lock": lock_info}
        if not (changes.packages or changes.variables or changes.pip):
            if not dry_run:
                # remember the new fingerprints, so next time is quick; one who may only read the env skips it
                with env_lock(prefix), contextlib.suppress(PermissionError):
                    write_record(prefix, {**record, **provenance})
            return Result("sync", replace(changes, noop=True), messages=(f"{prefix} already matches its {changes.source}: nothing to do",))
        if dry_run:
            return Result("sync", changes, messages=("dry run: nothing was changed",))
        if show is not None:
            show(changes)
        _must_be_writable(prefix)
        if confirm is not None and not confirm(changes):
            return Result("sync", replace(changes, aborted=True), messages=("aborted: nothing was changed",))
        assert installer is not None  # started unless a dry run, which returned above
        apply(prefix, plan, outcome.records, record, provenance, installer=installer)
        result = replace(changes, applied=True)
        if not probe:
            return Result("sync", result)
        from envkit.probe.runner import run_probe, spec_for  # the probe's machinery only when it runs

        report = run_probe(prefix, spec_for(prefix, recipe))
        update_record_probe(prefix, report.summary(), report.healthy)
        code = ExitCode.OK if report.healthy else ExitCode.FINDINGS
        return Result(
            "sync", replace(result, probe=report), int(code), () if report.healthy else ("synced, but the probe failed: see its checks",)
        )
    finally:
        if installer is not None:
            installer.close()


def _pip_change(record: dict[str, Any], plan: Plan) -> tuple[str, ...]:
    if plan.pip_locked:
        before = {str(p.get("url")) for p in record.get("pip_installed", []) if isinstance(p, dict)}
        after = {spec.partition(" @ ")[2] for spec in plan.pip_specs}
    else:
        before, after = set(record.get("pip") or []), set(plan.pip_specs)
    return tuple([f"+ {s}" for s in sorted(after - before)] + [f"- {s}" for s in sorted(before - after)])


def apply(
    prefix: Path, plan: Plan, records: list[Any], record: dict[str, Any], provenance: dict[str, Any], *, installer: Installer
) -> None:
    """All or nothing, under the env's lock and a journal (envkit.journal), with the installer child
    sync started ahead."""
    cache = envs.pkgs_dir()
    with env_lock(prefix):
        recover(prefix)
        try:
            verify_archives(records, cache)
        except EnvkitError as exc:
            raise InstallError(f"{exc.message}; {prefix} was not changed", hint=exc.hint) from None
        write_journal(prefix)
        try:
            installer.change(records, prefix, cache, [s.spec for s in plan.specs])
            pip_installed = _sync_pip(prefix, plan, record)
            before = {(p["name"], p["version"], p["build"]): p for p in record.get("packages", []) if isinstance(p, dict)}
            after = {(p.name, p.version, p.build): p for p in plan.packages}
            added = [Linked(p.channel, p.subdir, p.name, p.version, p.build) for key, p in after.items() if key not in before]
            gone = [Linked(str(p.get("channel", "")), str(p.get("subdir", "")), *key) for key, p in before.items() if key not in after]
            append_block(prefix, block(["envkit", "sync", "-p", str(prefix)], added, gone, [s.spec for s in plan.specs]))
            activation = RecordedActivation(plan.recipe, plan.activation, recorded_activation(prefix, record).tag)
            files = activation.files(prefix)
            write_files(files)
            remove_stale(prefix, files)
            write_record(
                prefix,
                {
                    **record,
                    **provenance,
                    "updated": datetime.now(UTC).isoformat(timespec="seconds"),
                    "packages": [asdict(p) for p in plan.packages],
                    "activation": activation_json(activation, prefix, files),
                    "pip": list(plan.pip_specs),
                    "pip_installed": pip_installed,
                    "virtual_packages": list(plan.virtual_packages),
                    "assumed": list(plan.assumed),
                    "probe": None,
                    "healthy": None,
                },
            )
            shutil.rmtree(sync_journal_path(prefix), ignore_errors=True)
        except BaseException as exc:
            rollback(prefix, cache)
            if isinstance(exc, KeyboardInterrupt):
                raise Interrupted(f"interrupted: {prefix} was rolled back to what it was") from None
            if isinstance(exc, EnvkitError):
                raise InstallError(f"{exc.message}; {prefix} was rolled back to what it was", hint=exc.hint) from None
            raise InstallError(f"syncing {prefix} failed ({exc}); it was rolled back to what it was") from None


def _sync_pip(prefix: Path, plan: Plan, record: dict[str, Any]) -> list[dict[str, str]]:
    old = [p for p in record.get("pip_installed", []) if isinstance(p, dict)]
    if _pip_change(record, plan) == ():
        return old
    gone = sorted({str(p["name"]) for p in old} - set(_names(plan)))
    if gone:
        subprocess.run(
            [str(prefix / "bin" / "python"), "-m", "pip", "uninstall", "--yes", *gone], capture_output=True, check=False, timeout=600
        )
    return pip_install(prefix, plan.pip_specs, locked=plan.pip_locked)


def _names(plan: Plan) -> set[str]:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out = set()
    for spec in plan.pip_specs:
        try:
            out.add(str(canonicalize_name(Requirement(spec).name)))
        except InvalidRequirement:  # a locked URL: its file name starts with the name
            out.add(str(canonicalize_name(spec.rsplit("/", 1)[-1].split("-", 1)[0])))
    return out
