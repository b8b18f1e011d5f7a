"""The full look of `envkit sync`: recipe or lock -> plan -> the difference it would apply. The
solver, YAML and rattler load with this module: envkit.commands.sync imports it once the installer
child has started, so that the child's own start-up runs alongside."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from envkit.activation.writer import (
    recorded_activation,
)
from envkit.audit.engine import audit_plan
from envkit.audit.recipe_rules import plan_warnings
from envkit.commands.sync_quick import recorded_lock
from envkit.core.changes import diff_packages
from envkit.core.errors import UsageError
from envkit.core.notices import notify
from envkit.install.inplace import Installer
from envkit.pip.install import pip_file, pip_newest, pip_refs, pip_upgrades
from envkit.pip.repair import PipRepair, needed_wheels, pip_repair
from envkit.prefix.envrecord import EnvRecord, LockRef, Provenance, RecipeRef
from envkit.prefix.installed import PipDist, pip_dists, read_conda_meta
from envkit.prefix.pipurls import commit_shown, pip_shown, url_commit
from envkit.recipe.compile import compile_recipe
from envkit.recipe.loader import load_recorded
from envkit.recipe.model import Recipe
from envkit.solve import backend
from envkit.solve.plan import Plan, solve_recipe
from envkit.team.sync import SyncOutcome, diff_variables


@dataclass(frozen=True)
class Look:
    """What a sync would do, before it does anything."""

    recipe: Recipe
    plan: Plan
    records: list[Any]  # rattler's, for the installer
    changes: SyncOutcome
    provenance: Provenance  # the record's recipe and lock entries after the sync
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

    def preferred(self, record: EnvRecord) -> list[backend.Preferred]:
        """The recorded packages a solve keeps; a name to move that the env has neither as a conda
        package nor as a pip wheel is a typo."""
        if self.everything:
            return []
        recorded = [p for p in record.packages or () if p.url]
        names = {p.name for p in recorded}
        wheels = set(recorded_wheel_names(record))
        unknown = [n for n in self.names if n.lower() not in names and _canonical(n) not in wheels]
        if unknown:
            raise UsageError(
                f"--update {', '.join(unknown)}: envkit installed no package of that name in this env",
                hint="give conda's names as 'conda list' shows them and pip's as 'pip list' does, or --update-all",
            )
        moving = {n.lower() for n in self.names}
        return [(p.name, p.version, p.build, p.url) for p in recorded if p.name not in moving]

    def wheels(self, record: EnvRecord) -> tuple[str, ...]:
        """The recorded pip wheels this sync moves (their canonical names)."""
        recorded = recorded_wheel_names(record)
        if self.everything:
            return recorded
        named = {_canonical(n) for n in self.names} if self.names else set()
        return tuple(n for n in recorded if n in named)


def recorded_wheel_names(record: EnvRecord) -> tuple[str, ...]:
    """The wheels envkit installed, by their canonical names (as the record keeps them)."""
    return tuple(sorted({w.name for w in record.pip_installed}))


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


# radon cc 26: the sync's sources (recipe, lock, frozen lock) and what each moves; one look so that the difference shown is the one applied
def look(
    prefix: Path,
    record: EnvRecord,
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
    origin = record.recipe
    if origin is None or origin.path is None:
        raise UsageError(
            f"{prefix}: its record names no recipe file to sync to",
            hint=f"make the env again with 'envkit create RECIPE -p {prefix} --force'",
        )
    recipe = load_recorded(origin.source or "file", origin.path)
    warnings = plan_warnings(recipe, backend.native_platform())
    compiled = compile_recipe(recipe)
    lock_path = recorded_lock(record, lock) if (locked or lock or frozen) else None
    lock_info: LockRef | None = None
    # the channels the env was made from, mirrors included
    recorded = {c.name: c.url for c in record.channels if c.name != c.url}
    if lock_path is not None:
        from envkit.commands.create import CreateRequest, plan_from_lock  # create's machinery: for a lock only

        request = CreateRequest(
            origin.path, prefix=str(prefix), mirrors=tuple(recorded.items()), locked=True, lock=str(lock_path), frozen=frozen
        )
        outcome, lock_info, _ = plan_from_lock(request, recipe, compiled, prefix, warnings)
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
    repair = pip_repair(prefix, record, lambda: names_in(plan))  # packaging loads only if asked
    if dropped := pip_dropped(record, plan):  # not put back only to be taken away again
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
        pip=repair.lines() + pip_change(record, plan) + moves.lines + _python_move_lines(record, python_move),
        findings=tuple(audit_plan(plan, recipe.force)),
        lock_set_aside=None if lock_path else _lock_made_from(record),
        warnings=warnings,
    )
    provenance = Provenance(RecipeRef.of(recipe), lock_info)
    return Look(recipe, plan, outcome.records, changes, provenance, repair, moves, python_move)


def _python_move(installed: dict[str, str], planned: dict[str, str]) -> tuple[str, str] | None:
    """(old X.Y, new X.Y) where the change moves python to another minor version: its wheels are in
    the old python's site-packages, which the new one does not read."""
    old, new = (".".join(v.split(" ")[0].split(".")[:2]) if v else "" for v in (installed.get("python"), planned.get("python")))
    return (old, new) if old and new and old != new else None


