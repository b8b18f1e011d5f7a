"""The full look of `envkit sync` (recipe or lock -> plan -> the difference) and the change itself,
all or nothing under a journal (envkit.install.journal). The solver, YAML and rattler load with this
module: envkit.commands.sync imports it once the installer child has started, so that the child's
own start-up runs alongside."""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from envkit.activation.writer import (
    RecordedActivation,
    activation_json,
    carried_beside,
    own_tag,
    recorded_activation,
    remove_stale,
    write_files,
)
from envkit.audit.engine import audit_plan
from envkit.audit.recipe_rules import plan_warnings
from envkit.commands.sync_quick import recorded_lock
from envkit.core.changes import diff_packages
from envkit.core.errors import EnvkitError, FilesystemError, InstallError, Interrupted, UsageError, os_refusal
from envkit.core.fsutil import read_exact
from envkit.core.notices import notify
from envkit.install import pkgcache
from envkit.install.changescope import ChangeScope
from envkit.install.create import specs_json
from envkit.install.inplace import Installer
from envkit.install.journal import rollback, stash, write_journal
from envkit.install.linkscope import change_folders, site_packages_of
from envkit.pip.install import pip_file, pip_install, pip_newest, pip_put_back, pip_refs, pip_upgrades
from envkit.pip.repair import PipRepair, needed_wheels, pip_repair, pip_state
from envkit.prefix import envs
from envkit.prefix.condameta import stamp
from envkit.prefix.history import Linked, append_block, block, linked_in, requested_specs, spec_name, unmet
from envkit.prefix.installed import PipDist, dist_files, pip_dists, read_conda_meta
from envkit.prefix.pipurls import commit_shown, pip_shown, url_commit
from envkit.prefix.record import sync_journal_path, write_record
from envkit.recipe.compile import compile_recipe
from envkit.recipe.digest import recipe_provenance
from envkit.recipe.loader import load_recorded
from envkit.recipe.model import Recipe
from envkit.solve import backend
from envkit.solve.channels import recorded_channels
from envkit.solve.plan import Plan, solve_recipe
from envkit.team.sync import SyncOutcome, diff_variables


@dataclass(frozen=True)
class Look:
    """What a sync would do, before it does anything."""

    recipe: Recipe
    plan: Plan
    records: list[Any]  # rattler's, for the installer
    changes: SyncOutcome
    provenance: dict[str, Any]  # the record's "recipe" and "lock" entries after the sync
    pip_repair: PipRepair  # pip's changes since the record, undone before the recipe's own
    wheel_moves: WheelMoves | None = None  # what --update does to pip's wheels
    python_move: tuple[str, str] | None = None  # (old X.Y, new X.Y) where the change moves python and pip has wheels


@dataclass(frozen=True)
class Moving:
    """What a sync of a recipe lets move past what envkit installed: the named packages (conda's,
    or pip's wheels), or every one; the rest stays where the recipe allows it (conda install keeps
    what is installed, pip install what satisfies)."""

    names: tuple[str, ...] = ()
    everything: bool = False

    def preferred(self, record: dict[str, Any]) -> list[backend.Preferred]:
        """The recorded packages a solve keeps; a name to move that the env has neither as a conda
        package nor as a pip wheel is a typo."""
        if self.everything:
            return []
        recorded = [p for p in record.get("packages", []) if isinstance(p, dict) and p.get("url")]
        names = {str(p["name"]) for p in recorded}
        wheels = set(recorded_wheel_names(record))
        unknown = [n for n in self.names if n.lower() not in names and _canonical(n) not in wheels]
        if unknown:
            raise UsageError(
                f"--update {', '.join(unknown)}: envkit installed no package of that name in this env",
                hint="give conda's names as 'conda list' shows them and pip's as 'pip list' does, or --update-all",
            )
        moving = {n.lower() for n in self.names}
        return [(str(p["name"]), str(p["version"]), str(p["build"]), str(p["url"])) for p in recorded if str(p["name"]) not in moving]

    def wheels(self, record: dict[str, Any]) -> tuple[str, ...]:
        """The recorded pip wheels this sync moves (their canonical names)."""
        recorded = recorded_wheel_names(record)
        if self.everything:
            return recorded
        named = {_canonical(n) for n in self.names} if self.names else set()
        return tuple(n for n in recorded if n in named)


