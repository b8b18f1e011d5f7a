"""`envkit lock`: solve a recipe for each platform it declares and write one lock file.

Each platform is solved with that platform's virtual packages at conda-forge's floors (never this
machine's: a lock must hold for the whole team), audited like a plan (this machine's CPUs and
driver unjudged, for the same reason), and its pip list resolved for that platform's Python; all
platforms are solved at once over one shared gateway. Channels are kept by the URLs their names
have everywhere, never through this machine's mirrors.

Locking again keeps what the lock there pins wherever the recipe still allows it, as pixi and
conda-lock do: a package added to the recipe does not move every other one to its newest build.
`--update NAME` releases named pins, `--update-all` every one; what changed is shown per platform
(`--dry-run`: shown, not written)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from envkit.audit.engine import Finding, audit_plan
from envkit.audit.recipe_rules import require_consistent
from envkit.commands import Result
from envkit.commands.arguments import channel_args, given, json_flag, update_args
from envkit.core.changes import MARKS, change_text, differences
from envkit.core.errors import EnvkitError, ExitCode, UsageError
from envkit.core.fsutil import STDOUT, is_stdout, output_path, scratch_file
from envkit.core.notices import notify
from envkit.pip.pinned import LockedPip
from envkit.recipe.compile import CompiledRecipe, compile_recipe
from envkit.recipe.digest import resolved_digest
from envkit.recipe.loader import load_recipe
from envkit.recipe.model import Recipe
from envkit.recipe.platforms import known_platform
from envkit.recipe.settings import resolve
from envkit.solve import backend
from envkit.solve.channels import ResolvedChannel, check_local_channel, from_canonical, resolve_channels, to_canonical
from envkit.solve.plan import choose_channels, plan_from_records, solve_keeping, solve_or_explain, target
from envkit.team.lock import Lock, LockedPlatform, NewerLock, default_lock_path, moved, pins, read_lock, write_lock
from envkit.team.proofs import Proof, slice_digest
from envkit.ui.console import Out, escape
from envkit.ui.terminal import UI
from envkit.ui.views import findings_view

if TYPE_CHECKING:
    from envkit.commands.lock_show import ShownLock


@dataclass(frozen=True)
class PlatformSummary:
    """What the lock holds for one platform, and what its plan's audit found."""

    platform: str
    packages: int
    pip: int
    virtual_packages: tuple[str, ...]
    assumed: tuple[str, ...]
    findings: tuple[Finding, ...]
    changes: tuple[str, ...] | None = None  # against the lock this one replaces; None: that one had no such platform


@dataclass(frozen=True)
class LockOutcome:
    """The lock written (or refused) and a summary per platform."""

    path: str
    recipe: str
    recipe_digest: str
    platforms: tuple[PlatformSummary, ...]
    refused: bool = False
    previous: str | None = None  # the lock replaced, where one was there to read
    kept: bool = False  # its pins were kept where the recipe allows (not --update-all)
    updated: tuple[str, ...] = ()  # the pins --update released
    dropped: tuple[str, ...] = ()  # platforms the lock replaced had and this one has not (--platform)
    dry_run: bool = False  # solved and shown, not written


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("recipe", help="recipe name or path to a .yaml file")
    p.add_argument(
        "--platform", action="append", default=[], metavar="P", help="lock this platform (repeatable; default: the recipe's platforms)"
    )
    p.add_argument(
        "-o",
        "--output",
        type=given,
        metavar="FILE",
        help="where to write it, - for stdout (default: NAME.lock beside the recipe, ./NAME.lock for built-ins)",
    )
    update_args(p, kept="the lock's other pins are kept where they still fit", afresh="keep none of the lock's pins")
    p.add_argument("--dry-run", action="store_true", help="solve and show what the lock would change; write nothing")
    p.add_argument(
        "--show",
        action="store_true",
        help="solve nothing: list the lock's platform slices and the proofs of each (RECIPE may be the lock file itself)",
    )
    channel_args(p)
    json_flag(p)