def _python_move_lines(record: EnvRecord, move: tuple[str, str] | None) -> tuple[str, ...]:
    if move is None:
        return ()
    wheels = ", ".join(f"{w.name} {w.version}" for w in record.pip_installed)
    return (f"~ installed anew for python {move[1]} (the versions kept where pip has them for it): {wheels}",)


def _wheel_moves(prefix: Path, plan: Plan, record: EnvRecord, moving: Moving, dropped: set[str]) -> WheelMoves:
    """The wheels `--update` moves, and what they need: pip's own choice in the env, with conda's
    python packages and every other wheel held where they are (the recipe's pip list still met).
    What a changed pip list no longer names (`dropped`) goes, and is not moved first."""
    wheels = tuple(w for w in moving.wheels(record) if w not in dropped)
    named = () if moving.everything else tuple(w for w in wheels if w not in names_in(plan))
    if not wheels or not (plan.pip_specs or named):
        return WheelMoves()
    dists = pip_dists(prefix)
    recorded = {w.name: w.as_report() for w in record.pip_installed}
    install, required, plain = _pip_choices(prefix, plan, moving, wheels=wheels, named=named, dists=dists, recorded=recorded)
    ends = _ends(prefix, wheels, install, dists, recorded)
    newest = pip_newest(prefix, plain) if plain else {}  # an index that does not answer is said, not taken for "nothing newer"
    held = tuple(w for w in plain if w in newest and newest[w] != ends.get(w, {}).get("version"))
    if held and not moving.everything:
        _say_what_holds_back(prefix, plan, record=record, wheels=held, named=named, ends=ends)
    lines = _move_lines(record, plan, dists, wheels, ends)
    return WheelMoves(wheels, tuple(install), tuple(ends[n] for n in sorted(ends)), lines, frozenset(required))


def _pip_choices(
    prefix: Path,
    plan: Plan,
    moving: Moving,
    *,
    wheels: tuple[str, ...],
    named: tuple[str, ...],
    dists: dict[str, PipDist],
    recorded: dict[str, Any],
) -> tuple[list[dict[str, str]], set[str], tuple[str, ...]]:
    """What pip picks for the moving wheels, every other wheel held: an index's newest for a plain
    wheel, a branch's head for a git one; a file's URL is its own pin. Returns the picks, what they
    require, and the wheels an index answers for."""
    from envkit.pip.resolve import direct_references  # packaging: loaded where pip runs

    hold = tuple((name, dist.version) for name, dist in dists.items() if name not in wheels)
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
    return install, required, plain