def recorded_wheel_names(record: dict[str, Any]) -> tuple[str, ...]:
    """The wheels envkit installed, by their canonical names (as the record keeps them)."""
    return tuple(sorted({str(p.get("name")) for p in record.get("pip_installed", []) if isinstance(p, dict) and p.get("name")}))


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name  # packaging: loaded for --update only

    return str(canonicalize_name(name))


@dataclass(frozen=True)
class WheelMoves:
    """What `--update` does to pip's wheels: the files pip chose, installed by URL (--no-deps), and
    the record entry each wheel let move ends with. One already at what pip would choose (a
    `pip install -U` by hand since) stays as it is, recorded now, not put back first."""

    names: tuple[str, ...] = ()  # the recorded wheels let move
    install: tuple[dict[str, str], ...] = ()  # name, version, URL with its hash
    record: tuple[dict[str, str], ...] = ()  # name, version, URL ("" for one installed by hand)
    lines: tuple[str, ...] = ()
    required: frozenset[str] = frozenset()  # what the installed files require


def look(
    prefix: Path,
    record: dict[str, Any],
    *,
    locked: bool,
    lock: str | None,
    frozen: bool,
    dry_run: bool,
    installer: Installer | None,
    moving: Moving | None = None,
) -> Look:
    """The plan from the recorded recipe (or its lock) and its difference from the env; `installer`
    (when one was started) has read the env's records already."""
    origin = record["recipe"]
    recipe = load_recorded(str(origin.get("source") or "file"), str(origin["path"]))
    warnings = plan_warnings(recipe, backend.native_platform())
    compiled = compile_recipe(recipe)
    lock_path = recorded_lock(record, lock) if (locked or lock or frozen) else None
    lock_info: dict[str, Any] | None = None
    # the channels the env was made from, mirrors included
    recorded = {c.name: c.url for c in recorded_channels(record.get("channels")) if c.name != c.url}
    if lock_path is not None:
        from envkit.commands.create import CreateRequest, plan_from_lock  # create's machinery: for a lock only

        request = CreateRequest(
            str(origin["path"]), prefix=str(prefix), mirrors=tuple(recorded.items()), locked=True, lock=str(lock_path), frozen=frozen
        )
        outcome, lock_info = plan_from_lock(request, recipe, compiled, prefix, warnings)
    else:
        # a changed recipe moves what it must: the rest stays as envkit installed it (not at the
        # channel's newest), as conda install keeps what is installed
        prefer = (moving or Moving()).preferred(record)
        outcome = solve_recipe(
            compiled, prefix, extra_channels=[], override_channels=False, mirrors=recorded, warnings=warnings, prefer=prefer
        )
    plan = outcome.plan
    installed = _installed(prefix, installer)
    planned = {p.name: f"{p.version} {p.build}" for p in plan.packages}
    repair = pip_repair(prefix, record, lambda: _names(plan))  # packaging loads only if asked
    if dropped := _pip_dropped(record, plan):  # not put back only to be taken away again
        repair = replace(repair, missing=tuple(m for m in repair.missing if m[0] not in dropped))
    python_move = _python_move(installed, planned) if recorded_wheel_names(record) else None
    if python_move:  # every wheel is installed anew: none is put back first
        hand_moved = {name for name, *_ in repair.moved}
        repair = replace(repair, missing=(), extra=tuple(e for e in repair.extra if e[0] not in hand_moved), moved=())
    moves = WheelMoves() if lock_path is not None or python_move else _wheel_moves(prefix, plan, record, moving or Moving(), dropped)
    if moves.names:
        repair = _repair_leaving(prefix, repair, moves)
    changes = SyncOutcome(
        str(prefix),
        "lock" if lock_path else "recipe",
        noop=False,
        dry_run=dry_run,
        packages=diff_packages(installed, planned),
        variables=diff_variables(recorded_activation(prefix, record).ops, plan.activation),
        pip=repair.lines() + _pip_change(record, plan) + moves.lines + _python_move_lines(record, python_move),
        findings=tuple(audit_plan(plan, recipe.force)),
        lock_set_aside=None if lock_path else _lock_made_from(record),
        warnings=warnings,
    )
    provenance = {"recipe": recipe_provenance(recipe), "lock": lock_info}
    return Look(recipe, plan, outcome.records, changes, provenance, repair, moves, python_move)


