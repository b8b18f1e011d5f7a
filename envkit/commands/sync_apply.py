"""The change `envkit sync` applies, all or nothing under a journal (envkit.install.journal):
conda packages through the installer child, then pip, then the activation, the history and the record."""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from envkit.activation.writer import (
    RecordedActivation,
    activation_section,
    carried_beside,
    own_tag,
    recorded_activation,
    remove_stale,
    write_files,
)
from envkit.commands.sync_look import Look, WheelMoves, names_in, pip_change, pip_dropped, recorded_wheel_names, spec_names
from envkit.core.errors import EnvkitError, FilesystemError, InstallError, Interrupted, os_refusal
from envkit.core.fsutil import read_exact
from envkit.core.notices import notify
from envkit.install import pkgcache
from envkit.install.changescope import ChangeScope
from envkit.install.create import recorded_specs
from envkit.install.inplace import Installer
from envkit.install.journal import rollback, stash, write_journal
from envkit.install.linkscope import change_folders, site_packages_of
from envkit.pip.install import pip_install, pip_put_back
from envkit.pip.repair import PipRepair, pip_state
from envkit.prefix import envs
from envkit.prefix.condameta import stamp
from envkit.prefix.envrecord import EnvRecord, InstalledWheel
from envkit.prefix.history import Linked, append_block, block, linked_in, requested_specs, spec_name, unmet
from envkit.prefix.installed import dist_files, pip_dists
from envkit.prefix.record import sync_journal_path, write_record
from envkit.solve.plan import Plan
from envkit.team.sync import SyncOutcome


def remember(prefix: Path, record: EnvRecord, seen: Look) -> tuple[Path, ...]:
    """Nothing differs: keep the new fingerprints, so that next time is quick, and write anew the
    activation scripts that are not as this envkit writes them (an older envkit's, or edited):
    same settings, this envkit's text. Returns the scripts written."""
    activation = recorded_activation(prefix, record)
    files = activation.files(prefix)
    stale = [f for f in files if read_exact(f.path) != f.text]
    write_files(stale)
    # the env still holds what the lock it was installed from installed: a sync to the recipe that
    # changed nothing keeps that link (envkit list tells when that lock moves on)
    write_record(
        prefix,
        replace(
            record,
            recipe=seen.provenance.recipe,
            lock=seen.provenance.lock or record.lock,
            activation=activation_section(activation, prefix, files),
            conda_meta=stamp(prefix),
        ),
    )
    return tuple(f.path for f in stale)


def _roll_back(prefix: Path, cache: Path) -> None:
    """The journal's rollback, where what stopped the sync may stop it too (a folder where an
    activation script goes): then the journal stays, the env's next envkit command rolls back
    again, and the user is told so in one line rather than by a traceback."""
    try:
        rollback(prefix, cache)
    except Exception as exc:
        pending = f"{prefix} is not rolled back all the way yet: envkit's next command on it finishes that"
        if isinstance(exc, OSError) and (told := os_refusal(exc, pending)):
            raise told from None
        raise InstallError(f"syncing {prefix} failed, and so did undoing it ({exc}); {pending}") from None


