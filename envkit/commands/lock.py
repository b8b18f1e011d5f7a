"""`envkit lock`: solve a recipe for each platform it declares and write one lock file.

Each platform is solved with that platform's virtual packages at conda-forge's floors (never this
machine's: a lock must hold for the whole team), audited like a plan (this machine's CPUs and
driver unjudged, for the same reason), and its pip list resolved for that platform's Python; all
platforms are solved at once over one shared gateway. Channels are kept by the URLs their names
have everywhere, never through this machine's mirrors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit import backend, paths
from envkit.activation.model import resolve
from envkit.audit.engine import Finding, audit_plan
from envkit.channels import ResolvedChannel, check_local_channel, resolve_channels, to_canonical
from envkit.commands import Result
from envkit.errors import ExitCode, UsageError
from envkit.fsutil import output_path
from envkit.lock import Lock, LockedPip, LockedPlatform, moved, write_lock
from envkit.recipe.compile import CompiledRecipe, compile_recipe
from envkit.recipe.consistency import require_consistent
from envkit.recipe.digest import resolved_digest
from envkit.recipe.loader import load_recipe
from envkit.recipe.model import Recipe
from envkit.recipe.platforms import known_platform
from envkit.solve import choose_channels, plan_from_records, solve_or_explain, target


@dataclass(frozen=True)
class PlatformSummary:
    """What the lock holds for one platform, and what its plan's audit found."""

    platform: str
    packages: int
    pip: int
    virtual_packages: tuple[str, ...]
    assumed: tuple[str, ...]
    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class LockOutcome:
    """The lock written (or refused) and a summary per platform."""

    path: str
    recipe: str
    recipe_digest: str
    platforms: tuple[PlatformSummary, ...]
    refused: bool = False


def default_lock_path(recipe: Recipe) -> Path:
    return paths.lock_beside(recipe.name, recipe.origin.source, recipe.origin.path)


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
    recipe: Recipe, platforms: tuple[str, ...], channels: list[ResolvedChannel]
) -> list[tuple[CompiledRecipe, Any, list[Any]]]:
    """(the recipe compiled for the platform, its target, records) per platform, solved at once."""
    for platform in platforms:
        for channel in channels:
            check_local_channel(channel, platform)
    jobs = []
    for platform in platforms:
        compiled = compile_recipe(recipe, platform)
        jobs.append((compiled, target(compiled, platform, detect=False)))
    solved = solve_or_explain(jobs, channels, name_platform=True)
    return [(compiled, goal, records) for (compiled, goal), records in zip(jobs, solved, strict=True)]


def lock(
    recipe_ref: str,
    *,
    platforms: tuple[str, ...] = (),
    output: str | None = None,
    extra_channels: tuple[str, ...] = (),
    override_channels: bool = False,
    mirrors: tuple[tuple[str, str], ...] = (),
) -> Result:
    recipe = load_recipe(recipe_ref)
    require_consistent(recipe)
    wanted = lock_platforms(recipe, platforms)
    channels = resolve_channels(choose_channels(compile_recipe(recipe, wanted[0]), list(extra_channels), override_channels), dict(mirrors))
    path = output_path(output) if output else default_lock_path(recipe)
    refuse_team_checkout(recipe, path)
    locked: list[LockedPlatform] = []
    summaries: list[PlatformSummary] = []
    blocking: list[str] = []
    for compiled, goal, records in solve_for_lock(recipe, wanted, channels):
        plan = plan_from_records(compiled, path.parent / recipe.name, goal, channels, records, activation=resolve(compiled.activation))
        findings = tuple(audit_plan(plan, recipe.force, machine=False))  # a lock holds on any machine: none is judged
        blocking += [f"{goal.platform}: {f.rule_id} {f.title}: {f.evidence}" for f in findings if f.severity == "error"]
        python = next((str(r.version) for r in records if r.name.normalized == "python"), None)
        pip: tuple[LockedPip, ...] = ()
        if compiled.pip_specs:
            if python is None:
                raise UsageError(f"the recipe has a pip list but no python for {goal.platform}", hint="add python to the recipe")
            virtual = dict(v.partition("=")[::2] for v in goal.described)
            from envkit.piplock import resolve as resolve_pip  # packaging: loaded for pip lists only

            pip = resolve_pip(compiled.pip_specs, goal.platform, python, {r.name.normalized for r in records}, virtual)
        portable = moved(records, to_canonical(channels))  # no mirror of this machine's
        locked.append(LockedPlatform(goal.platform, goal.described, portable, pip, compiled.activation.as_json()))
        summaries.append(PlatformSummary(goal.platform, len(records), len(pip), goal.described, goal.assumed, findings))
    digest = resolved_digest(recipe)
    if blocking:
        outcome = LockOutcome(str(path), recipe.name, digest, tuple(summaries), refused=True)
        why = ("a locked plan fails the audit: no lock was written", "fix the recipe, or add the rule's id to its force: list")
        return Result("lock", outcome, int(ExitCode.FINDINGS), why, tuple(blocking))
    write_lock(path, Lock(recipe.name, digest, tuple(c.canonical for c in channels), tuple(locked)))
    return Result("lock", LockOutcome(str(path), recipe.name, digest, tuple(summaries)))