def _python_move(installed: dict[str, str], planned: dict[str, str]) -> tuple[str, str] | None:
    """(old X.Y, new X.Y) where the change moves python to another minor version: its wheels are in
    the old python's site-packages, which the new one does not read."""
    old, new = (".".join(v.split(" ")[0].split(".")[:2]) if v else "" for v in (installed.get("python"), planned.get("python")))
    return (old, new) if old and new and old != new else None


def _python_move_lines(record: dict[str, Any], move: tuple[str, str] | None) -> tuple[str, ...]:
    if move is None:
        return ()
    wheels = ", ".join(f"{p.get('name')} {p.get('version')}" for p in record.get("pip_installed", []) if isinstance(p, dict))
    return (f"~ installed anew for python {move[1]} (the versions kept where pip has them for it): {wheels}",)


def _wheel_moves(prefix: Path, plan: Plan, record: dict[str, Any], moving: Moving, dropped: set[str]) -> WheelMoves:
    """The wheels `--update` moves, and what they need: pip's own choice in the env, with conda's
    python packages and every other wheel held where they are (the recipe's pip list still met).
    What a changed pip list no longer names (`dropped`) goes, and is not moved first."""
    wheels = tuple(w for w in moving.wheels(record) if w not in dropped)
    named = () if moving.everything else tuple(w for w in wheels if w not in _names(plan))
    if not wheels or not (plan.pip_specs or named):
        return WheelMoves()
    from envkit.pip.resolve import direct_references  # packaging: loaded where pip runs

    dists = pip_dists(prefix)
    hold = tuple((name, dist.version) for name, dist in dists.items() if name not in wheels)
    recorded = {str(p.get("name")): p for p in record.get("pip_installed", []) if isinstance(p, dict)}
    direct = {name: ref for name, ref in direct_references(plan.pip_specs).items() if name in wheels}
    refs = {name: spec for name, (spec, _, vcs) in direct.items() if vcs}  # a branch's head, not an index's newest
    plain = tuple(w for w in wheels if w not in direct)  # a file's URL is its own pin: nothing to ask an index
    for name in sorted(n for n in direct if n not in refs and not moving.everything):
        notify(f"{name} comes from the file the recipe names ({direct[name][0]}): it moves when the recipe names another")
    install, required = pip_upgrades(prefix, plan.pip_specs, named, hold, eager=moving.everything) if plain else ([], set())
    if refs:
        at_refs, needs = pip_refs(prefix, tuple(refs.values()), hold)
        install += [m for m in at_refs if not _already_there(m, dists, recorded)]
        required |= needs
    chosen = {m["name"]: m for m in install}
    ends: dict[str, dict[str, str]] = {}
    for wheel in wheels:
        if wheel in chosen:
            ends[wheel] = chosen[wheel]
        elif wheel in dists:  # pip keeps what is there: what envkit installed, or a newer one installed by hand since
            old, dist = recorded.get(wheel, {}), dists[wheel]
            url = dist.reinstall_url(str(old.get("url") or ""), str(old.get("version")))  # a commit pip put there since, too
            if not url and str(old.get("version")) != dist.version:  # a newer one from an index: this machine's file for it
                url = pip_file(prefix, wheel, dist.version)
            ends[wheel] = {"name": wheel, "version": dist.version, "url": url}
    ends.update({name: m for name, m in chosen.items() if name not in ends})  # what the moved ones now need
    newest = pip_newest(prefix, plain) if plain else {}  # an index that does not answer is said, not taken for "nothing newer"
    held = tuple(w for w in plain if w in newest and newest[w] != ends.get(w, {}).get("version"))
    if held and not moving.everything:
        _say_what_holds_back(prefix, plan, record=record, wheels=held, named=named, ends=ends)
    lines = _move_lines(record, plan, dists, wheels, ends)
    return WheelMoves(wheels, tuple(install), tuple(ends[n] for n in sorted(ends)), lines, frozenset(required))