def invoke(args: argparse.Namespace, ui: UI) -> Result[LockOutcome] | Result[ShownLock]:
    from envkit.solve.channels import parse_mirror_flags

    if args.show:
        from envkit.commands.lock_show import show_lock, show_view

        return Result("lock", show_lock(args.output or args.recipe), view=show_view)

    return lock(
        args.recipe,
        platforms=tuple(args.platform),
        output=args.output,
        extra_channels=tuple(args.channel),
        override_channels=args.override_channels,
        mirrors=tuple(parse_mirror_flags(args.mirror).items()),
        update=tuple(args.update),
        update_all=args.update_all,
        dry_run=args.dry_run,
    )


def team_checkout(path: Path) -> str | None:
    """The name of the git source whose checkout (envkit's own clone, kept at its pinned commit)
    holds `path`: the team's locks come into it through `recipes update`, never from envkit."""
    from envkit.recipe.sources import sources_holding

    return next((s.name for s in sources_holding(path) if s.kind == "git"), None)


def lock_in_a_clone(recipe: Recipe, source: str, flags: str = "") -> str:
    """How a team repo's lock is made: where the repo is edited, then committed and pulled in."""
    return (
        f"'envkit lock {Path(recipe.origin.path).name}{flags}' in a clone of the '{source}' repo, commit it, then 'envkit recipes update'"
    )


def refuse_team_checkout(recipe: Recipe, path: Path) -> None:
    """A lock written into envkit's checkout of a team repo would be taken for the team's by every
    locked create, and git refuses to update over it when the team commits theirs."""
    source = team_checkout(path)
    if source is not None:
        raise UsageError(
            f"{path} is in envkit's checkout of recipe source '{source}', which only 'envkit recipes update' changes: no lock was written",
            hint=f"{lock_in_a_clone(recipe, source)}; or keep one for yourself elsewhere: -o FILE, then create --lock FILE",
        )


def lock_platforms(recipe: Recipe, requested: tuple[str, ...]) -> tuple[str, ...]:
    for platform in requested:
        known_platform(platform, "--platform")
    return tuple(dict.fromkeys(requested)) or recipe.platforms or (backend.native_platform(),)


def solve_for_lock(
    recipe: Recipe,
    platforms: tuple[str, ...],
    channels: list[ResolvedChannel],
    keep: Lock | None = None,
    update: frozenset[str] = frozenset(),
) -> list[tuple[CompiledRecipe, Any, list[Any]]]:
    """(the recipe compiled for the platform, its target, records) per platform, solved at once,
    preferring what `keep` (the lock being replaced) pins for it, but for the `update` names."""
    for platform in platforms:
        for channel in channels:
            check_local_channel(channel, platform)
    jobs = []
    for platform in platforms:
        compiled = compile_recipe(recipe, platform)
        jobs.append((compiled, target(compiled, platform, detect=False)))
    if keep is None:
        solved = solve_or_explain(jobs, channels, name_platform=True)
    else:
        # the lock's URLs are the names' own: this machine reaches them through its mirrors
        moves = from_canonical(channels)
        pinned = [keep.for_platform(goal.platform) for _, goal in jobs]
        solved = solve_keeping(jobs, channels, [pins(old, moves, update) if old else [] for old in pinned], name_platform=True)
    return [(compiled, goal, records) for (compiled, goal), records in zip(jobs, solved, strict=True)]