# radon cc 21: the steps of an all-or-nothing change under the journal, each with its rollback
def apply(prefix: Path, record: EnvRecord, seen: Look, *, installer: Installer) -> SyncOutcome:
    """All or nothing under a journal, with the installer child started ahead. The caller holds the
    env's lock and has settled what earlier runs left (envkit.install.transaction.recover)."""
    plan, cache = seen.plan, envs.pkgs_dir()
    try:
        pkgcache.verify_archives(seen.records, cache)
    except EnvkitError as exc:
        raise InstallError(f"{exc.message}; {prefix} was not changed", hint=exc.hint) from None
    try:
        write_journal(
            prefix,
            _scope(seen),
            folders=_journal_folders(prefix, cache, record, seen, installer),
            records_copied=installer.records_copied(prefix),
        )
    except OSError as exc:  # the draft is gone (write_journal), and nothing else was touched
        raise os_refusal(exc, f"{prefix} was not changed") or InstallError(
            f"cannot write the sync journal in {prefix} ({exc}); {prefix} was not changed"
        ) from None
    try:
        repair = seen.pip_repair
        if repair.extra:  # out of the env (into the journal) before conda links again what they overwrote
            _stash_wheels(prefix, {name for name, _ in repair.extra})
        if seen.python_move:  # out of the old python's site-packages while it is still the env's
            _stash_wheels(prefix, set(pip_dists(prefix)) & set(recorded_wheel_names(record)) | {name for name, _ in repair.adopt})
        linked_before, asked_before = linked_in(prefix), requested_specs(prefix)
        installer.change(seen.records, prefix, cache, [s.spec for s in plan.specs], relink=repair.relink)
        pip_installed = (
            _pip_for_new_python(prefix, plan, record) if seen.python_move else _sync_pip(prefix, plan, record, repair, seen.wheel_moves)
        )
        ours = {s.spec for s in record.specs or ()}
        _write_history(prefix, plan, linked_before, asked_before, ours)
        # the values the startup files carry stay until the audit finds them changed (EK037)
        recorded = recorded_activation(prefix, record)
        carried = carried_beside(plan.activation, recorded.carried)
        activation = RecordedActivation(plan.recipe, plan.activation, own_tag(prefix, recorded.tag), carried)
        files = activation.files(prefix)
        write_files(files)
        remove_stale(prefix, files)
        write_record(
            prefix,
            replace(
                record,
                recipe=seen.provenance.recipe,
                lock=seen.provenance.lock,
                updated=datetime.now(UTC).isoformat(timespec="seconds"),
                packages=plan.packages,
                activation=activation_section(activation, prefix, files),
                specs=recorded_specs(plan),
                pip=plan.pip_specs,
                pip_installed=tuple(InstalledWheel.from_report(w) for w in pip_installed),
                conda_meta=stamp(prefix),
                virtual_packages=tuple(plan.virtual_packages),
                assumed=tuple(plan.assumed),
                probe=None,
                healthy=None,
            ),
        )
        shutil.rmtree(sync_journal_path(prefix), ignore_errors=True)
    except BaseException as exc:
        _roll_back(prefix, cache)
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(f"interrupted: {prefix} was rolled back to what it was") from None
        back = f"{prefix} was rolled back to what it was"
        if isinstance(exc, EnvkitError):
            kind = FilesystemError if isinstance(exc, FilesystemError) else InstallError
            raise kind(f"{exc.message}; {back}", hint=exc.hint) from None
        if isinstance(exc, OSError) and (refused := os_refusal(exc, back)):
            raise refused from None
        raise InstallError(f"syncing {prefix} failed ({exc}); it was rolled back to what it was") from None
    if not seen.changes.variables:
        return replace(seen.changes, applied=True)
    # Jupyter runs no activation: the env's kernels carry its settings themselves (envkit.prefix.kernels)
    from envkit.prefix.kernels import give_settings, settings_of

    given = give_settings(prefix, settings_of(plan.activation, carried), before=settings_of(recorded.ops, recorded.carried))
    return replace(seen.changes, applied=True, kernels=given.written, kernels_failed=given.failed)


def _write_history(prefix: Path, plan: Plan, linked_before: set[Linked], asked_before: dict[str, str], ours: set[str]) -> None:
    """The revision conda would write for this change: what was unlinked and linked (from the
    records as they were and are, whoever changed them since envkit last did), and the recipe's
    specs as the env's requests from now on. A request conda kept for a name the recipe does not
    ask for (`conda install mkl=2024.1.0` before the sync) ends here, or the next `conda install`
    would honour it and move the env away from the recipe again; the sync names it (not those of
    envkit's own earlier specs, `ours`, that the recipe moved)."""
    specs = [s.spec for s in plan.specs]
    differing = unmet(asked_before, specs)
    dropped = [spec_name(asked) for asked, recipes in differing if recipes is None]
    replaced = [asked for asked, _ in differing if asked not in ours]
    linked_after = linked_in(prefix)
    added, gone = linked_after - linked_before, linked_before - linked_after
    if not added and not gone:
        if not differing and len(asked_before) == len(specs):
            return  # nothing conda would record
        # conda reads a block without +/- lines as an empty env: the specs ride on a relink of one package
        added = gone = set(sorted(linked_after, key=lambda d: d.dist())[:1])
    append_block(prefix, block(["envkit", "sync", "-p", str(prefix)], added, gone, specs, dropped=dropped))
    if replaced:
        notify(
            f"conda's request{'s' if len(replaced) > 1 else ''} {', '.join(replaced)} gave way to the recipe's specs (conda-meta/history)"
        )


def _scope(seen: Look) -> ChangeScope:
    """What the change sets out to write: the only new entries its rollback may remove."""
    wheels = names_in(seen.plan) if seen.plan.pip_specs else set()  # packaging only where there is pip
    wheels |= {name for name, _ in seen.pip_repair.adopt} | {str(m[0]) for m in seen.pip_repair.missing}
    dists = tuple(f"{r.name.normalized}-{r.version}-{r.build}" for r in seen.records)
    return ChangeScope(dists, site_packages_of(seen.records), tuple(sorted(wheels)))