def _ends(
    prefix: Path, wheels: tuple[str, ...], install: list[dict[str, str]], dists: dict[str, PipDist], recorded: dict[str, Any]
) -> dict[str, dict[str, str]]:
    """Where each wheel ends: pip's pick, else what the env has (what envkit installed, or a newer
    one installed by hand since, at the URL pip would install it from again); then what the picks
    newly need."""
    chosen = {m["name"]: m for m in install}
    ends: dict[str, dict[str, str]] = {}
    for wheel in wheels:
        if wheel in chosen:
            ends[wheel] = chosen[wheel]
        elif wheel in dists:
            old, dist = recorded.get(wheel, {}), dists[wheel]
            url = dist.reinstall_url(str(old.get("url") or ""), str(old.get("version")))  # a commit pip put there since, too
            if not url and str(old.get("version")) != dist.version:  # a newer one from an index: this machine's file for it
                url = pip_file(prefix, wheel, dist.version)
            ends[wheel] = {"name": wheel, "version": dist.version, "url": url}
    ends.update({name: m for name, m in chosen.items() if name not in ends})
    return ends


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
    prefix: Path, plan: Plan, *, record: EnvRecord, wheels: tuple[str, ...], named: tuple[str, ...], ends: dict[str, dict[str, str]]
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
    record: EnvRecord, plan: Plan, dists: dict[str, Any], wheels: tuple[str, ...], ends: dict[str, dict[str, str]]
) -> tuple[str, ...]:
    """Against the record: `~ name old -> new` for a wheel moved (the env may have it already, by
    hand), the put-back of one that stays but was changed by hand, `+ name version` for one the
    moved ones now need (not for a new requirement of the recipe's: its own `+ spec` line shows it)."""
    old = {w.name: pip_shown(w.version, w.url) for w in record.pip_installed}
    asked = spec_names(tuple(s for s in plan.pip_specs if s not in set(record.pip)))
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


def _lock_made_from(record: EnvRecord) -> str | None:
    return record.lock.path if record.lock else None


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


def pip_change(record: EnvRecord, plan: Plan) -> tuple[str, ...]:
    if plan.pip_locked:
        # a locked wheel is its file: the one the env has may have come from another URL (this
        # machine's index, envkit.pip.install), and is the same while its name and hash are
        before = {_locked_file(w.name, w.url): w.url for w in record.pip_installed}
        after = {_locked_file(*spec.split(" @ ", 1)): spec.partition(" @ ")[2] for spec in plan.pip_specs}
        return tuple(
            [f"+ {after[k]}" for k in sorted(after.keys() - before.keys())]
            + [f"- {before[k]}" for k in sorted(before.keys() - after.keys())]
        )
    old, new = set(record.pip), set(plan.pip_specs)
    return tuple([f"+ {s}" for s in sorted(new - old)] + [f"- {s}" for s in sorted(old - new)])


def _locked_file(name: str, url: str) -> tuple[str, str]:
    from packaging.utils import canonicalize_name  # packaging: loaded for pip lists only

    sha256 = url.partition("#sha256=")[2]
    return canonicalize_name(name.strip()), sha256 or url.strip()


def pip_dropped(record: EnvRecord, plan: Plan) -> set[str]:
    """The recorded wheels a changed pip list no longer names (pip installs again any that a
    remaining one depends on)."""
    if pip_change(record, plan) == ():
        return set()
    return {w.name for w in record.pip_installed} - names_in(plan)


def names_in(plan: Plan) -> set[str]:
    return spec_names(plan.pip_specs)


def spec_names(specs: tuple[str, ...]) -> set[str]:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out = set()
    for spec in specs:
        try:
            out.add(str(canonicalize_name(Requirement(spec).name)))
        except InvalidRequirement:  # a locked URL: its file name starts with the name
            out.add(str(canonicalize_name(spec.rsplit("/", 1)[-1].split("-", 1)[0])))
    return out