def _already_there(move: dict[str, str], dists: dict[str, PipDist], recorded: dict[str, Any]) -> bool:
    """A git wheel at the commit pip has in the env now (moved by hand since, perhaps: the record's
    is not the one there), another wheel as the record has it."""
    commit = url_commit(move["url"])
    if commit is None:
        return bool(move["url"] == recorded.get(move["name"], {}).get("url"))
    return move["name"] in dists and dists[move["name"]].commit == commit


def _repair_leaving(prefix: Path, repair: PipRepair, moves: WheelMoves) -> PipRepair:
    """The put-back, less the wheels that move (what they end as is the move's to say), and keeping
    (recording) a wheel pip-installed by hand since that a moved one now requires."""
    needed = needed_wheels(prefix, pip_dists(prefix), set(moves.required)) if moves.required else set()
    extra = tuple(e for e in repair.extra if e[0] not in moves.names and e[0] not in needed)
    return replace(
        repair,
        extra=extra,
        missing=tuple(m for m in repair.missing if m[0] not in moves.names),
        over=tuple(o for o in repair.over if o[0] in {name for name, _ in extra}),
        adopt=repair.adopt + tuple(e for e in repair.extra if e[0] not in moves.names and e[0] in needed),
    )


def _say_what_holds_back(
    prefix: Path, plan: Plan, *, record: dict[str, Any], wheels: tuple[str, ...], named: tuple[str, ...], ends: dict[str, dict[str, str]]
) -> None:
    """A named wheel whose newer version needs other wheels moved stays where the held ones allow,
    as a re-lock's does; pip would not say why, so the same move with only conda's packages held
    names what would have to move with it (`wheels`: those that did not reach the newest)."""
    recorded = set(recorded_wheel_names(record))
    conda_held = tuple((name, dist.version) for name, dist in pip_dists(prefix).items() if name not in recorded)
    free = {m["name"]: m["version"] for m in pip_upgrades(prefix, plan.pip_specs, named, conda_held, eager=False)[0]}
    for wheel in wheels:
        if wheel in free and free[wheel] != ends.get(wheel, {}).get("version"):
            others = sorted(n for n in free if n != wheel and n not in wheels and n in recorded)
            notify(
                f"{wheel} {free[wheel]} needs "
                + (f"{', '.join(others)} to move with it" if others else "other wheels to move with it")
                + f": it stays at what the rest allow; to move them too, sync {' '.join(f'--update {n}' for n in [wheel, *others])} (or --update-all)"
            )


def _move_lines(
    record: dict[str, Any], plan: Plan, dists: dict[str, Any], wheels: tuple[str, ...], ends: dict[str, dict[str, str]]
) -> tuple[str, ...]:
    """Against the record: `~ name old -> new` for a wheel moved (the env may have it already, by
    hand), the put-back of one that stays but was changed by hand, `+ name version` for one the
    moved ones now need (not for a new requirement of the recipe's: its own `+ spec` line shows it)."""
    old = {
        str(p.get("name")): pip_shown(str(p.get("version")), str(p.get("url") or ""))
        for p in record.get("pip_installed", [])
        if isinstance(p, dict)
    }
    asked = _spec_names(tuple(s for s in plan.pip_specs if s not in set(record.get("pip") or [])))
    lines = []
    for name in sorted(ends):
        new, have = ends[name]["version"], dists[name].version if name in dists else None
        shown = pip_shown(new, ends[name]["url"])
        if name not in old:
            if name not in asked and have != new:
                lines.append(f"+ {name} {new}")
        elif shown != old[name]:
            lines.append(f"~ {name} {old[name]} -> {shown}")
        elif have != new:
            lines += ([f"- {name} {have} (pip-installed since)"] if have else []) + [f"+ {name} {new} (as envkit installed it)"]
        elif (commit := url_commit(ends[name]["url"])) and dists[name].commit != commit:  # a commit moved by hand, put back
            lines.append(f"~ {name} {commit_shown(new, dists[name].commit)} -> {shown} (as envkit installed it)")
    return tuple(lines)


def _lock_made_from(record: dict[str, Any]) -> str | None:
    path = (record.get("lock") or {}).get("path")
    return path if isinstance(path, str) else None