def lock(
    recipe_ref: str,
    *,
    platforms: tuple[str, ...] = (),
    output: str | None = None,
    extra_channels: tuple[str, ...] = (),
    override_channels: bool = False,
    mirrors: tuple[tuple[str, str], ...] = (),
    update: tuple[str, ...] = (),
    update_all: bool = False,
    dry_run: bool = False,
) -> Result[LockOutcome]:
    recipe = load_recipe(recipe_ref)
    require_consistent(recipe)
    wanted = lock_platforms(recipe, platforms)
    channels = resolve_channels(choose_channels(compile_recipe(recipe, wanted[0]), list(extra_channels), override_channels), dict(mirrors))
    path = output_path(output) if output else default_lock_path(recipe)
    refuse_team_checkout(recipe, path)
    previous = previous_lock(path, recipe.name)
    released = released_pins(previous, path, update)
    keep = None if update_all else previous
    locked: list[LockedPlatform] = []
    summaries: list[PlatformSummary] = []
    blocking: list[str] = []
    solved = list(solve_for_lock(recipe, wanted, channels, keep, released))
    pips = _pip_for_each(solved, keep, released)
    for (compiled, goal, records), pip in zip(solved, pips, strict=True):
        plan = plan_from_records(compiled, path.parent / recipe.name, goal, channels, records, activation=resolve(compiled.activation))
        findings = tuple(audit_plan(plan, recipe.force, machine=False))  # a lock holds on any machine: none is judged
        blocking += [f"{goal.platform}: {f.rule_id} {f.title}: {f.evidence}" for f in findings if f.severity == "error"]
        portable = moved(records, to_canonical(channels))  # no mirror of this machine's
        locked.append(LockedPlatform(goal.platform, goal.described, portable, pip, compiled.activation.as_json()))
        before = previous.for_platform(goal.platform) if previous else None
        changes = lock_changes(before, portable, pip) if before else None
        summaries.append(PlatformSummary(goal.platform, len(records), len(pip), goal.described, goal.assumed, findings, changes))
    _say_unpinned_folders({q for p in locked for q in p.pip})
    digest = resolved_digest(recipe)
    outcome = LockOutcome(
        str(path),
        recipe.name,
        digest,
        tuple(summaries),
        previous=str(path) if previous else None,
        kept=keep is not None,
        updated=update,
        dropped=tuple(p.platform for p in previous.platforms if p.platform not in wanted) if previous else (),
        dry_run=dry_run,
    )
    if blocking:
        why = ("a locked plan fails the audit: no lock was written", "fix the recipe, or add the rule's id to its force: list")
        return Result("lock", replace(outcome, refused=True), int(ExitCode.FINDINGS), why, tuple(blocking), view=lock_view)
    if dry_run:
        return Result("lock", outcome, messages=("dry run: the lock was not written",), view=lock_view)
    made = Lock(recipe.name, digest, tuple(c.canonical for c in channels), tuple(locked))
    write_lock(path, replace(made, proofs=still_proven(previous, made, path)))
    return Result("lock", outcome, view=lock_view)


def still_proven(previous: Lock | None, made: Lock, path: Path) -> tuple[Proof, ...]:
    """The proofs of the lock replaced whose slice this one holds unchanged (envkit.team.proofs):
    a slice the update moved loses its proofs, the others keep theirs. The digests are taken from
    the lock as written and read back, as a later attestation reads it."""
    if previous is None or not previous.proofs or is_stdout(str(path)):
        return ()
    with scratch_file(path) as draft:
        write_lock(draft, made)
        written = read_lock(draft)
    digests = {(p.platform, slice_digest(written, p)) for p in written.platforms}
    return tuple(p for p in previous.proofs if (p.platform, p.slice_digest) in digests)


def _say_unpinned_folders(pip: set[LockedPip]) -> None:
    """A wheel pip builds from a local folder (`name @ file:///path/to/project`) is locked by its
    path and version only: nothing pins what the folder holds when someone installs from it."""
    for wheel in sorted(pip, key=lambda q: q.name):
        parts = urlsplit(wheel.url)
        if parts.scheme == "file" and Path(unquote(parts.path)).is_dir():
            notify(
                f"pip {wheel.name} {wheel.version} is locked as the folder {unquote(parts.path)}: the lock cannot pin what it holds"
                " (a wheel built from it, or a git URL at a commit, can be pinned)"
            )


def previous_lock(path: Path, recipe: str) -> Lock | None:
    """The lock `path` holds for `recipe`, which this one replaces: None where there is none; one
    of another recipe is not replaced. One that cannot be read (a merge's conflict markers) is
    said and left out: everything is then solved afresh."""
    if is_stdout(str(path)) or not path.is_file():
        return None
    try:
        found = read_lock(path)
    except NewerLock:
        raise  # written by a newer tool: never overwritten with an older format
    except EnvkitError as exc:
        notify(
            f"{exc.message}: its pins are not kept, every package was solved afresh (to keep one side's, git checkout --theirs or --ours it first)"
        )
        return None
    if found.recipe != recipe:  # -o naming another recipe's lock: a slip that would cost that team its pins
        raise UsageError(
            f"{path} locks recipe '{found.recipe}', not '{recipe}': it was left as it is", hint="give another -o, or remove that file first"
        )
    return found


