"""`envkit create`: resolve -> check -> solve -> plan -> (confirm) -> create -> activation -> probe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envkit.commands import Result
from envkit.create import CreatedEnv, create_env, update_record_probe
from envkit.envs import target_prefix
from envkit.errors import ExitCode, UsageError
from envkit.probe.model import ProbeReport
from envkit.probe.runner import run_probe, spec_for
from envkit.recipe.compile import compile_recipe
from envkit.recipe.consistency import require_consistent
from envkit.recipe.loader import load_recipe
from envkit.solve import Plan, solve_recipe


@dataclass(frozen=True)
class CreateRequest:
    recipe: str
    name: str | None = None
    prefix: str | None = None
    channels: tuple[str, ...] = ()
    override_channels: bool = False
    mirrors: tuple[tuple[str, str], ...] = ()
    dry_run: bool = False
    force: bool = False
    probe: bool = True


@dataclass(frozen=True)
class CreateOutcome:
    plan: Plan
    dry_run: bool
    created: CreatedEnv | None
    probe: ProbeReport | None
    aborted: bool = False


def create(
    request: CreateRequest,
    *,
    show_plan: Callable[[Plan], None] | None = None,
    confirm: Callable[[Plan], bool] | None = None,
    reporter: Any | None = None,
) -> Result:
    if request.name and request.prefix:
        raise UsageError("give either -n NAME or -p PREFIX, not both")
    recipe = load_recipe(request.recipe)
    findings = require_consistent(recipe)
    compiled = compile_recipe(recipe)
    prefix = target_prefix(request.name or (None if request.prefix else recipe.name), request.prefix)
    outcome = solve_recipe(
        compiled,
        prefix,
        extra_channels=list(request.channels),
        override_channels=request.override_channels,
        mirrors=dict(request.mirrors),
        warnings=tuple(f"{f.rule.id}: {f.message}" for f in findings),
    )
    plan = outcome.plan
    if request.dry_run:
        return Result("create", CreateOutcome(plan, True, None, None))
    if show_plan is not None:
        show_plan(plan)
    if confirm is not None and not confirm(plan):
        return Result("create", CreateOutcome(plan, False, None, None, aborted=True), int(ExitCode.OK), ("aborted: nothing was changed",))
    created = create_env(plan, outcome.records, recipe.origin, force=request.force, reporter=reporter)
    if not request.probe:
        return Result("create", CreateOutcome(plan, False, created, None))
    report = run_probe(prefix, spec_for(prefix, recipe))
    update_record_probe(prefix, report.summary(), report.healthy)
    messages: tuple[str, ...] = ()
    code = ExitCode.OK
    if not report.healthy:
        code = ExitCode.FINDINGS
        messages = (
            f"the env was created but its probe failed; it is kept at {prefix} and marked unhealthy in conda-meta/envkit.json",
            f"fix: follow each failed check's remedy, then 'envkit probe -p {prefix}'; or remove it with 'rm -rf {prefix}'",
        )
    return Result("create", CreateOutcome(plan, False, created, report), int(code), messages)