def _installed(prefix: Path, installer: Installer | None) -> dict[str, str]:
    """name -> "version build": the child's read when it read every record, else conda-meta read
    here, so that a record nobody can read is named."""
    if installer is not None and (read := installer.installed()) is not None:
        return read
    packages, unreadable = read_conda_meta(prefix)
    if unreadable:
        bad = unreadable[0]
        if bad.denied:
            raise UsageError(
                f"{prefix}: you may not read {bad.path}", hint="see 'envkit audit --explain EK030'; the env's owner can fix it"
            )
        raise UsageError(f"{prefix}: {bad.path} is not a readable package record", hint="see 'envkit audit' (EK022)")
    return {name: f"{p.version} {p.build}" for name, p in packages.items()}


def _pip_change(record: dict[str, Any], plan: Plan) -> tuple[str, ...]:
    if plan.pip_locked:
        # a locked wheel is its file: the one the env has may have come from another URL (this
        # machine's index, envkit.pip.install), and is the same while its name and hash are
        before = {
            _locked_file(str(p.get("name")), str(p.get("url"))): str(p.get("url"))
            for p in record.get("pip_installed", [])
            if isinstance(p, dict)
        }
        after = {_locked_file(*spec.split(" @ ", 1)): spec.partition(" @ ")[2] for spec in plan.pip_specs}
        return tuple(
            [f"+ {after[k]}" for k in sorted(after.keys() - before.keys())]
            + [f"- {before[k]}" for k in sorted(before.keys() - after.keys())]
        )
    old, new = set(record.get("pip") or []), set(plan.pip_specs)
    return tuple([f"+ {s}" for s in sorted(new - old)] + [f"- {s}" for s in sorted(old - new)])


def _locked_file(name: str, url: str) -> tuple[str, str]:
    from packaging.utils import canonicalize_name  # packaging: loaded for pip lists only

    sha256 = url.partition("#sha256=")[2]
    return canonicalize_name(name.strip()), sha256 or url.strip()


def remember(prefix: Path, record: dict[str, Any], seen: Look) -> tuple[Path, ...]:
    """Nothing differs: keep the new fingerprints, so that next time is quick, and write anew the
    activation scripts that are not as this envkit writes them (an older envkit's, or edited):
    same settings, this envkit's text. Returns the scripts written."""
    activation = recorded_activation(prefix, record)
    files = activation.files(prefix)
    stale = [f for f in files if read_exact(f.path) != f.text]
    write_files(stale)
    # the env still holds what the lock it was installed from installed: a sync to the recipe that
    # changed nothing keeps that link (envkit list tells when that lock moves on)
    provenance = {**seen.provenance, "lock": seen.provenance.get("lock") or record.get("lock")}
    write_record(prefix, {**record, **provenance, "activation": activation_json(activation, prefix, files), "conda_meta": stamp(prefix)})
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


def apply(prefix: Path, record: dict[str, Any], seen: Look, *, installer: Installer) -> SyncOutcome:
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
        ours = {str(s.get("spec")) for s in record.get("specs") or [] if isinstance(s, dict)}
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
            {
                **record,
                **seen.provenance,
                "updated": datetime.now(UTC).isoformat(timespec="seconds"),
                "packages": [asdict(p) for p in plan.packages],
                "activation": activation_json(activation, prefix, files),
                "specs": specs_json(plan),
                "pip": list(plan.pip_specs),
                "pip_installed": pip_installed,
                "conda_meta": stamp(prefix),
                "virtual_packages": list(plan.virtual_packages),
                "assumed": list(plan.assumed),
                "probe": None,
                "healthy": None,
            },
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
    wheels = _names(seen.plan) if seen.plan.pip_specs else set()  # packaging only where there is pip
    wheels |= {name for name, _ in seen.pip_repair.adopt} | {str(m[0]) for m in seen.pip_repair.missing}
    dists = tuple(f"{r.name.normalized}-{r.version}-{r.build}" for r in seen.records)
    return ChangeScope(dists, site_packages_of(seen.records), tuple(sorted(wheels)))


def _journal_folders(prefix: Path, cache: Path, record: dict[str, Any], seen: Look, installer: Installer) -> tuple[str, ...] | None:
    """The folders the change can add entries to (envkit.install.linkscope), for the journal to list; None
    (list every path) when pip changes too, since pip writes where its wheels say."""
    installed, sha256 = installer.installed(), installer.installed_sha256()
    if (
        seen.pip_repair.needed
        or _pip_change(record, seen.plan)
        or seen.python_move
        or (seen.wheel_moves and seen.wheel_moves.install)
        or installed is None
        or sha256 is None
    ):
        return None
    return change_folders(prefix, cache, installed, sha256, seen.records)