def _journal_folders(prefix: Path, cache: Path, record: EnvRecord, seen: Look, installer: Installer) -> tuple[str, ...] | None:
    """The folders the change can add entries to (envkit.install.linkscope), for the journal to list; None
    (list every path) when pip changes too, since pip writes where its wheels say."""
    installed, sha256 = installer.installed(), installer.installed_sha256()
    if (
        seen.pip_repair.needed
        or pip_change(record, seen.plan)
        or seen.python_move
        or (seen.wheel_moves and seen.wheel_moves.install)
        or installed is None
        or sha256 is None
    ):
        return None
    return change_folders(prefix, cache, installed, sha256, seen.records)


# radon cc 23: pip's part of a sync: put back, move, install anew for a new python; one branch each
def _sync_pip(prefix: Path, plan: Plan, record: EnvRecord, repair: PipRepair, moves: WheelMoves | None) -> list[dict[str, str]]:
    """pip back to the record first (the wheels pip-installed since are stashed by then), then the
    recipe's pip changes from there: wheels it no longer names are stashed too, so a rollback puts
    them back without an index; then the wheels `--update` moves, the very files the look chose."""
    old = [w.as_report() for w in record.pip_installed]
    old += [{"name": name, "version": version, "url": ""} for name, version in repair.adopt]
    if repair.missing:
        # the URL each came from this time (the recorded one, or this machine's index by hash)
        back = {p["name"]: p for p in pip_put_back(prefix, PipRepair(missing=repair.missing))}
        old = [back.get(str(p["name"]), p) for p in old]
    changed = pip_change(record, plan)
    if not changed and not (moves and moves.names):
        return old
    dropped = pip_dropped(record, plan)
    _stash_wheels(prefix, dropped | _pip_resourced(record, plan))
    # pip reports only what it installed now: the wheels already there that it kept stay recorded
    kept = {str(p["name"]): p for p in old if str(p["name"]) not in dropped}
    if changed:
        kept.update({p["name"]: p for p in pip_install(prefix, plan.pip_specs, locked=plan.pip_locked)})
    if moves and moves.names:
        kept.update({p["name"]: p for p in moves.record})
        # a git wheel moved to another commit keeps its version: pip would take it for installed
        there = pip_dists(prefix)
        _stash_wheels(prefix, {m["name"] for m in moves.install if m["name"] in there and there[m["name"]].version == m["version"]})
        # pip's own report last: where a URL failed, the same file came from this machine's index
        kept.update({p["name"]: p for p in pip_install(prefix, tuple(f"{m['name']} @ {m['url']}" for m in moves.install), locked=True)})
    have = pip_state(prefix)
    return sorted((p for p in kept.values() if (str(p["name"]), str(p["version"])) in have), key=lambda p: str(p["name"]))


def _pip_for_new_python(prefix: Path, plan: Plan, record: EnvRecord) -> list[dict[str, str]]:
    """The pip list installed anew into a python of another minor version (the old one's wheels
    are in the journal by now): at the versions the record has where pip offers them for this
    python, else as pip resolves them afresh; a lock's exact files as the lock has them."""
    recorded = {w.name: w.as_report() for w in record.pip_installed}
    keep = tuple((name, p["version"]) for name, p in recorded.items())
    # pip reports only what it installed: a wheel the new python already had (a move back to a
    # python whose site-packages conda left) stays recorded as it was
    recorded.update({p["name"]: p for p in pip_install(prefix, plan.pip_specs, locked=plan.pip_locked, keep=keep)})
    have = pip_state(prefix)
    return sorted((p for p in recorded.values() if (str(p["name"]), str(p.get("version"))) in have), key=lambda p: str(p["name"]))


def _pip_resourced(record: EnvRecord, plan: Plan) -> set[str]:
    """The wheels the pip list still names but takes from elsewhere now: to or from a URL
    (`proj==0.1` -> `proj @ git+URL@main`), or another commit or file (a lock that moved a git
    wheel's commit). pip takes an installed wheel of a fitting version for the new one, whatever it
    came from, so these go into the journal first and pip installs them from their new source."""
    from envkit.pip.resolve import direct_references  # packaging: loaded where pip runs

    old_specs = record.pip

    def sources(specs: tuple[str, ...]) -> dict[str, str]:
        # a file pinned by hash is the same file wherever its URL says it is (another mirror)
        return {name: url.partition("#sha256=")[2] or url for name, (_, url, _) in direct_references(specs).items()}

    before, after = sources(old_specs), sources(plan.pip_specs)
    return {name for name in spec_names(old_specs) & names_in(plan) if before.get(name) != after.get(name)}


def _stash_wheels(prefix: Path, names: set[str]) -> None:
    dists = pip_dists(prefix)
    stash(prefix, tuple(path for name in sorted(names) if name in dists for path in dist_files(prefix, dists[name])))