def released_pins(previous: Lock | None, path: Path, update: tuple[str, ...]) -> frozenset[str]:
    """The names whose pins --update releases, as a lock spells them (conda's lowercased, pip's
    canonical); a name the lock does not hold is a typo, refused before anything is solved."""
    if not update:
        return frozenset()
    from packaging.utils import canonicalize_name  # loaded for --update only

    if previous is not None:
        conda = {r.name.normalized for p in previous.platforms for r in p.records}
        pip = {canonicalize_name(q.name) for p in previous.platforms for q in p.pip}
        unknown = [n for n in update if n.lower() not in conda and canonicalize_name(n) not in pip]
        if unknown:
            raise UsageError(
                f"--update {', '.join(unknown)}: the lock at {path} has no package of that name",
                hint="give names as the lock has them (conda's: pytorch, not torch), or --update-all",
            )
    return frozenset(n.lower() for n in update) | frozenset(canonicalize_name(n) for n in update)


def lock_changes(before: LockedPlatform, records: tuple[Any, ...], pip: tuple[LockedPip, ...]) -> tuple[str, ...]:
    """What a platform's packages did since the lock replaced, as sync says a change (`+ name
    version build`, `- ...`, `~ name old -> new`), then pip's (`pip ~ name old -> new`)."""
    conda = differences(
        {r.name.normalized: f"{r.version} {r.build}" for r in before.records},
        {r.name.normalized: f"{r.version} {r.build}" for r in records},
    )
    wheels = differences({q.name: q.shown for q in before.pip}, {q.name: q.shown for q in pip})
    return tuple(
        f"{kind}{MARKS[change]} {name} {change_text(change, old, new)}"
        for kind, found in (("", conda), ("pip ", wheels))
        for name, change, old, new in found
    )


def _pip_for_each(
    solved: list[tuple[CompiledRecipe, Any, list[Any]]], keep: Lock | None, released: frozenset[str]
) -> list[tuple[LockedPip, ...]]:
    """Each platform's pip list, resolved at once (envkit.pip.resolve.resolve_each) against its conda
    solution's python, holding the lock's versions but for `released`."""
    if not any(compiled.pip_specs for compiled, _, _ in solved):
        return [() for _ in solved]
    from envkit.pip.resolve import PipJob, at_locked_commits, resolve_each  # packaging: loaded for pip lists only

    jobs = []
    for compiled, goal, records in solved:
        python = next((str(r.version) for r in records if r.name.normalized == "python"), None)
        if compiled.pip_specs and python is None:
            raise UsageError(f"the recipe has a pip list but no python for {goal.platform}", hint="add python to the recipe")
        old = keep.for_platform(goal.platform) if keep else None
        held = tuple(p for p in old.pip if p.name not in released) if old else ()
        jobs.append(
            PipJob(
                at_locked_commits(compiled.pip_specs, held),
                goal.platform,
                python or "",
                frozenset(r.name.normalized for r in records),
                dict(v.partition("=")[::2] for v in goal.described),
                tuple((p.name, p.version) for p in held),
            )
        )
    return resolve_each(jobs)


def lock_view(c: Out, out: LockOutcome) -> None:
    verb = "not written (the audit refused a platform's plan)" if out.refused else "would write" if out.dry_run else "wrote"
    where = "the lock to stdout" if out.path == STDOUT else f"[bold]{escape(out.path)}[/bold]"
    c.print(f"{verb} {where} for recipe {out.recipe} (digest {out.recipe_digest[:12]})")
    if out.previous and out.kept:
        but = f", but for {', '.join(out.updated)}" if out.updated else ""
        c.print(f"  kept the pins of the lock it replaces where the recipe allows{but} (--update NAME moves one, --update-all every one)")
    elif out.previous:
        c.print("  solved afresh (--update-all)")
    for p in out.platforms:
        pip = f", {p.pip} pip" if p.pip else ""
        c.print(f"  {p.platform}: {p.packages} packages{pip}; virtual packages {escape(', '.join(p.virtual_packages) or '-')}")
        for line in p.assumed:
            c.print(f"    [yellow]{escape(line)}[/yellow]")
        if out.previous:
            changes = ("new in this lock",) if p.changes is None else p.changes or ("unchanged",)
            for line in changes:
                c.print(f"    {escape(line)}")
        findings_view(c, [f for f in p.findings if f.severity != "info"], indent="    ")
    for platform in out.dropped:
        c.print(f"  [yellow]{platform}: dropped: the lock it replaces had it, --platform did not ask for it[/yellow]")