def _sync_pip(prefix: Path, plan: Plan, record: dict[str, Any], repair: PipRepair, moves: WheelMoves | None) -> list[dict[str, str]]:
    """pip back to the record first (the wheels pip-installed since are stashed by then), then the
    recipe's pip changes from there: wheels it no longer names are stashed too, so a rollback puts
    them back without an index; then the wheels `--update` moves, the very files the look chose."""
    old = [p for p in record.get("pip_installed", []) if isinstance(p, dict)]
    old += [{"name": name, "version": version, "url": ""} for name, version in repair.adopt]
    if repair.missing:
        # the URL each came from this time (the recorded one, or this machine's index by hash)
        back = {p["name"]: p for p in pip_put_back(prefix, PipRepair(missing=repair.missing))}
        old = [back.get(str(p["name"]), p) for p in old]
    changed = _pip_change(record, plan)
    if not changed and not (moves and moves.names):
        return old
    dropped = _pip_dropped(record, plan)
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


def _pip_for_new_python(prefix: Path, plan: Plan, record: dict[str, Any]) -> list[dict[str, str]]:
    """The pip list installed anew into a python of another minor version (the old one's wheels
    are in the journal by now): at the versions the record has where pip offers them for this
    python, else as pip resolves them afresh; a lock's exact files as the lock has them."""
    recorded = {str(p["name"]): p for p in record.get("pip_installed", []) if isinstance(p, dict) and p.get("name")}
    keep = tuple((name, str(p.get("version"))) for name, p in recorded.items())
    # pip reports only what it installed: a wheel the new python already had (a move back to a
    # python whose site-packages conda left) stays recorded as it was
    recorded.update({p["name"]: p for p in pip_install(prefix, plan.pip_specs, locked=plan.pip_locked, keep=keep)})
    have = pip_state(prefix)
    return sorted((p for p in recorded.values() if (str(p["name"]), str(p.get("version"))) in have), key=lambda p: str(p["name"]))


def _pip_dropped(record: dict[str, Any], plan: Plan) -> set[str]:
    """The recorded wheels a changed pip list no longer names (pip installs again any that a
    remaining one depends on)."""
    if _pip_change(record, plan) == ():
        return set()
    return {str(p["name"]) for p in record.get("pip_installed", []) if isinstance(p, dict)} - _names(plan)


def _pip_resourced(record: dict[str, Any], plan: Plan) -> set[str]:
    """The wheels the pip list still names but takes from elsewhere now: to or from a URL
    (`proj==0.1` -> `proj @ git+URL@main`), or another commit or file (a lock that moved a git
    wheel's commit). pip takes an installed wheel of a fitting version for the new one, whatever it
    came from, so these go into the journal first and pip installs them from their new source."""
    from envkit.pip.resolve import direct_references  # packaging: loaded where pip runs

    old_specs = tuple(str(s) for s in record.get("pip") or [])

    def sources(specs: tuple[str, ...]) -> dict[str, str]:
        # a file pinned by hash is the same file wherever its URL says it is (another mirror)
        return {name: url.partition("#sha256=")[2] or url for name, (_, url, _) in direct_references(specs).items()}

    before, after = sources(old_specs), sources(plan.pip_specs)
    return {name for name in _spec_names(old_specs) & _names(plan) if before.get(name) != after.get(name)}


def _stash_wheels(prefix: Path, names: set[str]) -> None:
    dists = pip_dists(prefix)
    stash(prefix, tuple(path for name in sorted(names) if name in dists for path in dist_files(prefix, dists[name])))


def _names(plan: Plan) -> set[str]:
    return _spec_names(plan.pip_specs)


def _spec_names(specs: tuple[str, ...]) -> set[str]:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out = set()
    for spec in specs:
        try:
            out.add(str(canonicalize_name(Requirement(spec).name)))
        except InvalidRequirement:  # a locked URL: its file name starts with the name
            out.add(str(canonicalize_name(spec.rsplit("/", 1)[-1].split("-", 1)[0])))
    return out
